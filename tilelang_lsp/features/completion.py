"""``textDocument/completion``: TileLang's names after ``T.``, ``tilelang.`` and in ``from tilelang… import``.

From the API index the worker introspected (or its cache): no trust needed, no worker round trip.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lsprotocol import types

from tilelang_lsp.api.context import completion_context, expand, import_aliases
from tilelang_lsp.api.lookup import entry_markdown
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


def handle(server: TileLangLanguageServer, params: types.CompletionParams) -> types.CompletionList | None:
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
    if not server.api.ready:  # the index is on its way: ask again
        return types.CompletionList(is_incomplete=True, items=[])
    path = parts if from_import else expand(import_aliases(doc.text), parts)
    module = server.api.resolve(path) if path is not None else None
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
    return types.CompletionItem(
        label=entry.name,
        kind=_KINDS[entry.kind],
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
