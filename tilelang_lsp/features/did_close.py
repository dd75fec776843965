"""``textDocument/didClose``: forget a document and clear its diagnostics."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lsprotocol import types

if TYPE_CHECKING:
    from tilelang_lsp.server import TileLangLanguageServer

METHOD = types.TEXT_DOCUMENT_DID_CLOSE


def handle(server: TileLangLanguageServer, params: types.DidCloseTextDocumentParams) -> None:
    """Stop analyzing the closed document."""
    server.close_document(params.text_document.uri)
