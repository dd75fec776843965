"""``textDocument/hover``: a buffer's full facts and its layout on the other targets."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from lsprotocol import types

from tilelang_lsp.render import hover_markdown
from tilelang_lsp.source.buffers import source_buffers

if TYPE_CHECKING:
    from tilelang_lsp.server import DocumentState, TileLangLanguageServer

METHOD = types.TEXT_DOCUMENT_HOVER
_WORD = re.compile(r"[A-Za-z_]\w*")


async def handle(server: TileLangLanguageServer, params: types.HoverParams) -> types.Hover | None:
    """Facts for the buffer under the cursor, from the current version's analysis."""
    doc = server.documents.get(params.text_document.uri)
    if doc is None or not doc.uses_tilelang:
        return None
    await server.wait_for_analysis(doc)
    lines = doc.text.splitlines()
    line = params.position.line
    if line >= len(lines):
        return None
    word = _word_at(lines[line], params.position.character)
    if word is None:
        return None
    found = find_buffer(server, doc, word, line + 1)
    if found is None:
        return _source_hover(server, doc, word, line + 1)
    kernel, fact = found
    others = _other_targets(server, doc, kernel, fact)
    return types.Hover(
        contents=types.MarkupContent(
            kind=types.MarkupKind.Markdown, value=hover_markdown(fact, kernel, others)
        )
    )


def _word_at(text: str, character: int) -> str | None:
    for match in _WORD.finditer(text):
        if match.start() <= character <= match.end():
            return match.group()
    return None


def find_buffer(
    server: TileLangLanguageServer, doc: DocumentState, name: str, line: int
) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """The kernel around ``line`` and its buffer called ``name``."""
    if not doc.current(doc.analysis_version):
        return None
    kernel = server.kernel_at(doc, line)
    if kernel is None:
        return None
    for fact in kernel.get("buffers", []):
        if fact["name"] == name and server.file_matches(doc, fact.get("file")):
            return kernel, fact
    return None


def _other_targets(
    server: TileLangLanguageServer, doc: DocumentState, kernel: dict[str, Any], fact: dict[str, Any]
) -> list[tuple[str, dict[str, Any] | None, str | None]]:
    others: list[tuple[str, dict[str, Any] | None, str | None]] = []
    if not doc.current(doc.extra_version):
        return others
    for target, result in doc.extra.items():
        if target == kernel["target"]:
            continue
        match = next((k for k in result.get("kernels", []) if k["name"] == kernel["name"]), None)
        if match is None:
            others.append((target, None, result.get("error") or "not analyzed"))
            continue
        other = next(
            (
                b
                for b in match.get("buffers", [])
                if b["name"] == fact["name"] and b.get("line") == fact.get("line")
            ),
            None,
        )
        problem = None if other is not None else f"fails: {(match.get('error') or 'no such buffer')[:60]}"
        others.append((target, other, problem))
    return others


def _source_hover(
    server: TileLangLanguageServer, doc: DocumentState, name: str, line: int
) -> types.Hover | None:
    """What the source says about an allocation when there is no compiled fact for it."""
    for buffer in source_buffers(doc.text):
        if buffer.name == name and buffer.line <= line:
            candidate = buffer
            break
    else:
        return None
    why = (
        "the workspace is not trusted, so the kernel was not compiled"
        if not server.options.trusted
        else doc.failure or "the kernel did not build for this version of the text"
    )
    value = (
        f"**{candidate.name}** — `{candidate.shape}` `{candidate.dtype}` `{candidate.scope}`\n\n"
        f"From the source only: {why}."
    )
    return types.Hover(contents=types.MarkupContent(kind=types.MarkupKind.Markdown, value=value))
