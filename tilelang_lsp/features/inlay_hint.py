"""``textDocument/inlayHint``: shape, dtype, scope and layout after allocations and on parameters."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lsprotocol import types

from tilelang_lsp.document import Document
from tilelang_lsp.protocol import AnalysisResult, KernelAnalysis
from tilelang_lsp.render import NEEDS_VALUES_HINT, hint_label, source_hint_label
from tilelang_lsp.source.buffers import hint_column, source_buffers

if TYPE_CHECKING:
    from tilelang_lsp.server import TileLangLanguageServer

METHOD = types.TEXT_DOCUMENT_INLAY_HINT
OPTIONS = types.InlayHintOptions(resolve_provider=False)


async def handle(server: TileLangLanguageServer, params: types.InlayHintParams) -> list[types.InlayHint]:
    """Hints from what is known of the current version now (source-only where no compiled facts
    are in yet), within the range. A client with refresh support is asked to refresh when the
    compiled facts arrive; one without gets a bounded wait (``hintWaitS``) for them instead."""
    if params.text_document.uri not in server.documents:
        return []
    doc = await server.analyzed(params.text_document.uri, wait=not server.hints_refresh())
    if doc is None:
        return []
    hints = document_hints(server, doc)
    first, last = params.range.start.line, params.range.end.line
    return [h for h in hints if first <= h.position.line <= last]


def document_hints(server: TileLangLanguageServer, doc: Document) -> list[types.InlayHint]:
    """Every hint of the document, cached per snapshot (any new version or result replaces it)."""
    cached = server.hint_cache.get(doc.uri)
    if cached is not None and cached[0] is doc:
        return cached[1]
    hints = _build_hints(server, doc)
    server.hint_cache[doc.uri] = (doc, hints)
    return hints


def _build_hints(server: TileLangLanguageServer, doc: Document) -> list[types.InlayHint]:
    if not doc.uses_tilelang:
        return []  # not a TileLang file: nothing, not even source-only hints
    options = server.options.inlay_hints
    lines = doc.text.splitlines()
    hints: list[types.InlayHint] = []
    covered: set[int] = set()
    failed: list[KernelAnalysis] = []
    analysis = doc.analysis if doc.current(doc.analysis_version) else None
    reason = _fallback_reason(server, doc, analysis)
    if analysis is not None and not analysis.kernels:
        analysis = None  # the module did not import: everything comes from the source
    if analysis is not None:
        for kernel in analysis.kernels:
            if not kernel.buffers:
                failed.append(kernel)
            for fact in kernel.buffers:
                line = fact.line
                if line is None or not doc.is_file(fact.file) or line > len(lines):
                    continue
                if fact.role == "param" and not options.parameters:
                    continue
                covered.add(line)
                column = hint_column(lines[line - 1], fact.name, fact.role)
                hints.append(_hint(line, column, hint_label(fact, kernel.target, options), fact.role))
    for buffer in source_buffers(doc.text):
        if buffer.line in covered or (buffer.role == "param" and not options.parameters):
            continue
        why = reason
        if analysis is not None:
            broken = _kernel_above(failed, analysis, buffer.line)
            if broken is None:
                continue
            why = (
                f"source only: no value for {', '.join(broken.needs_values)}: {NEEDS_VALUES_HINT}"
                if broken.needs_values
                else f"source only: {broken.name} did not build"
            )
        hints.append(
            _hint(buffer.line, buffer.end_column, source_hint_label(buffer, options, why), buffer.role)
        )
    return hints


def _kernel_above(failed: list[KernelAnalysis], analysis: AnalysisResult, line: int) -> KernelAnalysis | None:
    """The failed kernel that ``line`` lies in, if the closest kernel above it is a failed one."""
    kernels = [k for k in analysis.kernels if k.line and k.line <= line]
    if not kernels:
        return None
    closest = max(kernels, key=lambda k: k.line or 0)
    return closest if closest in failed else None


def _fallback_reason(server: TileLangLanguageServer, doc: Document, analysis: AnalysisResult | None) -> str:
    if not server.options.trusted:
        return "source only: workspace not trusted"
    if doc.failure is not None:
        return "source only: analysis stopped"
    if analysis is None:
        return "source only: analyzing"
    return "source only: does not compile"


def _hint(line: int, column: int, label: str, role: str) -> types.InlayHint:
    return types.InlayHint(
        position=types.Position(line=line - 1, character=column),
        label=label,
        kind=types.InlayHintKind.Type,
        padding_left=True,
    )
