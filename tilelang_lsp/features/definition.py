"""``textDocument/definition``: from ``T.gemm`` to the ``def`` in TileLang's installed Python source
(the file and line of the ``def`` the API index read from that source). No trust, no worker round trip."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from lsprotocol import types

from tilelang_lsp.api.lookup import entry_at

if TYPE_CHECKING:
    from tilelang_lsp.server import TileLangLanguageServer

METHOD = types.TEXT_DOCUMENT_DEFINITION


async def handle(server: TileLangLanguageServer, params: types.DefinitionParams) -> types.Location | None:
    """Where the TileLang name under the cursor is defined, when its source is a Python file."""
    doc = server.documents.get(params.text_document.uri)
    if doc is None:
        return None
    found = await entry_at(server.api, doc.text, params.position)
    if found is None:
        return None
    resolved = found[1]
    entry = server.api.module_entry(resolved) if isinstance(resolved, str) else resolved
    if entry is None or entry.file is None or entry.line is None or not Path(entry.file).is_file():
        return None
    start = types.Position(line=entry.line - 1, character=0)
    return types.Location(uri=Path(entry.file).as_uri(), range=types.Range(start=start, end=start))
