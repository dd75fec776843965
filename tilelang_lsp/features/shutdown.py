"""``shutdown``: stop the worker."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lsprotocol import types

if TYPE_CHECKING:
    from tilelang_lsp.server import TileLangLanguageServer

METHOD = types.SHUTDOWN


async def handle(server: TileLangLanguageServer, params: None) -> None:
    """End the worker process so nothing outlives the server."""
    server.shutdown_jobs()
    await server.worker.stop()
