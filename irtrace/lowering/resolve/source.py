"""The kernels a document defines, as its source shows them: ``# tilelang:`` directives,
decorators, eager ``@tilelang.jit`` declarations and the first call whose arguments are known.

Pure Python (``ast``); the worker uses it to pick each kernel's arguments and target.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from typing import Any

from irtrace.base.errors import UsageError
from irtrace.facts.source_tree import parse_source
from irtrace.lowering.resolve.literals import LiteralScope, Unknown, own_nodes
from irtrace.targets.backends import known_target_name, tvm_target_name
from irtrace.targets.specs import parse_call_arguments

DIRECTIVE = re.compile(r"#\s*tilelang:\s*(?P<body>.*)$")
_DIRECTIVE_ARGS = re.compile(r"args\s*\(")
_DIRECTIVE_TARGET = re.compile(r"target\s*=\s*(?P<target>[\w:.\-]+)")

_TENSOR_TYPES = ("Tensor", "Buffer", "StridedTensor", "FragmentBuffer", "SharedBuffer", "LocalBuffer")
"""Annotations that make an eager ``@tilelang.jit`` parameter a tensor (it takes no value)."""
_SIZE_DECLARATIONS = ("const", "dynamic", "symbolic")
"""``T.const(...)``, ``T.dynamic(...)``, ``T.symbolic(...)``: size variables declared by name."""
_KERNEL_METHODS = ("compile", "get_tir", "get_kernel_source")
"""``kernel.compile(M=1024, ...)``: calls of a jit kernel's methods that take its arguments."""


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
    first_line: int = 0
    """1-based line of its first decorator (the ``def`` line when it has none)."""
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
        target = known_target_name(target_match["target"])
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
    """``target=`` of a call as irtrace names it: a string (``"cuda"``) or, as TileLang 0.1.15
    wants a target with attributes, a dict of strings (``{"kind": "cuda", "arch": "sm_90a"}``)."""
    for keyword in call.keywords:
        if keyword.arg != "target":
            continue
        if isinstance(keyword.value, ast.Constant):
            return known_target_name(str(keyword.value.value))
        if isinstance(keyword.value, ast.Dict):
            return _dict_target(keyword.value)
    return None


def _dict_target(node: ast.Dict) -> str | None:
    """A target dict of string keys and values, never evaluated; anything else names no target."""
    fields: dict[str, str] = {}
    for key, value in zip(node.keys, node.values, strict=True):
        if not (isinstance(key, ast.Constant) and isinstance(key.value, str)):
            return None
        if isinstance(value, ast.Constant) and isinstance(value.value, str):
            fields[key.value] = value.value
    kind = fields.get("kind")
    if kind is None:
        return None
    return known_target_name(tvm_target_name(kind, fields.get("arch"), fields.get("mcpu")))


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


def _eager_declarations(function: ast.FunctionDef, params: list[str]) -> _EagerDeclarations:
    """Tensor parameters, ``T.const`` names and size-variable names of a jit function's body."""
    tensors: list[str] = []
    consts: list[str] = []
    symbols: dict[str, str] = {}
    for argument in [*function.args.posonlyargs, *function.args.args, *function.args.kwonlyargs]:
        if argument.annotation is not None and _is_tensor_annotation(argument.annotation):
            tensors.append(argument.arg)
    for node in own_nodes(function):
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
    return _EagerDeclarations(ordered_tensors, tuple(consts), symbols)


def scan_kernels(text: str) -> list[KernelSource]:
    """Top-level functions that define a ``@T.prim_func`` inside or are ``@tilelang.jit`` kernels
    (eager or not, under ``@autotune`` or not)."""
    try:
        tree = parse_source(text)
    except (SyntaxError, ValueError):
        return []
    lines = text.splitlines()
    module = LiteralScope(tree)
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
                first_line=top,
                params=tuple(params),
                required=tuple(required),
                directive=directive,
                call_site=_call_site(module, node.name, params, tensors),
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
    module: LiteralScope, name: str, params: list[str], tensors: tuple[str, ...]
) -> CallSite | None:
    """The first call of ``name`` (in source order) whose arguments are all literals or names
    bound once to literals, with an enclosing ``tilelang.compile``'s target. An eager kernel's
    tensor arguments take no value; the rest are bound to parameter names."""
    calls = sorted(
        (call for call in (_kernel_call(n, name) for n in ast.walk(module.tree)) if call is not None),
        key=lambda call: (call.lineno, call.col_offset),
    )
    for call in calls:
        scope = module.scope_of(call)
        try:
            if any(isinstance(a, ast.Starred) for a in call.args) or any(
                k.arg is None for k in call.keywords
            ):
                raise Unknown(name)
            if tensors and len(call.args) > len(params):
                raise Unknown(name)
            args: list[Any] = []
            kwargs: dict[str, Any] = {}
            for index, argument in enumerate(call.args):
                parameter = params[index] if index < len(params) else None
                if parameter is not None and parameter in tensors:
                    continue
                value = module.value(argument, scope)
                if tensors and parameter is not None:
                    kwargs[parameter] = value
                else:
                    args.append(value)
            for keyword in call.keywords:
                if keyword.arg in tensors or keyword.arg == "target" or keyword.arg is None:
                    continue
                kwargs[keyword.arg] = module.value(keyword.value, scope)
        except Unknown:
            continue
        if tensors and not args and not kwargs:
            continue  # only tensors: says nothing about the sizes
        enclosing = module.parents.get(call)
        target = _keyword_target(enclosing) if isinstance(enclosing, ast.Call) else None
        return CallSite(line=call.lineno, args=tuple(args), kwargs=kwargs, target=target)
    return None
