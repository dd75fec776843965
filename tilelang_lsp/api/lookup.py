"""From a document position to TileLang's API: the entry named there, and how to show it."""

from __future__ import annotations

from lsprotocol import types

from tilelang_lsp.api.catalog import ApiCatalog, Resolved
from tilelang_lsp.api.context import expand, import_aliases, name_at
from tilelang_lsp.protocol import ApiEntry


async def entry_at(
    catalog: ApiCatalog, text: str, position: types.Position
) -> tuple[str, Resolved, bool] | None:
    """``(dotted name as written, what it names, whether the word is an attribute)`` at the cursor;
    waits for the index while it is being read (only for names the file imports from TileLang)."""
    lines = text.splitlines()
    if position.line >= len(lines):
        return None
    found = name_at(lines[position.line], position.character)
    if found is None:
        return None
    parts, attribute = found
    path = expand(import_aliases(text), parts)
    resolved = await catalog.lookup(path) if path is not None else None
    if resolved is None:
        return None
    return ".".join(parts), resolved, attribute


def entry_markdown(written: str, resolved: Resolved, catalog: ApiCatalog) -> str:
    """Hover and completion text: the signature as code, then the docstring's first lines."""
    if isinstance(resolved, str):
        return f"```python\nmodule {resolved}\n```\n\n{len(catalog.members(resolved))} public names"
    return f"```python\n{declaration(written, resolved)}\n```" + (
        f"\n\n{resolved.doc}" if resolved.doc else ""
    )


def declaration(written: str, entry: ApiEntry) -> str:
    """``def T.gemm(A, B, C, ...) -> ...`` (``class``, ``module``), or the bare name of a value."""
    if entry.kind == "module":
        return f"module {entry.module or written}"
    keyword = {"class": "class ", "function": "def "}.get(entry.kind, "")
    return f"{keyword}{written}{entry.signature or ''}"


async def api_hover(
    catalog: ApiCatalog, text: str, position: types.Position, *, attribute_only: bool
) -> types.Hover | None:
    """The API docs of the name under the cursor; with ``attribute_only`` only for ``T.gemm``'s
    ``gemm`` (an attribute is never a buffer of the kernel, so no compiled fact could answer)."""
    found = await entry_at(catalog, text, position)
    if found is None or (attribute_only and not found[2]):
        return None
    written, resolved, _ = found
    return types.Hover(
        contents=types.MarkupContent(
            kind=types.MarkupKind.Markdown, value=entry_markdown(written, resolved, catalog)
        )
    )
