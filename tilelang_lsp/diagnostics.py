"""LSP diagnostics from the worker's compiler diagnostics, for the document's current version."""

from __future__ import annotations

from lsprotocol import types

from tilelang_lsp.document import UNTRUSTED, Document
from tilelang_lsp.protocol import Diagnostic

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


def to_lsp(doc: Document, diag: Diagnostic) -> types.Diagnostic:
    message = diag.message
    if not diag.located:
        message += "\n(the compiler gave no line in this file; shown at the kernel)"
    return types.Diagnostic(
        range=line_range(doc.text, diag.line),
        message=message,
        severity=_SEVERITY.get(diag.severity, types.DiagnosticSeverity.Error),
        code=diag.code,
        source=SOURCE,
    )


def document_diagnostics(doc: Document) -> list[types.Diagnostic]:
    """Layout-stage diagnostics, errors the full lowering found later, and why analysis stopped."""
    found: list[types.Diagnostic] = []
    if not doc.uses_tilelang:
        return found
    if doc.failure is not None:
        if doc.failure.message != UNTRUSTED:
            found.append(
                types.Diagnostic(
                    range=line_range(doc.text, doc.failure.line),
                    message=f"TileLang {doc.failure.message}; hints show what the source alone says",
                    severity=types.DiagnosticSeverity.Warning,
                    code="analysis",
                    source=SOURCE,
                )
            )
        return found
    if doc.analysis is not None and doc.current(doc.analysis_version):
        found.extend(to_lsp(doc, d) for d in doc.analysis.diagnostics if _here(doc, d))
    if doc.summary is not None and doc.current(doc.summary_version):
        for diag in doc.summary.diagnostics:
            if diag.severity == "error" and _here(doc, diag):
                lsp = to_lsp(doc, diag)
                if all(lsp.range.start.line != f.range.start.line for f in found):
                    found.append(lsp)
    return found


def _here(doc: Document, diag: Diagnostic) -> bool:
    return diag.file is None or doc.is_file(diag.file)
