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
        # Nothing awaits this start (the first request waits for the worker itself), so a
        # failure is reported here rather than lost as an unretrieved task exception.
        server.worker_start = asyncio.ensure_future(server.worker.start())
        server.worker_start.add_done_callback(lambda task: _report_failed_start(server, task))
    else:
        discard_prestarted()


def _report_failed_start(server: TileLangLanguageServer, task: asyncio.Task[None]) -> None:
    if task.cancelled() or task.exception() is None:
        return
    server.window_show_message(
        types.ShowMessageParams(type=types.MessageType.Error, message=f"tilelang-lsp: {task.exception()}")
    )
