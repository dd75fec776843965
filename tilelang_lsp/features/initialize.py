"""``initialize``: read the initialization options."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lsprotocol import types

from tilelang_lsp.options import parse_options

if TYPE_CHECKING:
    from tilelang_lsp.server import TileLangLanguageServer

METHOD = types.INITIALIZE


def handle(server: TileLangLanguageServer, params: types.InitializeParams) -> None:
    """Apply the client's initialization options, keeping defaults for bad values."""
    options, problems = parse_options(params.initialization_options)
    server.configure(options, problems)
