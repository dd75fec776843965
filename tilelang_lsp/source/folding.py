"""Small pieces the argument inference shares: constant folding of arithmetic over literals,
the calls it may compute, and helpers that walk a function's own statements."""

from __future__ import annotations

import ast
import contextlib
import math
import operator
from collections.abc import Iterator
from typing import Any


def own_nodes(function: ast.FunctionDef | ast.AsyncFunctionDef | ast.If) -> Iterator[ast.AST]:
    """The nodes of a function's (or ``if`` block's) body, not of functions or classes defined inside it."""
    stack: list[ast.AST] = list(reversed(function.body))
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        stack.extend(reversed(list(ast.iter_child_nodes(node))))


def is_main_guard(node: ast.stmt) -> bool:
    """``if __name__ == "__main__":``"""
    return (
        isinstance(node, ast.If)
        and isinstance(node.test, ast.Compare)
        and isinstance(node.test.left, ast.Name)
        and node.test.left.id == "__name__"
        and any(isinstance(c, ast.Constant) and c.value == "__main__" for c in node.test.comparators)
    )


def bound_names(node: ast.AST) -> Iterator[str]:
    """Names a statement binds (assignment targets, imports, definitions), not inside functions."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        yield node.name
        return
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        for alias in node.names:
            yield (alias.asname or alias.name).split(".")[0]
        return
    for child in ast.walk(node):
        if isinstance(child, ast.Name) and isinstance(child.ctx, ast.Store):
            yield child.id


class Unknown(Exception):
    """A call-site argument whose value cannot be known without running the caller."""


MAX_DEPTH = 40
"""How many names, parameters and calls a value is followed through before giving up."""
TENSOR_FACTORIES = ("randn", "rand", "empty", "zeros", "ones", "full", "randint", "empty_strided")
"""``torch.randn(M, K, ...)`` and friends: calls whose size arguments are a new tensor's shape."""
SAME_SHAPE = (
    *("cuda", "cpu", "to", "half", "float", "bfloat16", "double", "int", "long", "bool", "type"),
    *("contiguous", "clone", "detach", "requires_grad_", "normal_", "uniform_", "zero_", "fill_"),
    *("random_", "abs", "exp", "sigmoid", "softmax", "relu", "tanh", "sqrt", "neg"),
)
"""Tensor methods that keep the shape: ``torch.randn(M, K).cuda().half()`` is ``(M, K)``."""
RESHAPES = ("view", "reshape", "expand", "new_empty", "new_zeros", "new_ones")
"""Tensor methods whose arguments are the new shape."""
MUTATORS = ("update", "pop", "setdefault", "clear", "append", "extend", "insert", "remove", "__setitem__")
"""Methods that change a dict or list in place: its literal no longer tells its value."""
PURE_ROOTS = ("math", "T", "tl", "tilelang")
"""Modules whose functions a value bound away from the call may call (``1 / math.sqrt(dim)``),
besides functions called by plain name; any other call there (``torch.randn(...)``,
``torch.cuda.get_device_capability()``) makes the value unknown."""
FOLDED_CALLS: dict[str, Any] = {
    "min": min,
    "max": max,
    "abs": abs,
    "int": int,
    "float": float,
    "round": round,
    "len": len,
    "math.sqrt": math.sqrt,
    "math.ceil": math.ceil,
    "math.floor": math.floor,
    "math.log2": math.log2,
    "math.log": math.log,
    "math.prod": math.prod,
    "T.ceildiv": lambda a, b: -(-a // b),
    "tl.ceildiv": lambda a, b: -(-a // b),
    "tilelang.cdiv": lambda a, b: -(-a // b),
}
"""Calls computed when their arguments are all known."""
_BINARY: dict[type[ast.operator], Any] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
    ast.LShift: operator.lshift,
    ast.RShift: operator.rshift,
    ast.BitOr: operator.or_,
    ast.BitAnd: operator.and_,
    ast.BitXor: operator.xor,
}
_UNARY: dict[type[ast.unaryop], Any] = {
    ast.USub: operator.neg,
    ast.UAdd: operator.pos,
    ast.Not: operator.not_,
    ast.Invert: operator.invert,
}
_COMPARE: dict[type[ast.cmpop], Any] = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.Is: operator.is_,
    ast.IsNot: operator.is_not,
    ast.In: lambda a, b: a in b,
    ast.NotIn: lambda a, b: a not in b,
}
NOT_VALUES = (
    *(ast.Lambda, ast.NamedExpr, ast.Await, ast.Yield, ast.YieldFrom, ast.Starred),
    *(ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp),
)
"""Expressions never substituted into a call's arguments."""


def item_of(container: ast.expr, index: int) -> ast.Subscript:
    """``container[index]``, for one name of ``a, b = pair`` or a loop variable's first value."""
    return ast.Subscript(value=container, slice=ast.Constant(index), ctx=ast.Load())


def root_name(node: ast.expr) -> str | None:
    """``torch`` for ``torch.cuda.current_device``."""
    while isinstance(node, ast.Attribute):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def is_plain(value: object) -> bool:
    return value is None or isinstance(value, (bool, int, float, str))


def is_small(value: object) -> bool:
    """Whether a folded value is worth a literal (a huge number or string stays an expression)."""
    if isinstance(value, int):
        return value.bit_length() <= 1024
    return not isinstance(value, str) or len(value) <= 4096


def fold(node: ast.expr) -> ast.expr:
    """``node`` computed to a constant when it is arithmetic, a comparison or a choice over constants."""
    try:
        if (
            isinstance(node, ast.BinOp)
            and isinstance(node.left, ast.Constant)
            and isinstance(node.right, ast.Constant)
        ):
            left, right = node.left.value, node.right.value
            if not (is_plain(left) and is_plain(right)) or type(node.op) not in _BINARY:
                return node
            if (
                isinstance(node.op, (ast.Pow, ast.LShift))
                and isinstance(right, (int, float))
                and right > 1024
            ):
                return node
            if isinstance(node.op, ast.Mult) and (isinstance(left, str) or isinstance(right, str)):
                return node  # "ab" * n: not a size
            result = _BINARY[type(node.op)](left, right)
        elif isinstance(node, ast.UnaryOp) and isinstance(node.operand, ast.Constant):
            if not is_plain(node.operand.value):
                return node
            result = _UNARY[type(node.op)](node.operand.value)
        elif isinstance(node, ast.Compare) and all(
            isinstance(n, ast.Constant) for n in [node.left, *node.comparators]
        ):
            values = [n.value for n in [node.left, *node.comparators] if isinstance(n, ast.Constant)]
            result = all(
                _COMPARE[type(op)](a, b) for op, a, b in zip(node.ops, values, values[1:], strict=False)
            )
        elif isinstance(node, ast.BoolOp) and all(isinstance(n, ast.Constant) for n in node.values):
            values = [n.value for n in node.values if isinstance(n, ast.Constant)]
            result = values[0]
            for value in values[1:]:
                if (not result) if isinstance(node.op, ast.And) else bool(result):
                    break
                result = value
        else:
            return node
    except (ArithmeticError, TypeError, ValueError):
        return node  # kept as written: the worker reports the error where the user can see it
    if not (is_plain(result) and is_small(result)):
        return node
    return ast.copy_location(ast.Constant(result), node)


def element_of(container: ast.expr, index: ast.expr) -> ast.expr | None:
    """``container[index]`` for a tuple, list or dict literal and a constant index."""
    if not isinstance(index, ast.Constant):
        return None
    if isinstance(container, (ast.Tuple, ast.List)) and isinstance(index.value, int):
        if any(isinstance(e, ast.Starred) for e in container.elts):
            return None
        with contextlib.suppress(IndexError):
            return container.elts[index.value]
        return None
    if isinstance(container, ast.Dict):
        for key, value in zip(container.keys, container.values, strict=True):
            if key is None:
                return None
            if isinstance(key, ast.Constant) and key.value == index.value:
                return value
    return None


def field_default(value: ast.expr) -> ast.expr:
    """``field(default=64)`` of a dataclass is 64."""
    if isinstance(value, ast.Call) and ast.unparse(value.func) in ("field", "dataclasses.field"):
        for keyword in value.keywords:
            if keyword.arg == "default":
                return keyword.value
    return value


def option_default(keywords: dict[str, ast.expr]) -> ast.expr | None:
    action = keywords.get("action")
    action_name = action.value if isinstance(action, ast.Constant) else None
    default = keywords.get("default")
    if default is None:
        if action_name in ("store_true", "store_false"):
            return ast.Constant(action_name == "store_false")
        return None  # argparse gives None: not a size anyone means to analyze with
    kind = keywords.get("type")
    if isinstance(default, ast.Constant) and isinstance(default.value, str) and isinstance(kind, ast.Name):
        # argparse converts a string default with type=
        converter = {"int": int, "float": float}.get(kind.id)
        if converter is not None:
            with contextlib.suppress(ValueError):
                return ast.Constant(converter(default.value))
    return default
