"""What the source text alone says: kernels, directives, call sites, allocations, project config.

Pure Python (``ast``, ``tomllib``); no tilelang. The server uses it for source-only hints (an
untrusted workspace, or a file that does not compile) and the worker to pick arguments and targets.
"""

from __future__ import annotations

import ast
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from irtrace.errors import UsageError
from irtrace.specs import DtypeName, literal_value, parse_call_arguments
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
_TENSOR_PARAM = re.compile(r"(?P<name>[A-Za-z_]\w*)\s*:\s*\w+\.(?:Tensor|Buffer)\s*\(")

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
    """A call of the kernel with literal arguments in the same file (``matmul(1024, 1024, 1024)``)."""

    line: int
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    target: str | None = None
    """``target=`` of the ``tilelang.compile(...)`` call around it, if any."""


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
    """Required parameters nobody gave a value for."""


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


def _keyword_target(call: ast.Call) -> str | None:
    for keyword in call.keywords:
        if keyword.arg == "target" and isinstance(keyword.value, ast.Constant):
            return normalize_target(str(keyword.value.value))
    return None


def scan_kernels(text: str) -> list[KernelSource]:
    """Top-level functions that define a ``@T.prim_func`` inside or are ``@tilelang.jit`` kernels."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return []
    lines = text.splitlines()
    kernels = []
    for node in tree.body:
        if not isinstance(node, ast.FunctionDef):
            continue
        is_jit = any(_is_jit_decorator(d) for d in node.decorator_list)
        builds = any(
            isinstance(inner, ast.FunctionDef)
            and any(_is_prim_func_decorator(d) for d in inner.decorator_list)
            for inner in ast.walk(node)
            if inner is not node
        )
        top = min([node.lineno, *(d.lineno for d in node.decorator_list)])
        directive = _directive_above(lines, top)
        if not (is_jit or builds or directive):
            continue
        params = [a.arg for a in [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs]]
        positional = [*node.args.posonlyargs, *node.args.args]
        required = [a.arg for a in positional[: len(positional) - len(node.args.defaults)]]
        required += [
            a.arg for a, d in zip(node.args.kwonlyargs, node.args.kw_defaults, strict=True) if d is None
        ]
        decorator_target = None
        for decorator in node.decorator_list:
            if isinstance(decorator, ast.Call) and _is_jit_decorator(decorator):
                decorator_target = _keyword_target(decorator)
        kernels.append(
            KernelSource(
                name=node.name,
                line=node.lineno,
                is_jit=is_jit,
                params=tuple(params),
                required=tuple(required),
                directive=directive,
                call_site=_call_site(tree, node.name),
                decorator_target=decorator_target,
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


def _call_site(tree: ast.Module, name: str) -> CallSite | None:
    """The first call of ``name`` whose arguments are all literals, with an enclosing compile's target."""
    parents: dict[ast.AST, ast.AST] = {}
    for parent in ast.walk(tree):
        for child in ast.iter_child_nodes(parent):
            parents[child] = parent
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == name):
            continue
        try:
            args = tuple(literal_value(a, name) for a in node.args)
            kwargs = {k.arg: literal_value(k.value, name) for k in node.keywords if k.arg is not None}
        except UsageError:
            continue
        if any(k.arg is None for k in node.keywords):
            continue
        enclosing = parents.get(node)
        target = _keyword_target(enclosing) if isinstance(enclosing, ast.Call) else None
        return CallSite(line=node.lineno, args=args, kwargs=kwargs, target=target)
    return None


def resolve_arguments(kernel: KernelSource, project: ProjectConfig) -> ArgumentChoice:
    """Directive, else literal call site, else parameter defaults; pyproject fills what is left."""
    if kernel.directive is not None and kernel.directive.has_args:
        args, kwargs = kernel.directive.args, dict(kernel.directive.kwargs)
        origin = f"directive (line {kernel.directive.line})"
    elif kernel.call_site is not None:
        args, kwargs = kernel.call_site.args, dict(kernel.call_site.kwargs)
        origin = f"call site (line {kernel.call_site.line})"
    else:
        args, kwargs, origin = (), {}, "parameter defaults"
    given = set(kernel.params[: len(args)]) | set(kwargs)
    configured = {**project.args, **project.kernel_args.get(kernel.name, {})}
    filled = []
    missing = []
    for name in kernel.required:
        if name in given:
            continue
        if name in configured:
            kwargs[name] = _config_value(configured[name])
            filled.append(name)
        else:
            missing.append(name)
    return ArgumentChoice(args, kwargs, origin, tuple(filled), tuple(missing))


def _config_value(value: Any) -> Any:
    if isinstance(value, str) and value.startswith("T.") and value[2:].isidentifier():
        return DtypeName(value[2:])
    if isinstance(value, list):
        return [_config_value(v) for v in value]
    return value


def resolve_target(
    kernel: KernelSource, dialect: str, default: str, project: ProjectConfig
) -> tuple[str, str]:
    """The target name and where it came from: directive, decorator/compile call, config, default."""
    if dialect == ASCEND:
        return "ascend", "Ascend dialect"
    if kernel.directive is not None and kernel.directive.target:
        return kernel.directive.target, f"directive (line {kernel.directive.line})"
    if kernel.decorator_target:
        return kernel.decorator_target, "@tilelang.jit(target=...)"
    if kernel.call_site is not None and kernel.call_site.target:
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


def _source_param(line: str, match: re.Match[str], number: int) -> SourceBuffer | None:
    start = match.end() - 1
    depth, end = 0, None
    for index in range(start, len(line)):
        depth += {"(": 1, ")": -1}.get(line[index], 0)
        if depth == 0:
            end = index + 1
            break
    if end is None:
        return None
    try:
        annotation = line[match.end("name") : end].strip().removeprefix(":").strip()
        call = ast.parse(annotation, mode="eval").body
    except SyntaxError:
        return None
    if not isinstance(call, ast.Call):
        return None
    shape = _shape_text(call.args[0] if call.args else None)
    dtype = _dtype_text(call.args[1] if len(call.args) > 1 else None)
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
            depth = 0
            for index in range(match.end() - 1, len(line)):
                depth += {"(": 1, ")": -1}.get(line[index], 0)
                if depth == 0:
                    return index + 1
    found = re.search(rf"\b{re.escape(name)}\b", line)
    return found.end() if found else len(line)
