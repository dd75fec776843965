"""``initialized``: report bad options and start the worker early so it is warm."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from lsprotocol import types

from tilelang_lsp.worker_client import discard_prestarted

if TYPE_CHECKING:
    from tilelang_lsp.server import TileLangLanguageServer

METHOD = types.INITIALIZED


def handle(server: TileLangLanguageServer, params: types.InitializedParams) -> None:
    """Say which options were ignored; start the worker now if the workspace is trusted."""
    if server.option_problems:
        server.window_show_message(
            types.ShowMessageParams(
                type=types.MessageType.Warning,
                message="tilelang-lsp: " + "; ".join(server.option_problems),
            )
        )
    if server.options.trusted:
        server.worker_start = asyncio.ensure_future(server.worker.start())
    else:
        discard_prestarted()
