"""``tilelang/passes``: the passes of a kernel's full lowering, to choose one for ``tilelang/irAfterPass``."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from irtrace.trace.model import occurrence_labels
from tilelang_lsp.requests import document_of, field_of

if TYPE_CHECKING:
    from tilelang_lsp.server import TileLangLanguageServer

METHOD = "tilelang/passes"


async def handle(server: TileLangLanguageServer, params: Any) -> dict[str, Any] | None:
    """``{kernel, target, passes: ["tl.Simplify#1", ...]}`` from the background summary."""
    doc = document_of(server, params)
    kernel = field_of(params, "kernel")
    if doc is None:
        return None
    for _ in range(int(server.options.analysis_timeout_s * 10)):
        if doc.summary is not None and doc.current(doc.summary_version):
            break
        doc = await server.analyzed(doc.uri) or doc
        await asyncio.sleep(0.1)
        doc = server.documents.get(doc.uri) or doc
    summary = doc.summary if doc.current(doc.summary_version) else None
    if summary is None:
        return None
    for entry in summary.kernels:
        if kernel is None or entry.name == kernel:
            return {
                "kernel": entry.name,
                "target": entry.target,
                "passes": occurrence_labels(entry.pass_names),
            }
    return None
