"""The ``source_line_ir`` tool: what a line of a kernel's Python file became after each pass, from
a lowering recorded with source maps (docs/source-maps.md), as ``irtrace ir TRACE --line N --json``
gives it. In a module of its own, registered by ``TileLangMcp``; it reuses the server's checks
(roots, literal specs, targets) and its answer helpers.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

from mcp.server.fastmcp.exceptions import ToolError
from mcp.types import CallToolResult
from pydantic import Field

from irtrace.core.errors import NotInTraceError
from tilelang_mcp import backend
from tilelang_mcp.server import (
    MAX_PASS_ROWS,
    Kernel,
    OptionalSpec,
    Target,
    Timeout,
    TraceRef,
    result,
    tool_errors,
)

if TYPE_CHECKING:
    from tilelang_mcp.server import TileLangMcp

Line = Annotated[
    int, Field(description="Line of the kernel's Python file (1-based), e.g. a T.gemm call's.", ge=1)
]
PassName = Annotated[
    str | None,
    Field(description="Only after this pass (NAME or NAME#N), e.g. tl.LowerTileOp; default every pass."),
]
MAX_FILE_BYTES = 16 * 2**20
"""A kernel file longer than this is not read here to check the line (the job still refuses it)."""


def source_line_ir_tool(app: TileLangMcp) -> Callable[..., Awaitable[CallToolResult]]:
    """The tool, bound to the server's state."""

    @tool_errors
    async def source_line_ir(
        line: Line,
        spec: OptionalSpec = None,
        trace: TraceRef = None,
        target: Target = None,
        kernel: Kernel = None,
        pass_name: PassName = None,
        timeout_s: Timeout = None,
    ) -> CallToolResult:
        """What a line of the kernel's Python file (a T.gemm, T.copy, T.reduce_* call) became after
        each pass: the IR lines that print statements carrying that line's span, pass by pass
        (consecutive passes printing the same lines taken together), from a lowering recorded with
        source maps. Give `spec` to lower it so, or a `trace` recorded with them."""
        if (trace is None) == (spec is None):
            raise ToolError(
                "give either `trace` (a trace recorded with source maps) or `spec` (a kernel to lower)"
            )
        if spec is not None:
            _check_line(app.config.roots.check(backend.parse_kernel_spec(spec).path, "kernel file"), line)
            trace_id, loaded, _ = await app.record(
                spec, [target] if target else [], None, timeout_s, source_map=True
            )
        else:
            assert trace is not None
            trace_id, loaded = await app.load(trace)
        run = app.run_of(loaded, kernel, target)
        try:
            document = backend.source_line_document(loaded, run, line, pass_name)
        except NotInTraceError as error:
            if run.source_maps:
                raise
            raise ToolError(
                f"trace {trace_id} has no source maps: give `spec` to lower the kernel with them "
                "(or a trace from `irtrace record --source-map`)"
            ) from error
        groups = document["passes"]
        data: dict[str, Any] = {"trace": trace_id, **document, "passes": groups[:MAX_PASS_ROWS]}
        if len(groups) > MAX_PASS_ROWS:
            data["note"] = f"showing the first {MAX_PASS_ROWS} of {len(groups)}; pass pass_name for one"
        where = f"line {line} of {run.kernel} on {run.target}"
        if not groups:
            after = f" after {pass_name}" if pass_name else " after any pass"
            summary = f"{where}: no statement carrying this line is in the IR{after} (trace {trace_id})"
        else:
            first = groups[0]["first"]
            summary = f"{where}: {len(groups)} group(s) of passes, the first after {first} (trace {trace_id})"
        return result(summary, data)

    return source_line_ir


def _check_line(file: Path, line: int) -> None:
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
