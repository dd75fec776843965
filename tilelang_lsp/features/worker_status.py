"""``tilelang/workerStatus``: the worker's process id, restarts and start-up times."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tilelang_lsp.server import TileLangLanguageServer

METHOD = "tilelang/workerStatus"


async def handle(server: TileLangLanguageServer, params: Any) -> dict[str, Any]:
    """``{pid, restarts, ready, importSeconds, warmupSeconds}``."""
    worker = server.worker
    return {
        "pid": worker.pid,
        "restarts": worker.restarts,
        "ready": bool(worker.ready is not None and worker.ready.done() and not worker.ready.exception()),
        "importSeconds": worker.ready_info.get("import_s"),
        "warmupSeconds": worker.ready_info.get("warmup_s"),
    }
