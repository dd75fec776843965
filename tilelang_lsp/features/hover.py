"""``textDocument/hover``: a buffer's full facts and its layout on the other targets; TileLang's
API docs for ``T.gemm`` and the like (``tilelang_lsp.api``) where no buffer answers, and on a tile
operation what its line became through the passes (``tilelang_lsp.line_ir``)."""

from __future__ import annotations

import asyncio
import re
from typing import TYPE_CHECKING

from lsprotocol import types

from tilelang_lsp.api.lookup import api_hover
from tilelang_lsp.document import Document
from tilelang_lsp.line_ir import line_section
from tilelang_lsp.protocol import Buffer, KernelAnalysis
from tilelang_lsp.render import hover_markdown
from tilelang_lsp.source.buffers import source_buffers

if TYPE_CHECKING:
    from tilelang_lsp.server import TileLangLanguageServer

METHOD = types.TEXT_DOCUMENT_HOVER
_WORD = re.compile(r"[A-Za-z_]\w*")


async def handle(server: TileLangLanguageServer, params: types.HoverParams) -> types.Hover | None:
    """Facts for the buffer under the cursor, from the current version's analysis."""
    before = server.documents.get(params.text_document.uri)
    if before is None or not before.uses_tilelang:
        return None
    api = await api_hover(server.api, before.text, params.position, attribute_only=True)
    if api is not None:  # `T.gemm`: an attribute, never a buffer
        # on a tile operation, what its line became through the passes (lowered on the first hover)
        section = await line_section(server, before, params.position)
        if section is not None and isinstance(api.contents, types.MarkupContent):
            value = f"{api.contents.value}\n\n---\n\n{section}"
            return types.Hover(
                contents=types.MarkupContent(kind=api.contents.kind, value=value), range=api.range
            )
        return api
    doc = await server.analyzed(before.uri, wait=False)  # what is known now; never waits on the worker
    if doc is None:
        return None
    lines = doc.text.splitlines()
    line = params.position.line
    if line >= len(lines):
        return None
    word = _word_at(lines[line], params.position.character)
    if word is None:
        return None
    found = find_buffer(doc, word, line + 1)
    if found is None:
        source = _source_hover(server, doc, word, line + 1)
        if source is not None:
            return source
        return await api_hover(server.api, doc.text, params.position, attribute_only=False)
    kernel, fact = found
    others = _other_targets(doc, kernel, fact)
    value = hover_markdown(fact, kernel, others)
    if fact.layout is not None:
        # drawn in a thread: a 128 x 128 fragment is 16k evaluated cells
        picture = await asyncio.to_thread(server.pictures.picture, fact.layout)
        if picture is not None:
            value += f"\n\n[layout picture]({picture.as_uri()})"
    return types.Hover(contents=types.MarkupContent(kind=types.MarkupKind.Markdown, value=value))


def _word_at(text: str, character: int) -> str | None:
    for match in _WORD.finditer(text):
        if match.start() <= character <= match.end():
            return match.group()
    return None


def find_buffer(doc: Document, name: str, line: int) -> tuple[KernelAnalysis, Buffer] | None:
    """The kernel around ``line`` and its buffer called ``name``."""
    if not doc.current(doc.analysis_version):
        return None
    kernel = doc.kernel_at(line)
    if kernel is None:
        return None
    for fact in kernel.buffers:
        if fact.name == name and doc.is_file(fact.file):
            return kernel, fact
    return None


def _other_targets(
    doc: Document, kernel: KernelAnalysis, fact: Buffer
) -> list[tuple[str, Buffer | None, str | None]]:
    others: list[tuple[str, Buffer | None, str | None]] = []
    if not doc.current(doc.extra_version):
        return others
    for extra in doc.extra:
        if extra.target == kernel.target:
            continue
        kernels = extra.result.kernels if extra.result is not None else ()
        match = next((k for k in kernels if k.name == kernel.name), None)
        if match is None:
            others.append((extra.target, None, extra.error or "not analyzed"))
            continue
        other = next((b for b in match.buffers if b.name == fact.name and b.line == fact.line), None)
        problem = None if other is not None else f"fails: {(match.error or 'no such buffer')[:60]}"
        others.append((extra.target, other, problem))
    return others


def _source_hover(server: TileLangLanguageServer, doc: Document, name: str, line: int) -> types.Hover | None:
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
        else (doc.failure.message if doc.failure is not None else None)
        or ("the kernel is still being analyzed" if server.analyzing(doc.uri) else None)
        or "the kernel did not build for this version of the text"
    )
    value = (
        f"**{candidate.name}** — `{candidate.shape}` `{candidate.dtype}` `{candidate.scope}`\n\n"
        f"From the source only: {why}."
    )
    return types.Hover(contents=types.MarkupContent(kind=types.MarkupKind.Markdown, value=value))
