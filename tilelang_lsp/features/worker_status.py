"""``tilelang/workerStatus``: the worker's process id, restarts, start-up times and environment."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tilelang_lsp.server import TileLangLanguageServer

METHOD = "tilelang/workerStatus"


async def handle(server: TileLangLanguageServer, params: Any) -> dict[str, Any]:
    """``{pid, restarts, ready, importSeconds, warmupSeconds, prefix, tilelang}``: ``prefix`` is the
    worker's ``sys.prefix`` (its environment), ``tilelang`` the folder tilelang was imported from."""
    worker = server.worker
    ready = worker.ready_info
    return {
        "pid": worker.pid,
        "restarts": worker.restarts,
        "ready": bool(worker.ready is not None and worker.ready.done() and not worker.ready.exception()),
        "importSeconds": ready.import_s if ready is not None else None,
        "warmupSeconds": worker.warmup_s,
        "prefix": ready.prefix if ready is not None else None,
        "tilelang": ready.tilelang if ready is not None else None,
    }
