"""``textDocument/codeLens``: per kernel, target, passes, lowering time and shared memory, then (CUDA)
registers, spills and shared memory from nvcc once the background lowering is compiled; with commands."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lsprotocol import types

from tilelang_lsp.commands import KERNEL_SUMMARY, SHOW_IR, TRACE_KERNEL
from tilelang_lsp.render import lens_title

if TYPE_CHECKING:
    from tilelang_lsp.server import TileLangLanguageServer

METHOD = types.TEXT_DOCUMENT_CODE_LENS
OPTIONS = types.CodeLensOptions(resolve_provider=False)


async def handle(server: TileLangLanguageServer, params: types.CodeLensParams) -> list[types.CodeLens]:
    """One summary lens and two command lenses above each analyzed kernel."""
    uri = params.text_document.uri
    doc = server.documents.get(uri)
    if doc is None:
        return []
    await server.wait_for_analysis(doc)
    if doc.analysis is None or not doc.current(doc.analysis_version):
        return []
    summaries = {}
    if doc.summary is not None and doc.current(doc.summary_version):
        summaries = {k["name"]: k for k in doc.summary.get("kernels", [])}
    machine = doc.machine if doc.current(doc.machine_version) else {}
    lenses = []
    for kernel in doc.analysis.get("kernels", []):
        line = max((kernel.get("line") or 1) - 1, 0)
        where = types.Range(start=types.Position(line, 0), end=types.Position(line, 0))
        arguments = [uri, kernel["name"], kernel["target"]]
        title = lens_title(
            kernel,
            summaries.get(kernel["name"]),
            machine.get(kernel["name"]),
            compiling=server.options.machine_code,
        )
        lenses += [
            types.CodeLens(
                range=where, command=types.Command(title=title, command=KERNEL_SUMMARY, arguments=arguments)
            ),
            types.CodeLens(
                range=where, command=types.Command(title="Trace", command=TRACE_KERNEL, arguments=arguments)
            ),
            types.CodeLens(
                range=where,
                command=types.Command(title="IR after pass…", command=SHOW_IR, arguments=arguments),
            ),
        ]
    return lenses
