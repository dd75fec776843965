"""What ``source_line_ir`` answers: what a line of a kernel's Python file became after each pass,
from a lowering recorded with source maps (docs/source-maps.md), as ``irtrace ir TRACE --line N
--json`` gives it. The tool itself is ``tilelang_mcp.tools.source_line_ir``, which checks the
spec's file against the roots and records or loads the trace as the other tools do.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from irtrace.core.errors import NotInTraceError
from tilelang_mcp import backend
from tilelang_mcp.session import ToolError

MAX_GROUPS = 400
"""Groups of passes one answer lists; past it the list is cut, with a note."""
MAX_FILE_BYTES = 16 * 2**20
"""A kernel file longer than this is not read here to check the line (the trace's copy is checked)."""


def check_line(file: Path, line: int) -> None:
    """Refuse a line past the end of the kernel's file before lowering anything."""
    try:
        if file.stat().st_size > MAX_FILE_BYTES:
            return
        text = file.read_bytes()
    except OSError:
        return  # the job says why the file cannot be read
    count = text.count(b"\n") + (0 if text.endswith(b"\n") else 1)
    if line > count:
        raise ToolError(f"line {line} is past the end of {file.name} ({count} lines)")


def line_answer(
    trace_id: str, trace: backend.Trace, run: backend.KernelRun, line: int, pass_name: str | None
) -> tuple[str, dict[str, Any]]:
    """The tool's summary and structured answer: the ``irtrace-line/1`` document and the trace id."""
    try:
        document = backend.source_line_document(trace, run, line, pass_name)
    except NotInTraceError as error:
        if run.source_maps:
            raise
        raise ToolError(
            f"trace {trace_id} has no source maps: give `spec` to lower the kernel with them "
            "(or a trace from `irtrace record --source-map`)"
        ) from error
    groups = document["passes"]
    data: dict[str, Any] = {"trace": trace_id, **document, "passes": groups[:MAX_GROUPS]}
    if len(groups) > MAX_GROUPS:
        data["note"] = f"showing the first {MAX_GROUPS} of {len(groups)} groups; give pass_name for one pass"
    where = f"line {line} of {run.kernel} on {run.target}"
    if not groups:
        after = f" after {pass_name}" if pass_name else " after any pass"
        return f"{where}: no statement carrying this line is in the IR{after} (trace {trace_id})", data
    first = groups[0]["first"]
    return f"{where}: {len(groups)} group(s) of passes, the first after {first} (trace {trace_id})", data
