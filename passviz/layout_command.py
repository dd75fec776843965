"""``passviz layout``: one buffer's inferred layout as a text grid, or as SVG with ``-o``."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from irtrace.base.errors import ExitCode, NotInTraceError, UsageError
from irtrace.base.safe_text import terminal_safe
from irtrace.edge.layout_pictures import grid_size, layout_grid, layout_svg, parse_span
from irtrace.trace.model import KernelRun
from irtrace.trace.schema import BufferLayout


def find_layout(runs: Sequence[KernelRun], buffer: str) -> tuple[KernelRun, BufferLayout]:
    """The one run selected and its buffer's layout after the layout pass (its first record)."""
    if len(runs) != 1:
        names = ", ".join(sorted({f"{run.kernel} on {run.target}" for run in runs})[:8])
        raise UsageError(f"{len(runs)} runs match; choose one with -k KERNEL -t TARGET ({names})")
    run = runs[0]
    if not run.layouts:
        raise NotInTraceError(
            f"{terminal_safe(run.kernel, newlines=False)} on {run.target} has no layout records "
            "(recorded before traces held layouts, or failed before layout inference)"
        )
    layouts = run.layouts[0].layouts
    for layout in layouts:
        if layout.buffer == buffer:
            return run, layout
    held = ", ".join(terminal_safe(layout.buffer, newlines=False) for layout in layouts[:20])
    raise NotInTraceError(
        f"no buffer {terminal_safe(buffer, newlines=False)!r} in this run's layouts ({held})"
    )


def draw_layout(runs: Sequence[KernelRun], args: argparse.Namespace) -> int:
    """Print the grid, or write the SVG to ``args.output``."""
    from irtrace.edge.command import echo

    _, layout = find_layout(runs, args.buffer)
    total_rows, total_cols = grid_size(layout)
    if args.output:
        from irtrace.base.output import write_atomically

        grid = layout_grid(
            layout, parse_span(args.rows, total_rows, "rows"), parse_span(args.cols, total_cols, "cols")
        )
        path = write_atomically(args.output, layout_svg(grid))
        echo(f"layout of {layout.buffer} written to {path}", one_line=True)
        return int(ExitCode.OK)
    from irtrace.edge.console import safe_console
    from passviz.layout_text import layout_text

    console = safe_console()
    width = args.width or (console.width if console.is_terminal else 80)
    rows = parse_span(args.rows, total_rows, "rows") if args.rows else None
    cols = parse_span(args.cols, total_cols, "cols") if args.cols else None
    console.print(layout_text(layout, width=width, rows=rows, cols=cols), width=width, soft_wrap=False)
    return int(ExitCode.OK)
