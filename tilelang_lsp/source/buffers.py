"""Buffers read from the text alone, line by line (``T.alloc_*`` calls and ``T.Tensor``
parameters), for source-only hints when there is no compiled fact, and where a hint goes."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

_ALLOC_LINE = re.compile(
    r"^(?P<indent>\s*)(?P<name>[A-Za-z_]\w*)\s*=\s*(?P<call>\w+\.alloc_(?P<kind>\w+)\s*\(.*)$"
)
_TENSOR_PARAM = re.compile(r"(?P<name>[A-Za-z_]\w*)\s*:\s*\w+\.(?:Tensor|Buffer|StridedTensor)\s*[(\[]")
_EMPTY_LINE = re.compile(r"^(?P<indent>\s*)(?P<name>[A-Za-z_]\w*)\s*=\s*(?P<call>\w+\.empty\s*\(.*)$")

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
