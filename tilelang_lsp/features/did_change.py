"""``textDocument/didChange``: analyze the new version, cancelling work on the old one."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lsprotocol import types

if TYPE_CHECKING:
    from tilelang_lsp.server import TileLangLanguageServer

METHOD = types.TEXT_DOCUMENT_DID_CHANGE


def handle(server: TileLangLanguageServer, params: types.DidChangeTextDocumentParams) -> None:
    """Take the edited text (pygls has applied the changes) and schedule its analysis."""
    uri = params.text_document.uri
    document = server.workspace.get_text_document(uri)
    server.change_document(uri, params.text_document.version, document.source)
