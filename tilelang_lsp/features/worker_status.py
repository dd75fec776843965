"""``tilelang/workerStatus``: the worker's process id, restarts, start-up times and environment, and
where the API index came from."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tilelang_lsp.server import TileLangLanguageServer

METHOD = "tilelang/workerStatus"


async def handle(server: TileLangLanguageServer, params: Any) -> dict[str, Any]:
    """``{pid, restarts, ready, importSeconds, warmupSeconds, prefix, tilelang, apiIndex}``: ``prefix``
    is the worker's ``sys.prefix`` (its environment), ``tilelang`` the folder tilelang was imported
    from, ``apiIndex`` ``{origin, seconds, tilelang}`` once the API index is in (``origin``:
    ``source`` when read from TileLang's files, ``cache`` when taken from the disk cache)."""
    worker = server.worker
    ready = worker.ready_info
    api = server.api
    return {
        "pid": worker.pid,
        "restarts": worker.restarts,
        "ready": bool(worker.ready is not None and worker.ready.done() and not worker.ready.exception()),
        "importSeconds": ready.import_s if ready is not None else None,
        "warmupSeconds": worker.warmup_s,
        "prefix": ready.prefix if ready is not None else None,
        "tilelang": ready.tilelang if ready is not None else None,
        "apiIndex": (
            {"origin": api.origin, "seconds": api.index.elapsed_s, "tilelang": api.index.folder}
            if api.index is not None
            else None
        ),
    }
