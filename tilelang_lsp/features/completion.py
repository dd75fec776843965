"""``textDocument/completion``: TileLang's names after ``T.``, ``tilelang.`` and in ``from tilelang… import``.

From the API index read from TileLang's source (or its cache): no trust needed, no worker round
trip. The first answer waits for the module it lists (``tilelang.language`` is read first, in well
under a second), so it is never a partial list; items sort by ``tilelang_lsp.api.ranking``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lsprotocol import types

from tilelang_lsp.api.context import completion_context, expand, import_aliases
from tilelang_lsp.api.lookup import entry_markdown
from tilelang_lsp.api.ranking import sort_text
from tilelang_lsp.protocol import ApiEntry

if TYPE_CHECKING:
    from tilelang_lsp.server import TileLangLanguageServer

METHOD = types.TEXT_DOCUMENT_COMPLETION
OPTIONS = types.CompletionOptions(trigger_characters=["."])

_KINDS = {
    "module": types.CompletionItemKind.Module,
    "class": types.CompletionItemKind.Class,
    "function": types.CompletionItemKind.Function,
    "value": types.CompletionItemKind.Constant,
}


async def handle(
    server: TileLangLanguageServer, params: types.CompletionParams
) -> types.CompletionList | None:
    """The members of the TileLang module before the dot that start with what is typed."""
    doc = server.documents.get(params.text_document.uri)
    if doc is None:
        return None
    lines = doc.text.splitlines()
    position = params.position
    line = lines[position.line] if position.line < len(lines) else ""
    context = completion_context(line, position.character)
    if context is None:
        return None
    parts, prefix, from_import = context
    path = parts if from_import else expand(import_aliases(doc.text), parts)
    module = await server.api.lookup(path) if path is not None else None
    if not isinstance(module, str):
        return None
    written = ".".join(parts)
    wanted = prefix.lower()
    markdown = _client_reads_markdown(server)
    items = [
        _item(written, entry, server, markdown)
        for name, entry in server.api.members(module).items()
        if name.lower().startswith(wanted)
    ]
    return types.CompletionList(is_incomplete=False, items=items)


def _item(
    written: str, entry: ApiEntry, server: TileLangLanguageServer, markdown: bool
) -> types.CompletionItem:
    name = f"{written}.{entry.name}"
    resolved = entry.module if entry.kind == "module" and entry.module in server.api.modules else entry
    documentation = (
        types.MarkupContent(
            kind=types.MarkupKind.Markdown, value=entry_markdown(name, resolved or entry, server.api)
        )
        if markdown
        else entry.doc or None
    )
    folder = server.api.installation.folder if server.api.installation is not None else None
    return types.CompletionItem(
        label=entry.name,
        kind=_KINDS[entry.kind],
        sort_text=sort_text(entry, folder),
        detail=f"{entry.name}{entry.signature}" if entry.signature else entry.module or entry.kind,
        documentation=documentation,
    )


def _client_reads_markdown(server: TileLangLanguageServer) -> bool:
    """Whether the client said it shows Markdown in completion docs (else plain text is sent)."""
    document = server.client_capabilities.text_document
    completion = document.completion if document is not None else None
    item = completion.completion_item if completion is not None else None
    formats = item.documentation_format if item is not None else None
    return bool(formats) and types.MarkupKind.Markdown in (formats or [])
