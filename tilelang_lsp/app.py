"""The server with every feature module registered: ``create_server``.

Kept apart from ``tilelang_lsp.server`` so that the feature modules, which name the server's type,
and the server never import each other.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from tilelang_lsp import features
from tilelang_lsp.server import TileLangLanguageServer


def bind(handler: Callable[..., Any], server: TileLangLanguageServer) -> Callable[..., Any]:
    """``handler(server, params)`` as the one-argument callable pygls calls."""
    if inspect.iscoroutinefunction(handler):

        async def bound_async(params: Any) -> Any:
            return await handler(server, params)

        return bound_async

    def bound(params: Any) -> Any:
        return handler(server, params)

    return bound


def bind_command(handler: Callable[..., Any], server: TileLangLanguageServer) -> Callable[..., Any]:
    """A ``workspace/executeCommand`` handler taking the command's arguments."""

    async def bound(*arguments: Any) -> Any:
        return await handler(server, *arguments)

    return bound


def create_server() -> TileLangLanguageServer:
    """The server with every feature module registered."""
    server = TileLangLanguageServer()
    for module in features.MODULES:
        options = getattr(module, "OPTIONS", None)
        server.feature(module.METHOD, options)(bind(module.handle, server))
    for name, handler in features.COMMANDS.items():
        server.command(name)(bind_command(handler, server))
    return server
