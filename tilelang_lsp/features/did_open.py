"""``textDocument/didOpen``: start tracking and analyzing a document."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lsprotocol import types

if TYPE_CHECKING:
    from tilelang_lsp.server import TileLangLanguageServer

METHOD = types.TEXT_DOCUMENT_DID_OPEN


def handle(server: TileLangLanguageServer, params: types.DidOpenTextDocumentParams) -> None:
    """Analyze the opened document."""
    item = params.text_document
    server.open_document(item.uri, item.version, item.text)
