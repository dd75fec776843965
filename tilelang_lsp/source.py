"""What the source text alone says: kernels, directives, call sites, allocations, project config.

Pure Python (``ast``, ``tomllib``); no tilelang. The server uses it for source-only hints (an
untrusted workspace, or a file that does not compile) and the worker to pick arguments and targets.
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import copy
import math
import operator
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from irtrace.core.errors import UsageError
from irtrace.core.specs import DtypeName, Expression, literal_value, parse_call_arguments
from irtrace.core.targets import ALIASES, ASCEND, PORTABLE, TARGETS

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

DIRECTIVE = re.compile(r"#\s*tilelang:\s*(?P<body>.*)$")
_DIRECTIVE_ARGS = re.compile(r"args\s*\(")
_DIRECTIVE_TARGET = re.compile(r"target\s*=\s*(?P<target>[\w:.\-]+)")
_ALLOC_LINE = re.compile(
    r"^(?P<indent>\s*)(?P<name>[A-Za-z_]\w*)\s*=\s*(?P<call>\w+\.alloc_(?P<kind>\w+)\s*\(.*)$"
)
_TENSOR_PARAM = re.compile(r"(?P<name>[A-Za-z_]\w*)\s*:\s*\w+\.(?:Tensor|Buffer|StridedTensor)\s*[(\[]")
_EMPTY_LINE = re.compile(r"^(?P<indent>\s*)(?P<name>[A-Za-z_]\w*)\s*=\s*(?P<call>\w+\.empty\s*\(.*)$")
_USES_TILELANG = re.compile(r"^[ \t]*(?:import|from)[ \t]+tilelang\b", re.MULTILINE)
_TENSOR_TYPES = ("Tensor", "Buffer", "StridedTensor", "FragmentBuffer", "SharedBuffer", "LocalBuffer")
"""Annotations that make an eager ``@tilelang.jit`` parameter a tensor (it takes no value)."""
_SIZE_DECLARATIONS = ("const", "dynamic", "symbolic")
"""``T.const(...)``, ``T.dynamic(...)``, ``T.symbolic(...)``: size variables declared by name."""
_KERNEL_METHODS = ("compile", "get_tir", "get_kernel_source")
"""``kernel.compile(M=1024, ...)``: calls of a jit kernel's methods that take its arguments."""

SCOPE_OF_ALLOC = {
    "shared": "shared.dyn",
    "fragment": "local.fragment",
    "local": "local",
    "var": "local.var",
    "global": "global",
    "barrier": "shared.barrier",
    "cluster_barrier": "shared.cluster_barrier",
    "tmem": "shared.tmem",
    "reducer": "local.reducer",
    "l1": "shared.l1",
    "l0a": "shared.l0a",
    "l0b": "shared.l0b",
    "l0c": "shared.l0c",
}
ASCEND_SCOPE_NAMES = {
    "shared.dyn": "UB",
    "shared.l1": "L1",
    "shared.l0a": "L0A",
    "shared.l0b": "L0B",
    "shared.l0c": "L0C",
}


@dataclass(frozen=True)
class Directive:
    """``# tilelang: args(M=1024, ...) target=cuda:sm_90`` above a kernel."""

    line: int
    """1-based line of the comment."""
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)
    has_args: bool = False
    target: str | None = None
    error: str | None = None
    """Why the directive could not be read, for a diagnostic."""


@dataclass(frozen=True)
class CallSite:
    """A call of the kernel in the same file whose arguments are known without running it:
    ``matmul(1024, 1024, 1024)``, ``matmul.compile(M=1024, ...)``, ``gemm(a, b, block_M=64)``."""

    line: int
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    """Literals, names bound to literals in the caller's scope (substituted), or ``Expression``s
    over module-level names (``1 << 20``, ``HIDDEN``, ``determine_fp8_type()``)."""
    target: str | None = None
    """``target=`` of the ``tilelang.compile(...)`` call around it, if any."""
    origin: str | None = None
    """Where the call is written when not in this file (``the spec in /path/irtrace.toml``)."""


@dataclass(frozen=True)
class KernelSource:
    """A top-level function that builds a kernel, as the source shows it."""

    name: str
    line: int
    """1-based line of the ``def``."""
    is_jit: bool
    params: tuple[str, ...]
    required: tuple[str, ...]
    """Parameters without a default."""
    directive: Directive | None = None
    call_site: CallSite | None = None
    decorator_target: str | None = None
    """``target=`` in ``@tilelang.jit(...)``."""
    is_autotune: bool = False
    """Decorated with ``@autotune(...)``/``@tilelang.autotune(...)``: missing arguments may come
    from its first config."""
    tensor_params: tuple[str, ...] = ()
    """Eager ``@tilelang.jit``: parameters declared tensors in the body (``A: T.Tensor((M, K), dtype)``);
    they take no value."""
    consts: tuple[str, ...] = ()
    """Eager ``@tilelang.jit``: ``T.const`` size names, given by keyword (``.compile(M=1024)``)."""
    symbols: dict[str, str] = field(default_factory=dict)
    """Size variables' names in the IR (``T.dynamic("tokens")``) to the Python names the source
    uses for them (``M``)."""

    @property
    def eager(self) -> bool:
        """An eager-style ``@tilelang.jit`` kernel (tensors and sizes declared in the body)."""
        return self.is_jit and (bool(self.tensor_params) or bool(self.consts))


@dataclass(frozen=True)
class ArgumentChoice:
    """The arguments a kernel is analyzed with and where each came from."""

    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    origin: str
    """``directive (line 7)``, ``call site (line 44)`` or ``parameter defaults``."""
    from_project: tuple[str, ...] = ()
    """Parameters filled from ``[tool.tilelang-lsp]`` in pyproject.toml."""
    missing: tuple[str, ...] = ()
    """Required parameters nobody gave a value for (an ``@autotune`` config may still fill them)."""
    symbolic: tuple[str, ...] = ()
    """``T.const`` sizes nobody gave a value for: analyzed as symbolic sizes."""


@dataclass(frozen=True)
class ProjectConfig:
    """``[tool.tilelang-lsp]`` of the nearest ``pyproject.toml``."""

    path: str | None = None
    target: str | None = None
    args: dict[str, Any] = field(default_factory=dict)
    """Values for any kernel's parameters of that name (``M = 1024``)."""
    kernel_args: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Per kernel: ``[tool.tilelang-lsp.kernels.matmul] M = 1024``."""


@dataclass(frozen=True)
class SourceBuffer:
    """A ``T.alloc_*`` call or a ``T.Tensor`` parameter read from the text, without compiling."""

    name: str
    line: int
    """1-based."""
    end_column: int
    """0-based column after the call or annotation: where a hint goes."""
    shape: str
    dtype: str
    scope: str
    role: str
    """``param`` or ``alloc``."""


def imports_tilelang(text: str) -> bool | None:
    """Whether the module has a real ``import tilelang...`` or ``from tilelang... import`` statement
    (at any depth: in a function, a class, an ``if``), read with ``ast``; ``None`` when the text does
    not parse. Only a file for which this is ``True`` is ever executed: an import named in a string,
    a docstring or a comment does not count."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    for node in ast.walk(tree):
        if isinstance(node, ast.Import) and any(_is_tilelang(alias.name) for alias in node.names):
            return True
        if isinstance(node, ast.ImportFrom) and node.level == 0 and _is_tilelang(node.module or ""):
            return True
    return False


def _is_tilelang(module: str) -> bool:
    return module == "tilelang" or module.startswith("tilelang.")


def uses_tilelang(text: str) -> bool:
    """Whether analysis may execute the text: it parses and really imports tilelang."""
    return imports_tilelang(text) is True


def looks_like_tilelang(text: str) -> bool:
    """Whether a line of the text starts with an import of tilelang. Display only (a half-typed
    kernel file that does not parse keeps its source hints and gets its syntax error); it never
    decides whether anything runs."""
    return _USES_TILELANG.search(text) is not None


def syntax_problem(text: str) -> tuple[int, str] | None:
    """The line (1-based) and message of the text's syntax error, found without running anything."""
    try:
        ast.parse(text)
    except SyntaxError as error:
        return error.lineno or 1, f"syntax error: {error.msg}"
    except (ValueError, RecursionError, MemoryError) as error:
        return 1, f"syntax error: {type(error).__name__}: {error}"
    return None


def detect_dialect(text: str) -> str:
    """``ascend`` when the text imports ``tilelang.ascend``, else portable TileLang."""
    return ASCEND if re.search(r"^\s*(from|import)\s+tilelang\.ascend", text, re.MULTILINE) else PORTABLE


def normalize_target(value: str | None) -> str | None:
    """A known target name from ``cuda:sm_90``, ``cuda``, ``cuda -arch=sm_90a``, ``hip``; else ``None``."""
    if not value:
        return None
    text = value.strip()
    if text in TARGETS:
        return text
    if text in ALIASES:
        return ALIASES[text]
    arch = re.search(r"-arch=(sm_\d+)(a?)", text)
    if text.startswith("cuda") and arch:
        for name in (f"cuda:{arch[1]}{arch[2]}", f"cuda:{arch[1]}"):
            if name in TARGETS:
                return name
    mcpu = re.search(r"-mcpu=(gfx\d+)", text)
    if text.startswith(("hip", "rocm")) and mcpu and f"hip:{mcpu[1]}" in TARGETS:
        return f"hip:{mcpu[1]}"
    head = text.split()[0]
    return ALIASES.get(head, head if head in TARGETS else None)


def parse_directive(comment: str, line: int) -> Directive | None:
    """Read a directive comment; ``None`` when the comment is not one."""
    match = DIRECTIVE.search(comment)
    if not match:
        return None
    body = match["body"]
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = {}
    has_args = False
    error = None
    start = _DIRECTIVE_ARGS.search(body)
    if start:
        depth, end = 0, None
        for index in range(start.end() - 1, len(body)):
            depth += {"(": 1, ")": -1}.get(body[index], 0)
            if depth == 0:
                end = index + 1
                break
        if end is None:
            error = "unclosed args( in the tilelang directive"
        else:
            try:
                args, kwargs = parse_call_arguments(body[start.start() : end], "directive")
                has_args = True
            except UsageError as problem:
                error = problem.message
            body = body[: start.start()] + body[end:]
    target_match = _DIRECTIVE_TARGET.search(body)
    target = None
    if target_match:
        target = normalize_target(target_match["target"])
        if target is None:
            error = f"unknown target {target_match['target']!r} in the tilelang directive"
    return Directive(line=line, args=args, kwargs=kwargs, has_args=has_args, target=target, error=error)


def _is_prim_func_decorator(node: ast.expr) -> bool:
    target = node.func if isinstance(node, ast.Call) else node
    return (isinstance(target, ast.Attribute) and target.attr == "prim_func") or (
        isinstance(target, ast.Name) and target.id == "prim_func"
    )


def _is_jit_decorator(node: ast.expr) -> bool:
    target = node.func if isinstance(node, ast.Call) else node
    name = ast.unparse(target)
    return name in ("tilelang.jit", "jit", "tl.jit")


def _is_autotune_decorator(node: ast.expr) -> bool:
    target = node.func if isinstance(node, ast.Call) else node
    name = ast.unparse(target)
    return name == "autotune" or name.endswith(".autotune")


def _keyword_target(call: ast.Call) -> str | None:
    for keyword in call.keywords:
        if keyword.arg == "target" and isinstance(keyword.value, ast.Constant):
            return normalize_target(str(keyword.value.value))
    return None


def _own_nodes(function: ast.FunctionDef | ast.AsyncFunctionDef | ast.If) -> Iterator[ast.AST]:
    """The nodes of a function's (or ``if`` block's) body, not of functions or classes defined inside it."""
    stack: list[ast.AST] = list(reversed(function.body))
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        stack.extend(reversed(list(ast.iter_child_nodes(node))))


def _is_tensor_annotation(node: ast.expr) -> bool:
    """``T.Tensor((M, K), dtype)``, ``T.Tensor[[M, K], dtype]``, ``T.Buffer``, a bare ``T.Tensor``."""
    head = (
        node.func if isinstance(node, ast.Call) else node.value if isinstance(node, ast.Subscript) else node
    )
    name = head.attr if isinstance(head, ast.Attribute) else head.id if isinstance(head, ast.Name) else ""
    return name in _TENSOR_TYPES


def _size_names(call: ast.expr) -> tuple[str, list[str]] | None:
    """``("const", ["M", "N"])`` for ``T.const("M, N")``; ``None`` for anything else."""
    if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)):
        return None
    if call.func.attr not in _SIZE_DECLARATIONS or not call.args:
        return None
    first = call.args[0]
    if not (isinstance(first, ast.Constant) and isinstance(first.value, str)):
        return None
    # TileLang splits on commas, else on spaces (tilelang.language.eager.builder.const)
    text = first.value.strip()
    names = re.split(r"\s*,\s*", text) if "," in text else re.split(r"\s+", text)
    return call.func.attr, [n for n in names if n]


@dataclass(frozen=True)
class _EagerDeclarations:
    """What an eager ``@tilelang.jit`` function's signature and body declare."""

    tensors: tuple[str, ...]
    consts: tuple[str, ...]
    symbols: dict[str, str]
    shapes: dict[str, tuple[str | None, ...]]
    """Each tensor parameter's declared shape as the ``T.const`` name at each position (``None``
    where it is not one): ``A: T.Tensor((M, K), dtype)`` is ``("M", "K")``."""


def _eager_declarations(function: ast.FunctionDef, params: list[str]) -> _EagerDeclarations:
    """Tensor parameters, ``T.const`` names and size-variable names of a jit function's body."""
    tensors: list[str] = []
    consts: list[str] = []
    symbols: dict[str, str] = {}
    annotations: dict[str, ast.expr] = {}
    aliases: dict[str, str] = {}
    for argument in [*function.args.posonlyargs, *function.args.args, *function.args.kwonlyargs]:
        if argument.annotation is not None and _is_tensor_annotation(argument.annotation):
            tensors.append(argument.arg)
            annotations[argument.arg] = argument.annotation
    for node in _own_nodes(function):
        if (
            isinstance(node, ast.AnnAssign)
            and isinstance(node.target, ast.Name)
            and node.value is None
            and node.target.id in params
            and _is_tensor_annotation(node.annotation)
        ):
            tensors.append(node.target.id)
            annotations.setdefault(node.target.id, node.annotation)
        if not isinstance(node, ast.Assign):
            continue
        aliases.update(_name_aliases(node))
        declared = _size_names(node.value)
        if declared is None:
            continue
        kind, names = declared
        if kind == "const":
            consts.extend(n for n in names if n not in consts)
        target = node.targets[0] if len(node.targets) == 1 else None
        python_names = (
            [e.id if isinstance(e, ast.Name) else "" for e in target.elts]
            if isinstance(target, (ast.Tuple, ast.List))
            else [target.id]
            if isinstance(target, ast.Name)
            else []
        )
        if len(python_names) == len(names):
            symbols.update({ir: py for ir, py in zip(names, python_names, strict=True) if py})
    ordered_tensors = tuple(p for p in params if p in tensors)
    const_of = {symbols.get(c, c): c for c in consts}  # the source's name for each T.const

    def const_at(node: ast.expr) -> str | None:
        name = node.id if isinstance(node, ast.Name) else None
        for _ in range(len(aliases) + 1):  # KH, KW = K, K
            if name is None or name in const_of:
                break
            name = aliases.get(name)
        return const_of.get(name) if name is not None else None

    shapes = {
        name: tuple(const_at(e) for e in dims)
        for name, annotation in annotations.items()
        if (dims := _annotated_shape(annotation)) is not None
    }
    return _EagerDeclarations(ordered_tensors, tuple(consts), symbols, shapes)


def _name_aliases(node: ast.Assign) -> dict[str, str]:
    """``KH, KW = K, K`` as ``{"KH": "K", "KW": "K"}``."""
    if len(node.targets) != 1:
        return {}
    target, value = node.targets[0], node.value
    pairs = (
        zip(target.elts, value.elts, strict=True)
        if isinstance(target, ast.Tuple)
        and isinstance(value, ast.Tuple)
        and len(target.elts) == len(value.elts)
        else [(target, value)]
    )
    return {t.id: v.id for t, v in pairs if isinstance(t, ast.Name) and isinstance(v, ast.Name)}


def _annotated_shape(annotation: ast.expr) -> list[ast.expr] | None:
    """The shape of ``T.Tensor((M, K), dtype)`` or ``T.Tensor[[M, K], dtype]``."""
    shape: ast.expr | None = None
    if isinstance(annotation, ast.Call):
        keywords = {k.arg: k.value for k in annotation.keywords}
        shape = annotation.args[0] if annotation.args else keywords.get("shape")
    elif isinstance(annotation, ast.Subscript):
        index = annotation.slice
        shape = index.elts[0] if isinstance(index, ast.Tuple) and index.elts else index
    if shape is None:
        return None
    return list(shape.elts) if isinstance(shape, (ast.Tuple, ast.List)) else [shape]


def scan_kernels(text: str) -> list[KernelSource]:
    """Top-level functions that define a ``@T.prim_func`` inside or are ``@tilelang.jit`` kernels
    (eager or not, under ``@autotune`` or not)."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return []
    lines = text.splitlines()
    module = _ModuleScope(tree)
    kernels = []
    for node in tree.body:
        if not isinstance(node, ast.FunctionDef):
            continue
        is_jit = any(_is_jit_decorator(d) for d in node.decorator_list)
        is_autotune = any(_is_autotune_decorator(d) for d in node.decorator_list)
        builds = any(
            isinstance(inner, ast.FunctionDef)
            and any(_is_prim_func_decorator(d) for d in inner.decorator_list)
            for inner in ast.walk(node)
            if inner is not node
        )
        top = min([node.lineno, *(d.lineno for d in node.decorator_list)])
        directive = _directive_above(lines, top)
        if not (is_jit or is_autotune or builds or directive):
            continue
        params = [a.arg for a in [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs]]
        declared = _eager_declarations(node, params)
        symbols = declared.symbols
        tensors = declared.tensors if is_jit or is_autotune else ()
        consts = declared.consts if is_jit or is_autotune else ()
        shapes = declared.shapes if is_jit or is_autotune else {}
        positional = [*node.args.posonlyargs, *node.args.args]
        required = [a.arg for a in positional[: len(positional) - len(node.args.defaults)]]
        required += [
            a.arg for a, d in zip(node.args.kwonlyargs, node.args.kw_defaults, strict=True) if d is None
        ]
        required = [name for name in required if name not in tensors]
        decorator_target = None
        for decorator in node.decorator_list:
            if isinstance(decorator, ast.Call) and _is_jit_decorator(decorator):
                decorator_target = _keyword_target(decorator)
        kernels.append(
            KernelSource(
                name=node.name,
                line=node.lineno,
                is_jit=is_jit or is_autotune,
                params=tuple(params),
                required=tuple(required),
                directive=directive,
                call_site=_call_site(module, node.name, params, tensors, shapes),
                decorator_target=decorator_target,
                is_autotune=is_autotune,
                tensor_params=tensors,
                consts=consts,
                symbols=symbols,
            )
        )
    return kernels


def _directive_above(lines: list[str], top: int) -> Directive | None:
    """The directive in the comment block right above line ``top`` (1-based)."""
    index = top - 2
    while index >= 0 and lines[index].strip().startswith("#"):
        directive = parse_directive(lines[index], index + 1)
        if directive is not None:
            return directive
        index -= 1
    return None


def _is_main_guard(node: ast.stmt) -> bool:
    """``if __name__ == "__main__":``"""
    return (
        isinstance(node, ast.If)
        and isinstance(node.test, ast.Compare)
        and isinstance(node.test.left, ast.Name)
        and node.test.left.id == "__name__"
        and any(isinstance(c, ast.Constant) and c.value == "__main__" for c in node.test.comparators)
    )


def _bound_names(node: ast.AST) -> Iterator[str]:
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


class _Unknown(Exception):
    """A call-site argument whose value cannot be known without running the caller."""


_Found = tuple[ast.expr, "_Scope"]
"""An expression and the scope its names are read in."""

_MAX_DEPTH = 40
"""How many names, parameters and calls a value is followed through before giving up."""
_TENSOR_FACTORIES = ("randn", "rand", "empty", "zeros", "ones", "full", "randint", "empty_strided")
"""``torch.randn(M, K, ...)`` and friends: calls whose size arguments are a new tensor's shape."""
_SAME_SHAPE = (
    *("cuda", "cpu", "to", "half", "float", "bfloat16", "double", "int", "long", "bool", "type"),
    *("contiguous", "clone", "detach", "requires_grad_", "normal_", "uniform_", "zero_", "fill_"),
    *("random_", "abs", "exp", "sigmoid", "softmax", "relu", "tanh", "sqrt", "neg"),
)
"""Tensor methods that keep the shape: ``torch.randn(M, K).cuda().half()`` is ``(M, K)``."""
_RESHAPES = ("view", "reshape", "expand", "new_empty", "new_zeros", "new_ones")
"""Tensor methods whose arguments are the new shape."""
_MUTATORS = ("update", "pop", "setdefault", "clear", "append", "extend", "insert", "remove", "__setitem__")
"""Methods that change a dict or list in place: its literal no longer tells its value."""
_PURE_ROOTS = ("math", "T", "tl", "tilelang")
"""Modules whose functions a value bound away from the call may call (``1 / math.sqrt(dim)``),
besides functions called by plain name; any other call there (``torch.randn(...)``,
``torch.cuda.get_device_capability()``) makes the value unknown."""
_FOLDED_CALLS: dict[str, Any] = {
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
_NOT_VALUES = (
    *(ast.Lambda, ast.NamedExpr, ast.Await, ast.Yield, ast.YieldFrom, ast.Starred),
    *(ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp),
)
"""Expressions never substituted into a call's arguments."""


def _item(container: ast.expr, index: int) -> ast.Subscript:
    """``container[index]``, for one name of ``a, b = pair`` or a loop variable's first value."""
    return ast.Subscript(value=container, slice=ast.Constant(index), ctx=ast.Load())


def _root_name(node: ast.expr) -> str | None:
    """``torch`` for ``torch.cuda.current_device``."""
    while isinstance(node, ast.Attribute):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _is_plain(value: object) -> bool:
    return value is None or isinstance(value, (bool, int, float, str))


def _small(value: object) -> bool:
    """Whether a folded value is worth a literal (a huge number or string stays an expression)."""
    if isinstance(value, int):
        return value.bit_length() <= 1024
    return not isinstance(value, str) or len(value) <= 4096


def _fold(node: ast.expr) -> ast.expr:
    """``node`` computed to a constant when it is arithmetic, a comparison or a choice over constants."""
    try:
        if (
            isinstance(node, ast.BinOp)
            and isinstance(node.left, ast.Constant)
            and isinstance(node.right, ast.Constant)
        ):
            left, right = node.left.value, node.right.value
            if not (_is_plain(left) and _is_plain(right)) or type(node.op) not in _BINARY:
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
            if not _is_plain(node.operand.value):
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
    if not (_is_plain(result) and _small(result)):
        return node
    return ast.copy_location(ast.Constant(result), node)


@dataclass(frozen=True)
class _Binding:
    """One place a scope binds a name."""

    line: int
    value: ast.expr | None
    """What it is bound to; ``None`` when bound some other way (``+=``, ``import``, ``with ... as``)."""
    straight: bool
    """Made by a statement that runs once, in order (not in a branch or a loop)."""
    parameter: bool = False


class _Scope:
    """A function, the ``__main__`` block or the module's top level, read for what each name in it
    is bound to: parameters (to the function's first call's argument, else their default) and
    assignments (``block_M = 64``, ``M, N = args.m, args.n``, ``for M in [256, 512]``). A name
    bound more than once has the value of the last assignment before its use when all of them run
    in order, else none."""

    def __init__(
        self,
        module: _ModuleScope,
        node: ast.FunctionDef | ast.AsyncFunctionDef | ast.If | None,
        parent: _Scope | None,
        passed: dict[str, _Found] | None = None,
    ) -> None:
        self.module = module
        self.node = node
        self.parent = parent
        self.passed = passed
        """The parameters' arguments in one particular call (an ``__init__`` for one object)."""
        self.bound: dict[str, list[_Binding]] = {}
        """Each name's bindings, in source order."""
        self._valued: set[int] = set()
        self.changed: set[str] = set()
        """Names whose dict or list is changed in place (``config["block_M"] = 128``)."""
        self.changed_members: set[tuple[str, str]] = set()
        """``(name, attribute)`` assigned in place (``args.block_m = 128``)."""
        self.parameters: list[str] = []
        """Parameters in order: the first ``positional`` of them positional, then keyword-only ones."""
        self.positional = 0
        self.defaults: dict[str, ast.expr] = {}
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            arguments = node.args
            positional = [*arguments.posonlyargs, *arguments.args]
            self.positional = len(positional)
            self.parameters = [a.arg for a in [*positional, *arguments.kwonlyargs]]
            with_defaults = positional[len(positional) - len(arguments.defaults) :]
            for argument, default in zip(with_defaults, arguments.defaults, strict=True):
                self.defaults[argument.arg] = default
            for argument, kw_default in zip(arguments.kwonlyargs, arguments.kw_defaults, strict=True):
                if kw_default is not None:
                    self.defaults[argument.arg] = kw_default
            for name in self.parameters:
                self.bound[name] = [_Binding(node.lineno, None, True, parameter=True)]
            for extra in (arguments.vararg, arguments.kwarg):
                if extra is not None:
                    self.bound[extra.arg] = [_Binding(node.lineno, None, False)]
        if node is not None:
            for child in _own_nodes(node):
                self._record(child)

    def _add(self, name: str, line: int, value: ast.expr | None, straight: bool) -> None:
        self.bound.setdefault(name, []).append(_Binding(line, value, straight))

    def _straight(self, statement: ast.AST) -> bool:
        parent = self.module.parents.get(statement)
        while parent is not None and parent is not self.node:
            if not isinstance(parent, (ast.With, ast.AsyncWith)):
                return False
            parent = self.module.parents.get(parent)
        return True

    def _record(self, node: ast.AST) -> None:
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            if id(node) not in self._valued and not self._in_comprehension(node):
                self._add(node.id, node.lineno, None, False)
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, (ast.Store, ast.Del)):
            root = _root_name(node.value)
            if root is not None:
                self.changed.add(root)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, (ast.Store, ast.Del)):
            if isinstance(node.value, ast.Name):
                self.changed_members.add((node.value.id, node.attr))
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in _MUTATORS
        ):
            root = _root_name(node.func.value)
            if root is not None:
                self.changed.add(root)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            self._add(node.name, node.lineno, None, False)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                self._add((alias.asname or alias.name).split(".")[0], node.lineno, None, False)
        if isinstance(node, ast.Assign):
            for target in node.targets:
                self._bind(target, node.value, node.lineno, self._straight(node))
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            self._bind(node.target, node.value, node.lineno, self._straight(node))
        elif isinstance(node, (ast.For, ast.AsyncFor)):
            self._bind(node.target, _item(node.iter, 0), node.lineno, False)  # the first iteration's

    def _in_comprehension(self, target: ast.Name) -> bool:
        """A comprehension's loop variable, which lives in the comprehension's own scope."""
        parent = self.module.parents.get(target)
        while isinstance(parent, (ast.Tuple, ast.List, ast.Starred)):
            parent = self.module.parents.get(parent)
        return isinstance(parent, ast.comprehension)

    def _bind(self, target: ast.expr, value: ast.expr, line: int, straight: bool) -> None:
        if isinstance(target, ast.Name):
            self._add(target.id, line, value, straight)
            self._valued.add(id(target))
        elif isinstance(target, (ast.Tuple, ast.List)) and not any(
            isinstance(e, ast.Starred) for e in target.elts
        ):
            if (
                isinstance(value, (ast.Tuple, ast.List))
                and len(value.elts) == len(target.elts)
                and not any(isinstance(e, ast.Starred) for e in value.elts)
            ):
                for element, item in zip(target.elts, value.elts, strict=True):
                    self._bind(element, item, line, straight)
            else:
                for index, element in enumerate(target.elts):
                    self._bind(element, _item(value, index), line, straight)

    def binding(self, name: str, line: int) -> _Binding | None:
        """The binding of ``name`` that holds at ``line``: its only one, else the last one before
        ``line`` when all of them run in order."""
        bindings = self.bound[name]
        if len(bindings) == 1:
            return bindings[0]
        if not all(b.straight for b in bindings):
            return None
        before = [b for b in bindings if b.line < line]
        return before[-1] if before else None

    def lookup(self, name: str, line: int = 0) -> list[_Found] | None:
        """What ``name`` (used at ``line``) may stand for, best first: ``None`` for a name the
        module defines (kept as written), an empty list when nothing tells its value."""
        if name not in self.bound:
            if self.parent is not None:
                return self.parent.lookup(name, line)  # a closure's name, or the module's
            return None if name in self.module.defined else []
        binding = self.binding(name, line)
        if binding is None:
            return []
        if binding.parameter:
            found: list[_Found] = []
            passed = (
                self.passed.get(name) if self.passed is not None else self.module.passed_argument(self, name)
            )
            if passed is not None:
                found.append(passed)
            if name in self.defaults and self.parent is not None:
                found.append((self.defaults[name], self.parent))
            return found
        if binding.value is None:
            return []
        if name in self.changed and isinstance(binding.value, (ast.Dict, ast.List, ast.Call)):
            return []  # a dict or list changed after it was made: its literal is stale
        return [(binding.value, self)]

    def nodes(self) -> Iterator[ast.AST]:
        """The scope's own nodes (the module's: outside functions and the ``__main__`` block)."""
        if self.node is not None:
            yield from _own_nodes(self.node)
            return
        for statement in self.module.tree.body:
            if not isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and not (
                _is_main_guard(statement)
            ):
                yield from ast.walk(statement)


class _ModuleScope:
    """What a call site's arguments may refer to: names the module defines when imported (its
    ``__main__`` block does not run, so they are kept as written and evaluated by the worker), and
    what the source says each function's and that block's own names are bound to."""

    def __init__(self, tree: ast.Module) -> None:
        self.tree = tree
        self.own: set[str] = set()
        for statement in tree.body:
            if not _is_main_guard(statement):
                self.own.update(_bound_names(statement))
        self.defined: set[str] = set(dir(builtins)) | self.own
        self.parents: dict[ast.AST, ast.AST] = {}
        self.calls: dict[str, list[ast.Call]] = {}
        """Calls of each plain name (``main(...)``), for the values a function's parameters take."""
        self.applies: dict[str, list[ast.Call]] = {}
        """Calls of each class's ``.apply`` (``_attention.apply(q, k, v)``, or through a name
        bound to it: ``attention = _attention.apply``): an autograd function's ``forward``'s."""
        aliases: dict[str, str] = {}
        for parent in ast.walk(tree):
            for child in ast.iter_child_nodes(parent):
                self.parents[child] = parent
            if isinstance(parent, ast.Call) and isinstance(parent.func, ast.Name):
                self.calls.setdefault(parent.func.id, []).append(parent)
            elif (
                isinstance(parent, ast.Call)
                and isinstance(parent.func, ast.Attribute)
                and parent.func.attr == "apply"
                and isinstance(parent.func.value, ast.Name)
            ):
                self.applies.setdefault(parent.func.value.id, []).append(parent)
            elif (
                isinstance(parent, ast.Assign)
                and len(parent.targets) == 1
                and isinstance(parent.targets[0], ast.Name)
                and isinstance(parent.value, ast.Attribute)
                and parent.value.attr == "apply"
                and isinstance(parent.value.value, ast.Name)
            ):
                aliases[parent.targets[0].id] = parent.value.value.id
        for alias, cls in aliases.items():
            self.applies.setdefault(cls, []).extend(self.calls.get(alias, []))
        self.functions = {
            n.name: n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
        }
        self.classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
        self.top = _Scope(self, None, None)
        self._scopes: dict[object, _Scope] = {}
        self._values: dict[tuple[int, str, int], ast.expr | None] = {}
        self._resolving: set[tuple[int, str, int]] = set()

    def _enclosing(self, node: ast.AST) -> ast.FunctionDef | ast.AsyncFunctionDef | ast.If | None:
        scope = self.parents.get(node)
        while scope is not None and not (
            isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef))
            or (isinstance(scope, ast.If) and _is_main_guard(scope) and scope in self.tree.body)
        ):
            scope = self.parents.get(scope)
        assert scope is None or isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef, ast.If))
        return scope

    def scope_of(self, node: ast.AST) -> _Scope:
        """The scope of the function (or ``__main__`` block) holding ``node``."""
        return self._scope(self._enclosing(node))

    def _scope(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.If | None) -> _Scope:
        if node is None:
            return self.top
        if node not in self._scopes:
            self._scopes[node] = _Scope(self, node, self.scope_of(node))
        return self._scopes[node]

    def in_main_block(self, node: ast.AST) -> bool:
        scope = self._enclosing(node)
        while isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)):
            scope = self._enclosing(scope)
        return scope is not None

    def _autograd_class(self, function: ast.AST | None) -> ast.ClassDef | None:
        """The module-level ``torch.autograd.Function`` subclass ``function`` is a method of."""
        cls = self.parents.get(function) if function is not None else None
        if not (isinstance(cls, ast.ClassDef) and self.classes.get(cls.name) is cls):
            return None
        return cls if any(ast.unparse(b).endswith("Function") for b in cls.bases) else None

    def passed_argument(self, scope: _Scope, name: str) -> _Found | None:
        """The argument the first call of a module-level function passes for its parameter
        ``name`` (a call in the ``__main__`` block first): ``main(args.batch, ...)``; for an
        autograd function's ``forward``, the first ``.apply(...)``'s (it takes no ``ctx``)."""
        function = scope.node
        if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return None
        cls = self._autograd_class(function)
        if self.functions.get(function.name) is function:
            calls = [
                call
                for call in self.calls.get(function.name, [])
                if self._enclosing(call) is not function and self.scope_of(call).lookup(function.name) is None
            ]
            skipped = 0
        elif cls is not None and function.name == "forward":
            calls, skipped = self.applies.get(cls.name, []), 1
        else:
            return None
        if not calls:
            return None
        call = min(calls, key=lambda c: (not self.in_main_block(c), c.lineno, c.col_offset))
        caller = self.scope_of(call)
        index = scope.parameters.index(name) - skipped
        if index < 0:
            return None
        if index < scope.positional - skipped:
            if any(isinstance(a, ast.Starred) for a in call.args[: index + 1]):
                return None
            if index < len(call.args):
                return call.args[index], caller
        for keyword in call.keywords:
            if keyword.arg == name:
                return keyword.value, caller
        return None

    def _saved_on_context(self, scope: _Scope, name: str, attr: str) -> _Found | None:
        """In an autograd function's ``backward``, what ``forward`` put on the context:
        ``ctx.causal = causal``, ``ctx.save_for_backward(q, k, v)`` for ``ctx.saved_tensors``."""
        cls = self._autograd_class(scope.node)
        if cls is None or scope.node is None or not scope.parameters or scope.parameters[0] != name:
            return None
        forward = next((n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "forward"), None)
        if forward is None or forward is scope.node:
            return None
        inner = self._scope(forward)
        if not inner.parameters:
            return None
        context = inner.parameters[0]
        found: list[ast.expr] = []
        for node in _own_nodes(forward):
            if (
                attr == "saved_tensors"
                and isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
            ):
                if node.func.attr == "save_for_backward" and ast.unparse(node.func.value) == context:
                    found.append(ast.Tuple(elts=list(node.args), ctx=ast.Load()))
            elif isinstance(node, ast.Assign):
                found.extend(
                    node.value
                    for t in node.targets
                    if isinstance(t, ast.Attribute) and t.attr == attr and ast.unparse(t.value) == context
                )
        return (found[0], inner) if len(found) == 1 else None

    def definition(self, node: ast.expr, scope: _Scope, depth: int = 0) -> _Found:
        """What an expression stands for, followed through assignments, parameters, tuple
        items and members the source tells (``args.m``, ``q.shape``), not computed."""
        while depth <= _MAX_DEPTH:
            depth += 1
            if isinstance(node, ast.Name):
                found = scope.lookup(node.id, node.lineno)
                if found is None:
                    break
                if not found:
                    raise _Unknown(node.id)
                node, scope = found[0]
            elif isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
                base, where = self.definition(node.value, scope, depth)
                element = _element(base, node.slice)
                if element is None:
                    break
                node, scope = element, where
            elif isinstance(node, ast.Attribute):
                member = self._member(node.value, scope, node.attr, depth)
                if member is None:
                    break
                node, scope = member
            else:
                break
        else:
            raise _Unknown("too deep")
        return node, scope

    def argument(self, node: ast.expr, scope: _Scope, where: str, direct: bool = True) -> Any:
        """A call-site argument's value: a literal, or an ``Expression`` over module-level names."""
        with contextlib.suppress(UsageError):
            return literal_value(node, where)
        if direct and all(
            scope.lookup(n.id, n.lineno) is None for n in ast.walk(node) if isinstance(n, ast.Name)
        ):
            if isinstance(node, _NOT_VALUES) or any(isinstance(n, _NOT_VALUES) for n in ast.walk(node)):
                raise _Unknown(where)
            return Expression(ast.unparse(node))  # over the module's names only: kept as written
        closed = self.value(node, scope, 0, direct)
        try:
            return literal_value(closed, where)
        except UsageError:
            return Expression(ast.unparse(closed))

    def value(self, node: ast.expr, scope: _Scope, depth: int = 0, direct: bool = False) -> ast.expr:
        """``node`` with the scope's names replaced by what they are bound to and folded where all
        is known: constants, or an expression over module-level names; ``_Unknown`` otherwise.

        ``direct``: ``node`` is written at the call site, where calls of anything the module
        defines are kept (``determine_fp8_type()``); in values bound elsewhere, only calls of
        the module's own functions and of ``math``/TileLang are.
        """
        if depth > _MAX_DEPTH or isinstance(node, _NOT_VALUES):
            raise _Unknown(ast.unparse(node))
        if isinstance(node, ast.Constant):
            return node
        if isinstance(node, ast.Name):
            return self._name_value(node, scope, depth)
        if isinstance(node, ast.Attribute):
            member = self._member(node.value, scope, node.attr, depth)
            if member is not None:
                return self.value(member[0], member[1], depth + 1)
            base = self.value(node.value, scope, depth + 1, direct)
            return ast.Attribute(value=base, attr=node.attr, ctx=ast.Load())
        if isinstance(node, ast.Subscript):
            return self._subscript_value(node, scope, depth, direct)
        if isinstance(node, ast.Call):
            return self._call_value(node, scope, depth, direct)
        if isinstance(node, ast.IfExp):
            test = self.value(node.test, scope, depth + 1, direct)
            if isinstance(test, ast.Constant):
                return self.value(node.body if test.value else node.orelse, scope, depth + 1, direct)
        if isinstance(node, ast.Dict) and any(k is None for k in node.keys):
            raise _Unknown("**")
        return _fold(self._children(node, scope, depth, direct))

    def _children(self, node: ast.expr, scope: _Scope, depth: int, direct: bool) -> ast.expr:
        rebuilt = copy.copy(node)
        for name, old in ast.iter_fields(node):
            if isinstance(old, ast.expr):
                setattr(rebuilt, name, self.value(old, scope, depth + 1, direct))
            elif isinstance(old, list):
                items: list[Any] = []
                for item in old:
                    if isinstance(item, ast.expr):
                        items.append(self.value(item, scope, depth + 1, direct))
                    elif isinstance(item, ast.keyword):
                        value = self.value(item.value, scope, depth + 1, direct)
                        items.append(ast.keyword(arg=item.arg, value=value))
                    else:
                        items.append(item)
                setattr(rebuilt, name, items)
        return rebuilt

    def _name_value(self, node: ast.Name, scope: _Scope, depth: int) -> ast.expr:
        found = scope.lookup(node.id, node.lineno)
        if found is None:
            return node
        if not found:
            raise _Unknown(node.id)
        key = (id(scope), node.id, id(found[0][0]))
        if key in self._values:
            cached = self._values[key]
            if cached is None:
                raise _Unknown(node.id)
            return cached
        if key in self._resolving:
            raise _Unknown(node.id)
        self._resolving.add(key)
        result: ast.expr | None = None
        try:
            for expression, where in found:
                with contextlib.suppress(_Unknown):
                    result = self.value(expression, where, depth + 1)
                    break
        finally:
            self._resolving.discard(key)
        self._values[key] = result
        if result is None:
            raise _Unknown(node.id)
        return result

    def _subscript_value(self, node: ast.Subscript, scope: _Scope, depth: int, direct: bool) -> ast.expr:
        index = self.value(node.slice, scope, depth + 1, direct)
        base, where = self.definition(node.value, scope, depth)
        element = _element(base, index)
        if element is not None:
            return self.value(element, where, depth + 1)
        container = self.value(node.value, scope, depth + 1, direct)
        element = _element(container, index)
        if element is not None:
            return element
        return ast.Subscript(value=container, slice=index, ctx=ast.Load())

    def _call_value(self, node: ast.Call, scope: _Scope, depth: int, direct: bool) -> ast.expr:
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr == "size":
            shape = self.tensor_shape(func.value, scope, depth)
            if shape is not None:
                sizes, where = shape
                if not node.args:
                    return self.value(ast.Tuple(elts=sizes, ctx=ast.Load()), where, depth + 1)
                index = self.value(node.args[0], scope, depth + 1)
                if isinstance(index, ast.Constant) and isinstance(index.value, int):
                    with contextlib.suppress(IndexError):
                        return self.value(sizes[index.value], where, depth + 1)
                raise _Unknown("size")
        root = _root_name(func)
        module_level = root is not None and scope.lookup(root) is None
        name = ast.unparse(func)
        if name in _FOLDED_CALLS and module_level and not (isinstance(func, ast.Name) and name in self.own):
            arguments = [self.value(a, scope, depth + 1, direct) for a in node.args]
            if not node.keywords and all(isinstance(a, ast.Constant) for a in arguments):
                with contextlib.suppress(ArithmeticError, TypeError, ValueError):
                    result = _FOLDED_CALLS[name](*(a.value for a in arguments if isinstance(a, ast.Constant)))
                    if _is_plain(result) and _small(result):
                        return ast.copy_location(ast.Constant(result), node)
        if not direct and not (
            isinstance(func, ast.Name) or (isinstance(func, ast.Attribute) and root in _PURE_ROOTS)
        ):
            raise _Unknown(name)
        return self._children(node, scope, depth, direct)

    def _member(self, base: ast.expr, scope: _Scope, attr: str, depth: int) -> _Found | None:
        """``args.block_m`` of a parsed command line (its ``default=``), ``config.block_M`` of a
        dataclass or namespace built in the source, ``x.shape`` of a tensor made with known sizes;
        ``None`` when ``base`` is none of these."""
        if isinstance(base, ast.Name):
            saved = self._saved_on_context(scope, base.id, attr)
            if saved is not None:
                return saved
            if (base.id, attr) in scope.changed_members:
                raise _Unknown(attr)
        node, where = self.definition(base, scope, depth + 1)
        parsed = self.parsed_arguments(node, where, depth)
        if parsed is not None:
            if attr not in parsed:
                raise _Unknown(attr)
            return parsed[attr]
        if isinstance(node, ast.Call):
            fields = self._fields(node, where)
            if fields is not None:
                if attr not in fields:
                    raise _Unknown(attr)
                return fields[attr]
        if attr == "shape":
            shape = self.tensor_shape(node, where, depth)
            if shape is not None:
                return ast.Tuple(elts=shape[0], ctx=ast.Load()), shape[1]
        return None

    def _fields(self, call: ast.Call, scope: _Scope) -> dict[str, _Found] | None:
        """The attributes of an object the call builds, when the source says them: a class of this
        module (a dataclass, a ``NamedTuple``, class attributes, ``self.block_M = 128`` in its
        ``__init__``) or a ``SimpleNamespace(...)``."""
        name = ast.unparse(call.func)
        if _root_name(call.func) is None or scope.lookup(str(_root_name(call.func))) is not None:
            return None
        if any(k.arg is None for k in call.keywords):
            raise _Unknown("**")
        given = {k.arg: (k.value, scope) for k in call.keywords if k.arg is not None}
        if name in ("SimpleNamespace", "types.SimpleNamespace", "argparse.Namespace", "Namespace"):
            return given
        cls = self.classes.get(name)
        if cls is None:
            return None
        init = next((n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"), None)
        if init is not None:
            return self._initialized(init, call, scope)
        fields: dict[str, _Found] = {}
        order: list[str] = []
        for statement in cls.body:
            if isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name):
                order.append(statement.target.id)
                if statement.value is not None:
                    fields[statement.target.id] = (_field_default(statement.value), self.top)
            elif isinstance(statement, ast.Assign):
                for target in statement.targets:
                    if isinstance(target, ast.Name):
                        fields[target.id] = (statement.value, self.top)
        if any(isinstance(a, ast.Starred) for a in call.args) or len(call.args) > len(order):
            raise _Unknown(name)
        fields.update({field_name: (a, scope) for field_name, a in zip(order, call.args, strict=False)})
        fields.update(given)
        return fields

    def _initialized(self, init: ast.FunctionDef, call: ast.Call, scope: _Scope) -> dict[str, _Found]:
        """``self.X = ...`` assigned once in ``__init__``, its parameters bound to ``call``'s arguments."""
        parameters = [a.arg for a in [*init.args.posonlyargs, *init.args.args]][1:]
        if any(isinstance(a, ast.Starred) for a in call.args) or len(call.args) > len(parameters):
            raise _Unknown(init.name)
        passed = {p: (a, scope) for p, a in zip(parameters, call.args, strict=False)}
        passed.update({k.arg: (k.value, scope) for k in call.keywords if k.arg is not None})
        key = (call, init)
        if key not in self._scopes:
            self._scopes[key] = _Scope(self, init, self.scope_of(init), passed)
        inner = self._scopes[key]
        this = init.args.args[0].arg if init.args.args else None
        assigned: dict[str, list[ast.expr]] = {}
        for node in _own_nodes(init):
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    if isinstance(target, ast.Attribute) and ast.unparse(target.value) == this:
                        assigned.setdefault(target.attr, []).append(node.value)
        return {attr: (values[0], inner) for attr, values in assigned.items() if len(values) == 1}

    def parsed_arguments(self, node: ast.expr, scope: _Scope, depth: int) -> dict[str, _Found] | None:
        """For a parsed command line (``parser.parse_args()``, ``parser.parse_known_args()[0]``,
        ``get_args()`` returning one), each option's ``default=`` by its destination name;
        ``None`` for anything else."""
        if depth > _MAX_DEPTH:
            raise _Unknown("parse_args")
        call = node
        if (
            isinstance(node, ast.Subscript)
            and isinstance(node.value, ast.Call)
            and isinstance(node.slice, ast.Constant)
            and node.slice.value == 0
        ):
            call = node.value
        if not isinstance(call, ast.Call):
            return None
        func = call.func
        if isinstance(func, ast.Attribute) and func.attr in ("parse_args", "parse_known_args"):
            if call is node and func.attr == "parse_known_args":
                return None
            if call.args and isinstance(call.args[0], (ast.List, ast.Tuple)) and call.args[0].elts:
                raise _Unknown("parse_args")  # its own command line, not the defaults
            scopes = [scope]
            parser, where = self.definition(func.value, scope, depth + 1)
            if isinstance(parser, ast.Call) and isinstance(parser.func, ast.Name):
                helper = self.functions.get(parser.func.id)
                if helper is not None and where.lookup(parser.func.id) is None:
                    scopes.append(self._scope(helper))
            return _option_defaults([*scopes, self.top])
        if isinstance(func, ast.Name) and func.id in self.functions and scope.lookup(func.id) is None:
            helper = self.functions[func.id]
            inner = self._scope(helper)
            for child in _own_nodes(helper):
                if isinstance(child, ast.Return) and child.value is not None:
                    returned, where = self.definition(child.value, inner, depth + 1)
                    parsed = self.parsed_arguments(returned, where, depth + 1)
                    if parsed is not None:
                        return parsed
        return None

    def tensor_shape(
        self, node: ast.expr, scope: _Scope, depth: int = 0
    ) -> tuple[list[ast.expr], _Scope] | None:
        """The sizes of a tensor made in the source: ``torch.randn(M, K).cuda().half()``,
        ``torch.empty((M, N))``, ``torch.zeros(M, N).view(M // 2, 2 * N)``; ``None`` otherwise."""
        node, scope = self.definition(node, scope, depth)
        for _ in range(_MAX_DEPTH):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                return None
            method = node.func.attr
            if method in _SAME_SHAPE:
                node, scope = self.definition(node.func.value, scope, depth + 1)
            elif method.endswith("_like") and node.args and _root_name(node.func) == "torch":
                node, scope = self.definition(node.args[0], scope, depth + 1)
            elif method in _RESHAPES or method in _TENSOR_FACTORIES:
                return self._shape_arguments(node, scope, depth)
            else:
                return None
        return None

    def _shape_arguments(
        self, call: ast.Call, scope: _Scope, depth: int
    ) -> tuple[list[ast.expr], _Scope] | None:
        keywords = {k.arg: k.value for k in call.keywords if k.arg is not None}
        arguments = call.args
        if any(isinstance(a, ast.Starred) for a in arguments):
            return None
        shape: ast.expr | None
        if "size" in keywords:
            shape = keywords["size"]
        elif call.func.attr in ("full", "empty_strided"):  # type: ignore[attr-defined]
            shape = arguments[0] if arguments else None
        elif call.func.attr == "randint":  # type: ignore[attr-defined]
            shape = arguments[-1] if len(arguments) >= 2 else None
        elif len(arguments) == 1:
            shape = arguments[0]
        else:
            return list(arguments), scope
        if shape is None:
            return None
        if isinstance(shape, (ast.Tuple, ast.List)):
            return list(shape.elts), scope
        try:
            resolved = self.value(shape, scope, depth + 1)
        except _Unknown:
            return None
        if isinstance(resolved, (ast.Tuple, ast.List)):
            return list(resolved.elts), self.top
        return [resolved], self.top  # closed values: only the module's names are left in them

    def expand(self, call: ast.Call, scope: _Scope) -> tuple[list[_Found], dict[str, _Found]]:
        """A call's positional and keyword arguments, ``*sizes`` and ``**config`` spread where the
        source says what they hold (a tuple or list; a dict literal or ``dict(...)``)."""
        positional: list[_Found] = []
        for argument in call.args:
            if isinstance(argument, ast.Starred):
                node, where = self.definition(argument.value, scope)
                if not isinstance(node, (ast.Tuple, ast.List)) or any(
                    isinstance(e, ast.Starred) for e in node.elts
                ):
                    raise _Unknown("*")
                positional.extend((e, where) for e in node.elts)
            else:
                positional.append((argument, scope))
        keywords: dict[str, _Found] = {}
        for keyword in call.keywords:
            if keyword.arg is not None:
                keywords[keyword.arg] = (keyword.value, scope)
                continue
            node, where = self.definition(keyword.value, scope)
            keywords.update(self._mapping(node, where))
        return positional, keywords

    def _mapping(self, node: ast.expr, scope: _Scope) -> dict[str, _Found]:
        if isinstance(node, ast.Dict):
            if not all(isinstance(k, ast.Constant) and isinstance(k.value, str) for k in node.keys):
                raise _Unknown("**")
            return {
                str(k.value): (v, scope)
                for k, v in zip(node.keys, node.values, strict=True)
                if isinstance(k, ast.Constant)
            }
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "dict"
            and scope.lookup("dict") is None
            and "dict" not in self.own
            and not node.args
            and all(k.arg is not None for k in node.keywords)
        ):
            return {str(k.arg): (k.value, scope) for k in node.keywords}
        raise _Unknown("**")

    def tensor_sizes(
        self, node: ast.expr, scope: _Scope, shape: tuple[str | None, ...], where: str
    ) -> dict[str, Any]:
        """``T.const`` values from a tensor passed to an eager kernel: its declared shape's names
        (``(M, K)``) matched to the sizes it is made with (``torch.randn(1024, 512)``)."""
        try:
            found = self.tensor_shape(node, scope)
        except _Unknown:
            return {}
        if found is None or len(found[0]) != len(shape):
            return {}
        sizes: dict[str, Any] = {}
        for name, size in zip(shape, found[0], strict=True):
            if name is None or name in sizes:
                continue
            with contextlib.suppress(_Unknown):
                value = self.argument(size, found[1], where, direct=False)
                if isinstance(value, Expression) or (
                    isinstance(value, int) and not isinstance(value, bool) and value >= 0
                ):
                    sizes[name] = value
        return sizes


def _element(container: ast.expr, index: ast.expr) -> ast.expr | None:
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


def _field_default(value: ast.expr) -> ast.expr:
    """``field(default=64)`` of a dataclass is 64."""
    if isinstance(value, ast.Call) and ast.unparse(value.func) in ("field", "dataclasses.field"):
        for keyword in value.keywords:
            if keyword.arg == "default":
                return keyword.value
    return value


def _option_defaults(scopes: list[_Scope]) -> dict[str, _Found]:
    """``parser.add_argument("--block-m", type=int, default=64)`` as ``{"block_m": (64, scope)}``,
    from the first scope that adds any options; an option without a usable default is left out."""
    for scope in scopes:
        options = [
            n
            for n in scope.nodes()
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "add_argument"
        ]
        if not options:
            continue
        defaults: dict[str, _Found] = {}
        conflicting: set[str] = set()
        for option in options:
            flags = [a.value for a in option.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
            keywords = {k.arg: k.value for k in option.keywords if k.arg is not None}
            destination = keywords.get("dest")
            if isinstance(destination, ast.Constant) and isinstance(destination.value, str):
                name = destination.value
            elif any(f.startswith("--") for f in flags):
                name = next(f for f in flags if f.startswith("--"))[2:].replace("-", "_")
            elif flags:
                name = flags[0].lstrip("-").replace("-", "_")
            else:
                continue
            default = _option_default(keywords)
            if default is None or (name in defaults and ast.dump(defaults[name][0]) != ast.dump(default)):
                conflicting.add(name)
            else:
                defaults[name] = (default, scope)
        return {name: found for name, found in defaults.items() if name not in conflicting}
    return {}


def _option_default(keywords: dict[str, ast.expr]) -> ast.expr | None:
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


def _kernel_call(node: ast.AST, name: str) -> ast.Call | None:
    """``node`` if it calls the kernel ``name`` or one of its argument-taking methods."""
    if not isinstance(node, ast.Call):
        return None
    func = node.func
    if isinstance(func, ast.Name) and func.id == name:
        return node
    if (
        isinstance(func, ast.Attribute)
        and func.attr in _KERNEL_METHODS
        and isinstance(func.value, ast.Name)
        and func.value.id == name
    ):
        return node
    return None


def _call_site(
    module: _ModuleScope,
    name: str,
    params: list[str],
    tensors: tuple[str, ...],
    shapes: dict[str, tuple[str | None, ...]],
) -> CallSite | None:
    """The first call of ``name`` (in source order) whose arguments are all known, with an
    enclosing ``tilelang.compile``'s target. Tensor arguments of an eager kernel take no value but
    may give its ``T.const`` sizes (``shapes``: each tensor's declared shape, by ``T.const`` name);
    the rest are bound to parameter names."""
    calls = sorted(
        (call for call in (_kernel_call(n, name) for n in ast.walk(module.tree)) if call is not None),
        key=lambda call: (call.lineno, call.col_offset),
    )
    for call in calls:
        scope = module.scope_of(call)
        try:
            positional, keywords = module.expand(call, scope)
            if tensors and len(positional) > len(params):
                raise _Unknown(name)
            args: list[Any] = []
            kwargs: dict[str, Any] = {}
            passed_tensors: list[tuple[str, _Found]] = []
            for index, (argument, where) in enumerate(positional):
                parameter = params[index] if index < len(params) else None
                if parameter is not None and parameter in tensors:
                    passed_tensors.append((parameter, (argument, where)))
                    continue
                value = module.argument(argument, where, name)
                if tensors and parameter is not None:
                    kwargs[parameter] = value
                else:
                    args.append(value)
            for keyword, (argument, where) in keywords.items():
                if keyword in tensors:
                    passed_tensors.append((keyword, (argument, where)))
                elif keyword != "target":
                    kwargs[keyword] = module.argument(argument, where, name)
            for parameter, (argument, where) in passed_tensors:
                sizes = module.tensor_sizes(argument, where, shapes.get(parameter, ()), name)
                for size_name, size in sizes.items():
                    kwargs.setdefault(size_name, size)
        except _Unknown:
            continue
        if tensors and not args and not kwargs:
            continue  # only tensors made where their sizes are unknown: says nothing about the sizes
        enclosing = module.parents.get(call)
        target = _keyword_target(enclosing) if isinstance(enclosing, ast.Call) else None
        return CallSite(line=call.lineno, args=tuple(args), kwargs=kwargs, target=target)
    return None


def resolve_arguments(
    kernel: KernelSource, project: ProjectConfig, recorded: CallSite | None = None
) -> ArgumentChoice:
    """Directive, else a call site, else ``recorded`` (the kernel's spec in an ``irtrace.toml``),
    else parameter defaults; pyproject fills what is left.

    An eager kernel's tensor parameters need no value; its ``T.const`` sizes are filled like
    required parameters, and those still without a value are analyzed as symbolic sizes.
    """
    if kernel.directive is not None and kernel.directive.has_args:
        args, kwargs = kernel.directive.args, dict(kernel.directive.kwargs)
        origin = f"directive (line {kernel.directive.line})"
        if kernel.eager and args:
            # an eager kernel's tensors take no value: positional values go to the others, in order
            takers = [p for p in kernel.params if p not in kernel.tensor_params]
            kwargs = {**dict(zip(takers, args, strict=False)), **kwargs}
            args = ()
    elif kernel.call_site is not None:
        args, kwargs = kernel.call_site.args, dict(kernel.call_site.kwargs)
        origin = f"call site (line {kernel.call_site.line})"
    elif recorded is not None:
        args, kwargs = recorded.args, dict(recorded.kwargs)
        origin = recorded.origin or "a recorded call"
    else:
        args, kwargs, origin = (), {}, "parameter defaults"
    given = set(kernel.params[: len(args)]) | set(kwargs)
    configured = {**project.args, **project.kernel_args.get(kernel.name, {})}
    filled = []
    missing = []
    symbolic = []
    for name in [*kernel.required, *(c for c in kernel.consts if c not in kernel.required)]:
        if name in given:
            continue
        if name in configured:
            kwargs[name] = _config_value(configured[name])
            filled.append(name)
        elif name in kernel.consts:
            symbolic.append(name)
        else:
            missing.append(name)
    return ArgumentChoice(args, kwargs, origin, tuple(filled), tuple(missing), tuple(symbolic))


def _config_value(value: Any) -> Any:
    if isinstance(value, str) and value.startswith("T.") and value[2:].isidentifier():
        return DtypeName(value[2:])
    if isinstance(value, list):
        return [_config_value(v) for v in value]
    return value


def resolve_target(
    kernel: KernelSource | None, dialect: str, default: str, project: ProjectConfig
) -> tuple[str, str]:
    """The target name and where it came from: directive, decorator/compile call, config, default.

    ``kernel`` is ``None`` for a module-level PrimFunc (no function around it to read).
    """
    if dialect == ASCEND:
        return "ascend", "Ascend dialect"
    if kernel is not None and kernel.directive is not None and kernel.directive.target:
        return kernel.directive.target, f"directive (line {kernel.directive.line})"
    if kernel is not None and kernel.decorator_target:
        return kernel.decorator_target, "@tilelang.jit(target=...)"
    if kernel is not None and kernel.call_site is not None and kernel.call_site.target:
        return kernel.call_site.target, f"compile call (line {kernel.call_site.line})"
    if project.target and normalize_target(project.target):
        return str(normalize_target(project.target)), f"{project.path} [tool.tilelang-lsp]"
    return default, "default target"


def read_project_config(document: str | Path) -> ProjectConfig:
    """``[tool.tilelang-lsp]`` from the nearest ``pyproject.toml`` above ``document``."""
    folder = Path(document).resolve().parent
    for candidate in [folder, *folder.parents]:
        path = candidate / "pyproject.toml"
        if not path.is_file():
            continue
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except (OSError, tomllib.TOMLDecodeError):
            return ProjectConfig(path=str(path))
        table = data.get("tool", {}).get("tilelang-lsp", {})
        if not isinstance(table, dict):
            return ProjectConfig(path=str(path))
        args = table.get("args", {})
        kernels = table.get("kernels", {})
        return ProjectConfig(
            path=str(path),
            target=table.get("target") if isinstance(table.get("target"), str) else None,
            args=dict(args) if isinstance(args, dict) else {},
            kernel_args={k: dict(v) for k, v in kernels.items() if isinstance(v, dict)}
            if isinstance(kernels, dict)
            else {},
        )
    return ProjectConfig()


def _strip_comment(line: str) -> str:
    """The line without a trailing ``#`` comment (quotes are respected roughly)."""
    quote = None
    for index, char in enumerate(line):
        if quote:
            if char == quote:
                quote = None
        elif char in "'\"":
            quote = char
        elif char == "#":
            return line[:index].rstrip()
    return line.rstrip()


def source_buffers(text: str) -> list[SourceBuffer]:
    """Allocations and tensor parameters, line by line, so half-typed files still give hints."""
    found: list[SourceBuffer] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = _strip_comment(raw)
        match = _ALLOC_LINE.match(line)
        if match:
            buffer = _source_alloc(match, number)
            if buffer is not None:
                found.append(buffer)
            continue
        empty = _EMPTY_LINE.match(line)
        if empty:
            buffer = _source_empty(empty, number)
            if buffer is not None:
                found.append(buffer)
            continue
        for param in _TENSOR_PARAM.finditer(line):
            buffer = _source_param(line, param, number)
            if buffer is not None:
                found.append(buffer)
    return found


def _source_alloc(match: re.Match[str], number: int) -> SourceBuffer | None:
    try:
        call = ast.parse(match["call"].strip(), mode="eval").body
    except SyntaxError:
        return None
    if not isinstance(call, ast.Call):
        return None
    kind = match["kind"]
    args = list(call.args)
    keywords = {k.arg: k.value for k in call.keywords if k.arg}
    shape_node = args[0] if args else keywords.get("shape")
    dtype_node = args[1] if len(args) > 1 else keywords.get("dtype")
    if kind in ("barrier", "cluster_barrier"):
        shape, dtype = f"[{ast.unparse(shape_node)}]" if shape_node is not None else "?", "uint64"
    elif kind == "var":
        shape, dtype = "[1]", ast.unparse(shape_node) if shape_node is not None else "?"
    else:
        shape = _shape_text(shape_node)
        dtype = _dtype_text(dtype_node)
    end = match.end("call")
    scope_node = keywords.get("scope")
    scope = (
        str(scope_node.value)
        if isinstance(scope_node, ast.Constant)
        else SCOPE_OF_ALLOC.get(kind.lower(), kind)
    )
    return SourceBuffer(match["name"], number, end, shape, dtype, scope, "alloc")


def _source_empty(match: re.Match[str], number: int) -> SourceBuffer | None:
    """``C = T.empty((M, N), dtype)``: an eager kernel's output tensor, a parameter of the kernel."""
    try:
        call = ast.parse(match["call"].strip(), mode="eval").body
    except SyntaxError:
        return None
    if not isinstance(call, ast.Call):
        return None
    keywords = {k.arg: k.value for k in call.keywords if k.arg}
    shape = _shape_text(call.args[0] if call.args else keywords.get("shape"))
    dtype = _dtype_text(call.args[1] if len(call.args) > 1 else keywords.get("dtype"))
    return SourceBuffer(match["name"], number, match.end("call"), shape, dtype, "global", "param")


_BRACKETS = {"(": 1, "[": 1, ")": -1, "]": -1}


def _closing(line: str, start: int) -> int | None:
    """Index after the bracket that closes the one at ``start``."""
    depth = 0
    for index in range(start, len(line)):
        depth += _BRACKETS.get(line[index], 0)
        if depth == 0:
            return index + 1
    return None


def _source_param(line: str, match: re.Match[str], number: int) -> SourceBuffer | None:
    end = _closing(line, match.end() - 1)
    if end is None:
        return None
    try:
        annotation = line[match.end("name") : end].strip().removeprefix(":").strip()
        node = ast.parse(annotation, mode="eval").body
    except SyntaxError:
        return None
    if isinstance(node, ast.Call):
        parts: list[ast.expr] = list(node.args)
    elif isinstance(node, ast.Subscript):
        # T.Tensor[[M, K], dtype]
        parts = list(node.slice.elts) if isinstance(node.slice, ast.Tuple) else [node.slice]
    else:
        return None
    shape = _shape_text(parts[0] if parts else None)
    dtype = _dtype_text(parts[1] if len(parts) > 1 else None)
    return SourceBuffer(match["name"], number, end, shape, dtype, "global", "param")


def _shape_text(node: ast.expr | None) -> str:
    if node is None:
        return "?"
    if isinstance(node, (ast.Tuple, ast.List)):
        return "[" + ", ".join(ast.unparse(e) for e in node.elts) + "]"
    return ast.unparse(node)


def _dtype_text(node: ast.expr | None) -> str:
    if node is None:
        return "?"
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Constant):
        return str(node.value)
    return ast.unparse(node)


def hint_column(text_line: str, name: str, role: str) -> int:
    """0-based column for a compiled buffer's hint: after the alloc call or the parameter annotation."""
    line = _strip_comment(text_line)
    if role == "alloc":
        return len(line)
    for match in _TENSOR_PARAM.finditer(line):
        if match["name"] == name:
            end = _closing(line, match.end() - 1)
            if end is not None:
                return end
    empty = _EMPTY_LINE.match(line)
    if empty and empty["name"] == name:
        return len(line)
    found = re.search(rf"\b{re.escape(name)}\b", line)
    return found.end() if found else len(line)
