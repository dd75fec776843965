"""``shutdown``: stop the worker."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lsprotocol import types

if TYPE_CHECKING:
    from tilelang_lsp.server import TileLangLanguageServer

METHOD = types.SHUTDOWN


async def handle(server: TileLangLanguageServer, params: None) -> None:
    """End the worker process so nothing outlives the server."""
    for doc in server.documents.values():
        for task in (doc.task, doc.background):
            if task is not None:
                task.cancel()
    await server.worker.stop()
