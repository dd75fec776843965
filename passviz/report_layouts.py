"""The report's layouts: per run a table of its buffers' inferred layouts, and each distinct
layout drawn once (a corner of it, so the page stays small however many runs share it)."""

from __future__ import annotations

import html
from collections.abc import Callable, Sequence

from irtrace.edge.layout_pictures import LayoutDrawingError, grid_size, layout_grid, layout_svg
from irtrace.trace.model import KernelRun
from irtrace.trace.schema import BufferLayout

REPORT_ROWS, REPORT_COLS = 8, 16
"""The corner drawn per layout in the report: 8 rows show a warp's pattern in the MMA layouts
(and an 8-row bank group); ``passviz layout -o`` draws the whole buffer."""


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def _identity(layout: BufferLayout) -> tuple[object, ...]:
    """What makes two buffers' pictures the same picture (the name is not drawn in the cells)."""
    return (
        layout.kind,
        layout.dtype,
        tuple(layout.input_shape),
        tuple(layout.output_shape),
        tuple(layout.forward_vars),
        tuple(layout.forward_index),
        layout.forward_thread,
        layout.replicate,
        layout.threads,
        layout.thread_offset,
        layout.swizzle,
    )


def layout_sections(
    runs: Sequence[KernelRun], lazy: Callable[[str], str] = str
) -> tuple[dict[tuple[int, str], str], str]:
    """(``(run, buffer) -> anchor`` of its drawing, the drawings section's HTML); ``lazy`` wraps
    each drawing (the report keeps them compressed until seen)."""
    anchors: dict[tuple[object, ...], str] = {}
    links: dict[tuple[int, str], str] = {}
    drawings: list[str] = []
    for run in runs:
        if not run.layouts:
            continue
        for layout in run.layouts[0].layouts:
            key = _identity(layout)
            if key not in anchors:
                anchor = f"layout{len(anchors)}"
                anchors[key] = anchor
                drawings.append(_drawing(anchor, run, layout, lazy))
            links[(run.run_id, layout.buffer)] = anchors[key]
    if not drawings:
        return links, ""
    section = (
        '<h2 id="layouts">Layouts</h2><p>Each distinct inferred layout drawn once, its first '
        f"{REPORT_ROWS} rows and {REPORT_COLS} columns "
        "(<code>passviz layout TRACE -k K -t T BUFFER -o FILE.svg</code> "
        "draws it whole). Fragments: colour and T = the thread holding the element, L = its local "
        "index, hatched = replicated. Shared memory: colour and B = the bank.</p>" + "".join(drawings)
    )
    return links, section


def _drawing(anchor: str, run: KernelRun, layout: BufferLayout, lazy: Callable[[str], str]) -> str:
    caption = f"{_e(layout.buffer)} in {_e(run.kernel)} @ {_e(run.target)}"
    try:
        rows, cols = grid_size(layout)
        grid = layout_grid(layout, range(min(rows, REPORT_ROWS)), range(min(cols, REPORT_COLS)))
        body = layout_svg(grid, labelled=True, ids=f"{anchor}-")
    except LayoutDrawingError as error:
        body = f"<p class='failed'>not drawn: {_e(error.message)}</p>"
    start = body.find("<svg")
    body = body[start:].replace(' xmlns="http://www.w3.org/2000/svg"', "", 1) if start >= 0 else body
    return f"<h3 id='{anchor}'>{caption}</h3>" + lazy(f"<div class='drawing'>{body}</div>")


def run_layouts_table(run: KernelRun, links: dict[tuple[int, str], str]) -> str:
    """The run's buffers and their layouts, each linked to its drawing."""
    if not run.layouts:
        return ""
    rows = "".join(
        f"<tr><td><a href='#{links[(run.run_id, layout.buffer)]}'>{_e(layout.buffer)}</a></td>"
        f"<td>{_e(layout.scope)}</td><td>{_e(layout.dtype)}</td><td>{_e(list(layout.shape))}</td>"
        f"<td>{_e(layout.kind)}</td><td>{_e(layout.summary)}</td></tr>"
        for layout in run.layouts[0].layouts
        if (run.run_id, layout.buffer) in links
    )
    return (
        "<details><summary>layouts after layout inference</summary>"
        "<div class='scroll'><table><tr><th>buffer</th>"
        "<th>scope</th><th>dtype</th><th>shape</th><th>kind</th><th>layout</th></tr>"
        + rows
        + "</table></div></details>"
    )
