"""``textDocument/codeAction``: fixes for the compiler's diagnostics where the fix is clear.

``buffer-init`` (a buffer read before anything writes it, TileLang's ``VerifyBufferInit``): insert
``T.clear(buf)`` before the first statement that uses the buffer, in the block that allocates it,
at that statement's indentation. So a fragment first read in a pipelined loop is cleared once
before the loop, not on every iteration. The edit is computed from the text with ``ast``.
"""

from __future__ import annotations

import ast
import re
from typing import TYPE_CHECKING

from lsprotocol import types

from tilelang_lsp.diagnostics import SOURCE

if TYPE_CHECKING:
    from tilelang_lsp.server import TileLangLanguageServer

METHOD = types.TEXT_DOCUMENT_CODE_ACTION
OPTIONS = types.CodeActionOptions(code_action_kinds=[types.CodeActionKind.QuickFix])

_READ_BEFORE_WRITE = re.compile(r"`(?P<buffer>[A-Za-z_]\w*)` is read before anything writes it")


def handle(server: TileLangLanguageServer, params: types.CodeActionParams) -> list[types.CodeAction] | None:
    """A quick fix for each ``buffer-init`` diagnostic of ours in the request's context."""
    doc = server.documents.get(params.text_document.uri)
    if doc is None:
        return None
    actions = []
    for diagnostic in params.context.diagnostics:
        if diagnostic.source != SOURCE or diagnostic.code != "buffer-init":
            continue
        found = _READ_BEFORE_WRITE.search(diagnostic.message)
        if found is None:
            continue
        buffer = found.group("buffer")
        edit = clear_before_first_use(doc.text, buffer, diagnostic.range.start.line + 1)
        if edit is None:
            continue
        actions.append(
            types.CodeAction(
                title=f"Clear `{buffer}` before its first use ({edit.new_text.strip()})",
                kind=types.CodeActionKind.QuickFix,
                diagnostics=[diagnostic],
                is_preferred=True,
                edit=types.WorkspaceEdit(changes={doc.uri: [edit]}),
            )
        )
    return actions


def clear_before_first_use(text: str, buffer: str, line: int) -> types.TextEdit | None:
    """The edit inserting ``T.clear(buffer)`` for the allocation of ``buffer`` nearest above the
    1-based ``line`` (the diagnostic's), or ``None`` when the text does not show one."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return None
    best: tuple[int, list[ast.stmt], int, str] | None = None
    for body in _bodies(tree):
        for index, statement in enumerate(body):
            alias = _allocation(statement, buffer)
            if (
                alias is not None
                and statement.lineno <= line
                and (best is None or statement.lineno > best[0])
            ):
                best = (statement.lineno, body, index, alias)
    if best is None:
        return None
    _, body, index, alias = best
    for statement in body[index + 1 :]:
        if any(isinstance(node, ast.Name) and node.id == buffer for node in ast.walk(statement)):
            lines = text.splitlines()
            source_line = lines[statement.lineno - 1]
            indent = source_line[: len(source_line) - len(source_line.lstrip())]
            start = types.Position(line=statement.lineno - 1, character=0)
            return types.TextEdit(
                range=types.Range(start=start, end=start), new_text=f"{indent}{alias}.clear({buffer})\n"
            )
    return None


def _bodies(tree: ast.AST) -> list[list[ast.stmt]]:
    """Every statement list of the module (function and ``with`` bodies, loop bodies, ...)."""
    found = []
    for node in ast.walk(tree):
        for field in ("body", "orelse", "finalbody"):
            value = getattr(node, field, None)
            if isinstance(value, list) and value and isinstance(value[0], ast.stmt):
                found.append(value)
    return found


def _allocation(statement: ast.stmt, buffer: str) -> str | None:
    """The module alias (``T``) when ``statement`` is ``buffer = T.alloc_…(...)``."""
    if not isinstance(statement, ast.Assign | ast.AnnAssign):
        return None
    targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
    if not any(isinstance(t, ast.Name) and t.id == buffer for t in targets):
        return None
    call = statement.value
    if (
        isinstance(call, ast.Call)
        and isinstance(call.func, ast.Attribute)
        and call.func.attr.startswith("alloc_")
        and isinstance(call.func.value, ast.Name)
    ):
        return call.func.value.id
    return None
