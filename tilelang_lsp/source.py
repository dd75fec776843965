"""What the source text alone says: kernels, directives, call sites, allocations, project config.

Pure Python (``ast``, ``tomllib``); no tilelang. The server uses it for source-only hints (an
untrusted workspace, or a file that does not compile) and the worker to pick arguments and targets.
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import copy
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from irtrace.errors import UsageError
from irtrace.specs import DtypeName, Expression, literal_value, parse_call_arguments
from irtrace.targets import ALIASES, ASCEND, PORTABLE, TARGETS

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


def uses_tilelang(text: str) -> bool:
    """Whether the text imports ``tilelang`` (any submodule, at any indentation): only such files
    are ever executed. Read with a regular expression, so half-typed text is judged too."""
    return _USES_TILELANG.search(text) is not None


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


def _own_nodes(function: ast.FunctionDef) -> Iterator[ast.AST]:
    """The nodes of a function's body, not of functions or classes defined inside it."""
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


def _eager_declarations(
    function: ast.FunctionDef, params: list[str]
) -> tuple[tuple[str, ...], tuple[str, ...], dict[str, str]]:
    """Tensor parameters, ``T.const`` names and size-variable names of a jit function's body."""
    tensors: list[str] = []
    consts: list[str] = []
    symbols: dict[str, str] = {}
    for argument in [*function.args.posonlyargs, *function.args.args, *function.args.kwonlyargs]:
        if argument.annotation is not None and _is_tensor_annotation(argument.annotation):
            tensors.append(argument.arg)
    for node in _own_nodes(function):
        if (
            isinstance(node, ast.AnnAssign)
            and isinstance(node.target, ast.Name)
            and node.value is None
            and node.target.id in params
            and _is_tensor_annotation(node.annotation)
        ):
            tensors.append(node.target.id)
        if not isinstance(node, ast.Assign):
            continue
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
    return ordered_tensors, tuple(consts), symbols


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
        tensors: tuple[str, ...] = ()
        consts: tuple[str, ...] = ()
        symbols: dict[str, str] = {}
        if is_jit or is_autotune:
            tensors, consts, symbols = _eager_declarations(node, params)
        else:
            symbols = _eager_declarations(node, params)[2]
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
                call_site=_call_site(tree, module, node.name, params, tensors),
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


class _ModuleScope:
    """What a call site's arguments may refer to: names the module defines when imported (its
    ``__main__`` block does not run), and literal-valued names of each function and of that block."""

    def __init__(self, tree: ast.Module) -> None:
        self.tree = tree
        self.defined: set[str] = set(dir(builtins))
        for statement in tree.body:
            if not _is_main_guard(statement):
                self.defined.update(_bound_names(statement))
        self.parents: dict[ast.AST, ast.AST] = {}
        for parent in ast.walk(tree):
            for child in ast.iter_child_nodes(parent):
                self.parents[child] = parent

    def caller_of(self, node: ast.AST) -> _CallerScope:
        """The function (or ``__main__`` block) holding ``node``: its names, and those bound once,
        to a literal (``M, N = 1024, 512``, ``def main(M=1024)``), with their values."""
        scope: ast.AST | None = self.parents.get(node)
        while scope is not None and not (
            isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef))
            or (isinstance(scope, ast.If) and _is_main_guard(scope))
        ):
            scope = self.parents.get(scope)
        if scope is None:
            return _CallerScope({}, frozenset())
        values: dict[str, Any] = {}
        counts: dict[str, int] = {}
        if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)):
            arguments = scope.args
            positional = [*arguments.posonlyargs, *arguments.args]
            defaults = dict(
                zip(
                    [a.arg for a in positional[len(positional) - len(arguments.defaults) :]],
                    arguments.defaults,
                    strict=True,
                )
            )
            defaults.update(
                {
                    a.arg: d
                    for a, d in zip(arguments.kwonlyargs, arguments.kw_defaults, strict=True)
                    if d is not None
                }
            )
            for argument in [*positional, *arguments.kwonlyargs]:
                counts[argument.arg] = 1
                if argument.arg in defaults:
                    _bind_literal(values, argument.arg, defaults[argument.arg])
            body: list[ast.stmt] = scope.body
        else:
            assert isinstance(scope, ast.If)
            body = scope.body
        for statement in body:
            for child in [statement, *(n for n in ast.walk(statement) if n is not statement)]:
                if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
                    continue
                if isinstance(child, ast.Name) and isinstance(child.ctx, ast.Store):
                    counts[child.id] = counts.get(child.id, 0) + 1
            if isinstance(statement, ast.Assign) and len(statement.targets) == 1:
                target, value = statement.targets[0], statement.value
                if isinstance(target, ast.Name):
                    _bind_literal(values, target.id, value)
                elif (
                    isinstance(target, (ast.Tuple, ast.List))
                    and isinstance(value, (ast.Tuple, ast.List))
                    and len(target.elts) == len(value.elts)
                ):
                    for element, item in zip(target.elts, value.elts, strict=True):
                        if isinstance(element, ast.Name):
                            _bind_literal(values, element.id, item)
        once = {name: value for name, value in values.items() if counts.get(name, 0) == 1}
        return _CallerScope(once, frozenset(counts))


_UNSET = object()


@dataclass(frozen=True)
class _CallerScope:
    """What a call site's caller binds: literal values known statically, and every name it binds."""

    values: dict[str, Any]
    bound: frozenset[str]


def _bind_literal(values: dict[str, Any], name: str, node: ast.expr) -> None:
    with contextlib.suppress(UsageError):
        values[name] = literal_value(node, name)


class _Unknown(Exception):
    """A call-site argument whose value cannot be known without running the caller."""


def _argument_value(node: ast.expr, caller: _CallerScope, module: _ModuleScope, where: str) -> Any:
    """A call-site argument as a literal, a caller's literal name's value, or an ``Expression``
    over module-level names (the caller's plain literal names substituted); ``_Unknown`` otherwise."""
    if isinstance(node, ast.Starred):
        raise _Unknown(where)
    try:
        return literal_value(node, where)
    except UsageError:
        pass
    if isinstance(node, ast.Name) and node.id in caller.values:
        return caller.values[node.id]
    if any(isinstance(n, (ast.Lambda, ast.NamedExpr, ast.Await, ast.Yield)) for n in ast.walk(node)):
        raise _Unknown(where)

    class Substitute(ast.NodeTransformer):
        def visit_Name(self, name: ast.Name) -> ast.AST:
            value = caller.values.get(name.id, _UNSET)
            if isinstance(value, (int, float, bool, str)) or value is None:
                return ast.copy_location(ast.Constant(value), name)
            if name.id in caller.bound or name.id not in module.defined:
                raise _Unknown(name.id)  # the caller's own variable, or a name nothing defines
            return name

    rewritten = Substitute().visit(copy.deepcopy(node))
    return Expression(ast.unparse(rewritten))


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
    tree: ast.Module, module: _ModuleScope, name: str, params: list[str], tensors: tuple[str, ...]
) -> CallSite | None:
    """The first call of ``name`` (in source order) whose arguments are all known, with an
    enclosing ``tilelang.compile``'s target. Tensor arguments of an eager kernel are skipped (they
    take no value) and the rest bound to parameter names."""
    calls = sorted(
        (call for call in (_kernel_call(n, name) for n in ast.walk(tree)) if call is not None),
        key=lambda call: (call.lineno, call.col_offset),
    )
    for call in calls:
        caller = module.caller_of(call)
        try:
            if any(k.arg is None for k in call.keywords) or (tensors and len(call.args) > len(params)):
                raise _Unknown(name)
            args: list[Any] = []
            kwargs: dict[str, Any] = {}
            for index, argument in enumerate(call.args):
                parameter = params[index] if index < len(params) else None
                if parameter in tensors:
                    continue
                value = _argument_value(argument, caller, module, name)
                if tensors and parameter is not None:
                    kwargs[parameter] = value
                else:
                    args.append(value)
            for keyword in call.keywords:
                assert keyword.arg is not None
                if keyword.arg in tensors or keyword.arg == "target":
                    continue
                kwargs[keyword.arg] = _argument_value(keyword.value, caller, module, name)
        except _Unknown:
            continue
        if tensors and not args and not kwargs:
            continue  # only tensors (`gemm(a, b, c)`): says nothing about the sizes
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
