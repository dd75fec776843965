"""``tilelang/irAfterPass``: the IR of a kernel after a chosen pass, for a read-only document."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from urllib.parse import quote

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
    request = {
        "path": doc.path,
        "text": doc.text,
        "kernel": kernel,
        "pass": pass_name,
        "target": field_of(params, "target"),
        "default_target": server.options.default_target,
    }
    try:
        result: dict[str, Any] = await server.worker.request(
            "irAfterPass", request, timeout=server.options.analysis_timeout_s
        )
    except (WorkerError, RequestFailed, RequestCancelled) as error:
        return {"kernel": kernel, "passName": pass_name, "error": str(error)}
    result["passName"] = result.pop("pass")
    name = f"{kernel}@{result['target']}/{result['index']:03d}-{result['passName']}.py"
    result["uri"] = f"{SCHEME}:/{quote(name)}"
    return result
