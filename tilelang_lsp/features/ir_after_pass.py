"""``tilelang/irAfterPass``: the IR of a kernel after a chosen pass, for a read-only document."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from tilelang_lsp.protocol import IrAfterPass
from tilelang_lsp.requests import document_of, field_of
from tilelang_lsp.worker_client import RequestCancelled, RequestFailed, WorkerError

if TYPE_CHECKING:
    from tilelang_lsp.server import TileLangLanguageServer

METHOD = "tilelang/irAfterPass"
SCHEME = "tilelang-ir"


async def handle(server: TileLangLanguageServer, params: Any) -> dict[str, Any] | None:
    """``{kernel, target, passName, index, uri, text}``; ``uri`` names a read-only document."""
    doc = document_of(server, params)
    kernel, pass_name = field_of(params, "kernel"), field_of(params, "passName")
    if doc is None or not kernel or not pass_name or not server.options.trusted or not doc.runnable:
        return None
    target = field_of(params, "target")
    request = IrAfterPass(
        path=doc.path,
        text=doc.text,
        kernel=str(kernel),
        pass_name=str(pass_name),
        target=str(target) if target else None,
        default_target=server.options.default_target,
    )
    try:
        ir = await server.worker.request(request, timeout=server.options.analysis_timeout_s)
    except (WorkerError, RequestFailed, RequestCancelled) as error:
        return {"kernel": kernel, "passName": pass_name, "error": str(error)}
    name = f"{kernel}@{ir.target}/{ir.index:03d}-{ir.pass_name}.py"
    return {
        "kernel": ir.kernel,
        "target": ir.target,
        "passName": ir.pass_name,
        "index": ir.index,
        "text": ir.text,
        "uri": f"{SCHEME}:/{quote(name)}",
    }
