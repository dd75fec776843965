"""``workspace/executeCommand`` commands the code lenses offer."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lsprotocol import types

from tilelang_lsp.protocol import Trace, to_json
from tilelang_lsp.render import provenance
from tilelang_lsp.worker_client import RequestCancelled, RequestFailed, WorkerError

if TYPE_CHECKING:
    from tilelang_lsp.server import TileLangLanguageServer

TRACE_KERNEL = "tilelang.traceKernel"
KERNEL_SUMMARY = "tilelang.kernelSummary"
USE_INSTANCE = "tilelang.useInstance"
SHOW_IR = "tilelang.showIrAfterPass"
"""Client-side: the editor asks ``tilelang/passes``, lets the user pick, then ``tilelang/irAfterPass``."""


async def trace_kernel(
    server: TileLangLanguageServer, uri: str, kernel: str, target: str | None = None
) -> Any:
    """Lower the kernel through the whole pipeline into a trace file that passviz opens."""
    doc = server.documents.get(uri)
    if doc is None or not server.options.trusted or not doc.runnable:
        return None
    folder = Path(doc.path).parent / server.options.trace_dir
    if server.workspace.root_path:
        folder = Path(server.workspace.root_path) / server.options.trace_dir
    stamp = time.strftime("%Y%m%d-%H%M%S")
    safe = re.sub(r"[^\w.-]", "_", f"{Path(doc.path).stem}-{kernel}-{target or 'default'}")
    output = str(folder / f"{safe}-{stamp}.trace.jsonl")
    request = Trace(
        path=doc.path,
        text=doc.text,
        kernel=kernel,
        target=target,
        output=output,
        default_target=server.options.default_target,
        instance_traces=server.instance_traces(),
        instance_picks=server.instance_picks.get(uri, {}),
    )
    try:
        result = await server.worker.request(request, timeout=server.options.analysis_timeout_s * 3)
    except (WorkerError, RequestFailed, RequestCancelled) as error:
        message = f"tilelang-lsp: tracing {kernel} failed: {error}"
        server.window_show_message(types.ShowMessageParams(type=types.MessageType.Error, message=message))
        return {"error": str(error)}
    server.window_show_message(
        types.ShowMessageParams(
            type=types.MessageType.Info,
            message=f"Trace of {kernel} written to {output} (open it with passviz)",
        )
    )
    return to_json(result)


async def kernel_summary(
    server: TileLangLanguageServer, uri: str, kernel: str, target: str | None = None
) -> Any:
    """Show which arguments and target the kernel was analyzed with."""
    doc = server.documents.get(uri)
    if doc is None or doc.analysis is None:
        return None
    for entry in doc.analysis.kernels:
        if entry.name == kernel:
            text = provenance(entry)
            server.window_show_message(types.ShowMessageParams(type=types.MessageType.Info, message=text))
            return {"kernel": kernel, "message": text}
    return None


async def use_instance(server: TileLangLanguageServer, uri: str, kernel: str, label: str) -> Any:
    """Analyze the kernel with another of its real instances (a recorded test, ``__main__``)."""
    doc = server.documents.get(uri)
    if doc is None:
        return None
    server.instance_picks.setdefault(uri, {})[kernel] = label
    server.hint_cache.pop(uri, None)
    server.schedule(uri)
    return {"kernel": kernel, "instance": label}


COMMANDS = {TRACE_KERNEL: trace_kernel, KERNEL_SUMMARY: kernel_summary, USE_INSTANCE: use_instance}
