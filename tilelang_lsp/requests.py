"""Reading the parameters of tilelang's custom requests, which arrive as plain JSON objects."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tilelang_lsp.document import Document
    from tilelang_lsp.server import TileLangLanguageServer


def field_of(params: Any, name: str) -> Any:
    """``params[name]`` whether pygls gave a dict or an attribute object."""
    if params is None:
        return None
    if isinstance(params, dict):
        return params.get(name)
    return getattr(params, name, None)


def document_of(server: TileLangLanguageServer, params: Any) -> Document | None:
    """The open document's latest snapshot, named by ``textDocument.uri`` (or ``uri``)."""
    document = field_of(params, "textDocument")
    uri = field_of(document, "uri") if document is not None else field_of(params, "uri")
    return server.documents.get(uri) if uri else None
