"""Evaluate a recorded layout's forward expressions for concrete coordinates, without TileLang.

A trace is data: its expressions (``_i // 64 * 64 + _j % 8 // 2``, as TileLang prints them) are
parsed with ``ast`` and evaluated by walking a small whitelist of integer arithmetic (``+ - * //
%``, bit operations, comparisons, ``T.if_then_else``, ``T.min``/``T.max`` and friends). Anything
else is refused with ``LayoutExpressionError``; no name outside the layout's own variables is
looked up and nothing is imported or called. The cost is bounded: at most ``MAX_NODES`` operations,
constants of at most ``MAX_CONSTANT_BITS`` bits, no value wider than ``MAX_VALUE_BITS`` bits.
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable, Iterator, Mapping, Sequence
from functools import lru_cache
from itertools import product

from irtrace.trace.schema import BufferLayout

MAX_EXPRESSION_CHARS = 20_000
"""Longer texts are refused: no layout TileLang prints comes near it."""
MAX_NODES = 2_000
"""Most operations in one expression (TileLang's longest swizzles have about a hundred)."""
MAX_CONSTANT_BITS = 64
"""Widest integer constant read: index arithmetic is 32- or 64-bit."""
MAX_VALUE_BITS = 128
"""Widest value an operation may produce; past it the expression is refused. With constants and
coordinates this narrow, each operation costs a few machine words, so the node count bounds the
time (two 10,000-digit constants multiplied would cost a millisecond each)."""


class LayoutExpressionError(ValueError):
    """A forward expression that is not the integer arithmetic TileLang prints."""


def _floordiv(a: int, b: int) -> int:
    if b == 0:
        raise LayoutExpressionError("division by zero")
    return a // b


def _floormod(a: int, b: int) -> int:
    if b == 0:
        raise LayoutExpressionError("modulo by zero")
    return a % b


def _truncdiv(a: int, b: int) -> int:
    if b == 0:
        raise LayoutExpressionError("division by zero")
    quotient = abs(a) // abs(b)
    return quotient if (a >= 0) == (b >= 0) else -quotient


def _truncmod(a: int, b: int) -> int:
    return a - _truncdiv(a, b) * b


_BINARY: dict[type[ast.operator], Callable[[int, int], int]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.FloorDiv: _floordiv,
    ast.Mod: _floormod,
    ast.BitXor: operator.xor,
    ast.BitAnd: operator.and_,
    ast.BitOr: operator.or_,
    ast.RShift: operator.rshift,
    ast.LShift: lambda a, b: a << min(b, 64),
}
_COMPARE: dict[type[ast.cmpop], Callable[[int, int], bool]] = {
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
}
_CALLS: dict[str, Callable[..., int]] = {
    "min": min,
    "max": max,
    "floordiv": _floordiv,
    "floormod": _floormod,
    "truncdiv": _truncdiv,
    "truncmod": _truncmod,
    "bitwise_xor": operator.xor,
    "bitwise_and": operator.and_,
    "bitwise_or": operator.or_,
    "shift_right": operator.rshift,
    "shift_left": lambda a, b: a << min(b, 64),
    "if_then_else": lambda cond, a, b: a if cond else b,
    "Select": lambda cond, a, b: a if cond else b,
}


_ARITY = {"if_then_else": 3, "Select": 3}
"""Arguments each of ``_CALLS`` takes when not 2."""


@lru_cache(maxsize=4096)
def _parse(text: str) -> ast.expr:
    if len(text) > MAX_EXPRESSION_CHARS:
        raise LayoutExpressionError(
            f"an expression of {len(text)} characters (at most {MAX_EXPRESSION_CHARS})"
        )
    try:
        return ast.parse(text.strip(), mode="eval").body
    except SyntaxError as error:
        raise LayoutExpressionError(f"not an expression: {error.msg}") from None
    except (MemoryError, RecursionError, ValueError):  # CPython's parser on very deep nesting
        raise LayoutExpressionError("not an expression: nested too deeply") from None


def _bounded(value: int) -> int:
    """``value``, unless it is wider than ``MAX_VALUE_BITS`` bits."""
    if value.bit_length() > MAX_VALUE_BITS:
        raise LayoutExpressionError(f"a value wider than {MAX_VALUE_BITS} bits")
    return value


def _call_name(func: ast.expr) -> str | None:
    """``min``, ``T.min``, ``tirx.floordiv``...: the last name of a plain or dotted callee."""
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
        return func.attr
    return None


Compiled = Callable[[Mapping[str, int]], int]
"""An expression made ready to evaluate: a tree of closures, one per node of the whitelist."""


def _compile(node: ast.expr) -> Compiled:
    """``node`` as closures, refusing anything outside the whitelist before anything runs."""
    if isinstance(node, ast.Constant) and isinstance(node.value, int):
        value = int(node.value)
        if value.bit_length() > MAX_CONSTANT_BITS:
            raise LayoutExpressionError(
                f"an integer constant of {value.bit_length()} bits (at most {MAX_CONSTANT_BITS})"
            )
        return lambda env: value
    if isinstance(node, ast.Name):
        name = node.id

        def lookup(env: Mapping[str, int]) -> int:
            if name in env:
                return env[name]
            raise LayoutExpressionError(f"unknown name {name!r}")

        return lookup
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        binary, left, right = _BINARY[type(node.op)], _compile(node.left), _compile(node.right)
        return lambda env: _bounded(binary(left(env), right(env)))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd, ast.Not)):
        operand = _compile(node.operand)
        if isinstance(node.op, ast.USub):
            return lambda env: -operand(env)
        if isinstance(node.op, ast.Not):
            return lambda env: int(not operand(env))
        return operand
    if isinstance(node, ast.Compare) and all(type(op) in _COMPARE for op in node.ops):
        first = _compile(node.left)
        rest = [
            (_COMPARE[type(op)], _compile(right))
            for op, right in zip(node.ops, node.comparators, strict=True)
        ]

        def compare(env: Mapping[str, int]) -> int:
            left = first(env)
            for test, right_of in rest:
                right = right_of(env)
                if not test(left, right):
                    return 0
                left = right
            return 1

        return compare
    if isinstance(node, ast.BoolOp):
        values = [_compile(value) for value in node.values]
        if isinstance(node.op, ast.And):
            return lambda env: int(all(value(env) for value in values))
        return lambda env: int(any(value(env) for value in values))
    if isinstance(node, ast.IfExp):
        test, body, orelse = _compile(node.test), _compile(node.body), _compile(node.orelse)
        return lambda env: body(env) if test(env) else orelse(env)
    if isinstance(node, ast.Call) and not node.keywords:
        callee = _call_name(node.func)
        if callee is not None and callee in _CALLS and len(node.args) == _ARITY.get(callee, 2):
            call, args = _CALLS[callee], [_compile(arg) for arg in node.args]
            return lambda env: _bounded(int(call(*(arg(env) for arg in args))))
        if callee in ("int32", "int64", "uint32") and len(node.args) == 1:
            return _compile(node.args[0])
        dtype = node.args[0] if callee == "Cast" and len(node.args) == 2 else None
        if isinstance(dtype, ast.Constant) and isinstance(dtype.value, str):  # T.Cast("int32", x)
            return _compile(node.args[1])
    raise LayoutExpressionError(f"unsupported expression: {ast.unparse(node)[:80]}")


@lru_cache(maxsize=4096)
def compiled(text: str) -> Compiled:
    """The expression ``text`` parsed and compiled once (``LayoutExpressionError`` if refused)."""
    try:
        tree = _parse(text)
        nodes = sum(1 for _ in ast.walk(tree))
        if nodes > MAX_NODES:
            raise LayoutExpressionError(f"an expression of {nodes} operations (at most {MAX_NODES})")
        return _compile(tree)
    except RecursionError:
        raise LayoutExpressionError("an expression nested too deeply") from None


def evaluate(text: str, env: Mapping[str, int]) -> int:
    """The value of one forward expression for the coordinates in ``env``."""
    try:
        return compiled(text)(env)
    except RecursionError:
        raise LayoutExpressionError("an expression nested too deeply") from None


def _env(layout: BufferLayout, coords: Sequence[int], replica: int) -> dict[str, int]:
    if len(coords) != len(layout.forward_vars):
        raise LayoutExpressionError(f"{len(coords)} coordinates for a layout of {len(layout.forward_vars)}")
    env = dict(zip(layout.forward_vars, coords, strict=True))
    if layout.replicate_var is not None:
        env[layout.replicate_var] = replica
    return env


def forward_index(layout: BufferLayout, coords: Sequence[int], replica: int = 0) -> tuple[int, ...]:
    """Where element ``coords`` goes: its output coordinates (a fragment: the local index)."""
    env = _env(layout, coords, replica)
    return tuple(evaluate(expr, env) for expr in layout.forward_index)


def forward_thread(layout: BufferLayout, coords: Sequence[int], replica: int = 0) -> int:
    """The thread that holds element ``coords`` of a fragment (replica ``replica`` of it), counted
    from 0 within the fragment's threads (add ``thread_offset`` for ``threadIdx.x``)."""
    if layout.forward_thread is None:
        raise LayoutExpressionError(f"{layout.buffer} is not a fragment: it has no thread mapping")
    return evaluate(layout.forward_thread, _env(layout, coords, replica))


def elements(layout: BufferLayout) -> Iterator[tuple[int, ...]]:
    """Every coordinate of the layout's input shape, row-major (symbolic shapes have none)."""
    dims = [dim for dim in layout.input_shape if isinstance(dim, int)]
    if len(dims) != len(layout.input_shape):
        raise LayoutExpressionError(f"{layout.buffer} has a symbolic shape {layout.input_shape}")
    return product(*(range(dim) for dim in dims))
