"""``textDocument/signatureHelp``: the signature of the TileLang call the cursor is in, and which
parameter the cursor's argument fills. From the API index: no trust, no worker round trip."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lsprotocol import types

from tilelang_lsp.api.context import CallContext, call_context, expand, import_aliases
from tilelang_lsp.protocol import ApiEntry, ApiParameter

if TYPE_CHECKING:
    from tilelang_lsp.server import TileLangLanguageServer

METHOD = types.TEXT_DOCUMENT_SIGNATURE_HELP
OPTIONS = types.SignatureHelpOptions(trigger_characters=["(", ","], retrigger_characters=[")"])


async def handle(
    server: TileLangLanguageServer, params: types.SignatureHelpParams
) -> types.SignatureHelp | None:
    """The callee's signature with its parameters as ranges of the label and the active one."""
    doc = server.documents.get(params.text_document.uri)
    if doc is None:
        return None
    call = call_context(doc.text, params.position.line, params.position.character)
    if call is None:
        return None
    path = expand(import_aliases(doc.text), call.callee)
    entry = await server.api.lookup(path) if path is not None else None
    if not isinstance(entry, ApiEntry) or entry.signature is None:
        return None
    label = ".".join(call.callee) + entry.signature
    ranges: list[types.ParameterInformation] = []
    at = len(".".join(call.callee)) + 1
    for parameter in entry.parameters:
        start = label.find(parameter.text, at)
        if start < 0:
            break
        at = start + len(parameter.text)
        ranges.append(types.ParameterInformation(label=(start, at)))
    active = active_parameter(entry.parameters, call)
    documentation = (
        types.MarkupContent(kind=types.MarkupKind.Markdown, value=entry.doc) if entry.doc else None
    )
    return types.SignatureHelp(
        signatures=[
            types.SignatureInformation(
                label=label, documentation=documentation, parameters=ranges, active_parameter=active
            )
        ],
        active_signature=0,
        active_parameter=active,
    )


def active_parameter(parameters: tuple[ApiParameter, ...], call: CallContext) -> int | None:
    """The index of the parameter the cursor's argument goes to, as Python would bind it."""
    if call.keyword is not None:
        for index, parameter in enumerate(parameters):
            if parameter.name == call.keyword and parameter.kind in ("positional", "keyword"):
                return index
        return next((i for i, p in enumerate(parameters) if p.kind == "var_keyword"), None)
    seen = 0
    for index, parameter in enumerate(parameters):
        if parameter.kind == "var_positional":
            return index
        if parameter.kind == "positional":
            if seen == call.position:
                return index
            seen += 1
    return None
