"""``textDocument/codeLens``: per kernel, target, passes, lowering time and shared memory, then (CUDA)
registers, spills and shared memory from nvcc once the background lowering is compiled; with commands."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lsprotocol import types

from tilelang_lsp.commands import KERNEL_SUMMARY, SHOW_IR, TRACE_KERNEL, USE_INSTANCE
from tilelang_lsp.render import lens_title

if TYPE_CHECKING:
    from tilelang_lsp.server import TileLangLanguageServer

METHOD = types.TEXT_DOCUMENT_CODE_LENS
OPTIONS = types.CodeLensOptions(resolve_provider=False)


async def handle(server: TileLangLanguageServer, params: types.CodeLensParams) -> list[types.CodeLens]:
    """One summary lens and two command lenses above each analyzed kernel."""
    uri = params.text_document.uri
    if uri not in server.documents:
        return []
    doc = await server.analyzed(uri, wait=not server.lenses_refresh())  # refreshed when facts come
    if doc is None or doc.analysis is None or not doc.current(doc.analysis_version):
        return []
    summaries = {}
    if doc.summary is not None and doc.current(doc.summary_version):
        summaries = {k.name: k for k in doc.summary.kernels}
    lenses = []
    for kernel in doc.analysis.kernels:
        line = max((kernel.line or 1) - 1, 0)
        where = types.Range(start=types.Position(line, 0), end=types.Position(line, 0))
        arguments = [uri, kernel.name, kernel.target]
        title = lens_title(
            kernel,
            summaries.get(kernel.name),
            doc.compiled(kernel.name),
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
        if len(kernel.instances) > 1:
            # one lens per other real instance: clicking it analyzes the kernel with that one
            lenses += [
                types.CodeLens(
                    range=where,
                    command=types.Command(
                        title=f"use {label}", command=USE_INSTANCE, arguments=[uri, kernel.name, label]
                    ),
                )
                for label in kernel.instances[:MAX_INSTANCE_LENSES]
                if label != kernel.args_origin
            ]
    return lenses


MAX_INSTANCE_LENSES = 6
