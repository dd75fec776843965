"""LSP diagnostics from the worker's compiler diagnostics, for the document's current version."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from lsprotocol import types

if TYPE_CHECKING:
    from tilelang_lsp.server import DocumentState, TileLangLanguageServer

SOURCE = "tilelang"
_SEVERITY = {
    "error": types.DiagnosticSeverity.Error,
    "warning": types.DiagnosticSeverity.Warning,
    "info": types.DiagnosticSeverity.Information,
}


def line_range(text: str, line: int | None) -> types.Range:
    """The source line (1-based) from its first non-blank character to its end."""
    lines = text.splitlines()
    index = min(max((line or 1) - 1, 0), max(len(lines) - 1, 0))
    content = lines[index] if lines else ""
    start = len(content) - len(content.lstrip())
    return types.Range(
        start=types.Position(line=index, character=start),
        end=types.Position(line=index, character=len(content.rstrip())),
    )


def to_lsp(doc: DocumentState, diag: dict[str, Any]) -> types.Diagnostic:
    message = str(diag["message"])
    if not diag.get("located", True):
        message += "\n(the compiler gave no line in this file; shown at the kernel)"
    return types.Diagnostic(
        range=line_range(doc.text, diag.get("line")),
        message=message,
        severity=_SEVERITY.get(str(diag.get("severity")), types.DiagnosticSeverity.Error),
        code=diag.get("code"),
        source=SOURCE,
    )


def document_diagnostics(server: TileLangLanguageServer, doc: DocumentState) -> list[types.Diagnostic]:
    """Layout-stage diagnostics, errors the full lowering found later, and why analysis stopped."""
    found: list[types.Diagnostic] = []
    if not doc.uses_tilelang:
        return found
    if doc.failure is not None:
        if doc.failure != "workspace not trusted":
            found.append(
                types.Diagnostic(
                    range=line_range(doc.text, doc.failure_line),
                    message=f"TileLang {doc.failure}; hints show what the source alone says",
                    severity=types.DiagnosticSeverity.Warning,
                    code="analysis",
                    source=SOURCE,
                )
            )
        return found
    if doc.analysis is not None and doc.current(doc.analysis_version):
        found.extend(to_lsp(doc, d) for d in doc.analysis.get("diagnostics", []) if _here(server, doc, d))
    if doc.summary is not None and doc.current(doc.summary_version):
        for diag in doc.summary.get("diagnostics", []):
            if diag.get("severity") == "error" and _here(server, doc, diag):
                lsp = to_lsp(doc, diag)
                if all(lsp.range.start.line != f.range.start.line for f in found):
                    found.append(lsp)
    return found


def _here(server: TileLangLanguageServer, doc: DocumentState, diag: dict[str, Any]) -> bool:
    return diag.get("file") is None or server.file_matches(doc, diag.get("file"))
