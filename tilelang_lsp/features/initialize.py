"""``initialize``: read the initialization options; start reading TileLang's API."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lsprotocol import types

from tilelang_lsp.options import parse_options

if TYPE_CHECKING:
    from tilelang_lsp.server import TileLangLanguageServer

METHOD = types.INITIALIZE


def handle(server: TileLangLanguageServer, params: types.InitializeParams) -> None:
    """Apply the client's initialization options, keeping defaults for bad values, and start
    reading TileLang's API (from its source files or their cache) for the interpreter the worker
    runs; untrusted, the server's own, as nothing of the workspace's choosing may run."""
    options, problems = parse_options(params.initialization_options)
    server.configure(options, problems)
    server.api.start(options.python if options.trusted else None)
