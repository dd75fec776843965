"""A layout as a coloured text grid for the terminal: ``passviz layout`` and the browser's layouts view.

Each cell is a fragment element's thread (or a shared-memory element's bank) on that thread's (or
bank's) colour; the grid is cropped to fit the width, and the legend says what is shown.
"""

from __future__ import annotations

from rich.console import Group
from rich.style import Style
from rich.text import Text

from irtrace.edge.layout_pictures import (
    LayoutGrid,
    bank_colour,
    describe,
    grid_size,
    layout_grid,
    thread_colour,
)
from irtrace.trace.schema import BufferLayout

ROW_LABEL = 5
"""Columns taken by the row numbers."""
DEFAULT_ROWS = 16


def text_crop(
    layout: BufferLayout, width: int, rows: range | None, cols: range | None
) -> tuple[range, range]:
    """The crop shown at ``width`` columns: what was asked, else the top-left corner that fits."""
    total_rows, total_cols = grid_size(layout)
    cell = _cell_width(layout)
    fit = max(1, (width - ROW_LABEL - 8) // cell)
    row_range = rows if rows is not None else range(min(total_rows, DEFAULT_ROWS))
    if cols is None:
        cols = range(min(total_cols, fit))
    elif len(cols) > fit:
        cols = range(cols.start, cols.start + fit)
    return row_range, cols


def _cell_width(layout: BufferLayout) -> int:
    if layout.kind != "fragment":
        return 3  # "31 "
    threads = layout.threads if isinstance(layout.threads, int) and layout.threads > 0 else 1000
    replicated = isinstance(layout.replicate, int) and layout.replicate > 1
    return len(str(threads - 1)) + 1 + (1 if replicated else 0)


def layout_text(
    layout: BufferLayout, *, width: int = 80, rows: range | None = None, cols: range | None = None
) -> Group:
    """The grid, its title and its legend, fitting ``width`` columns."""
    row_range, col_range = text_crop(layout, width, rows, cols)
    grid = layout_grid(layout, row_range, col_range)
    return grid_text(grid, width=width)


def grid_text(grid: LayoutGrid, *, width: int = 80) -> Group:
    """A computed grid as rich renderables (every trace text passes through ``describe``)."""
    cell = _cell_width(grid.layout)
    n_cols = len(grid.col_range)
    lines: list[Text] = [Text(line, style="bold" if i == 0 else "") for i, line in enumerate(describe(grid))]
    header = Text(" " * ROW_LABEL)
    for col in grid.col_range:
        header.append(f"{col:>{cell - 1}} "[-cell:] if col % 4 == 0 else " " * cell, style="dim")
    lines.append(header)
    for index, row in enumerate(grid.row_range):
        line = Text(f"{row:>{ROW_LABEL - 1}} ", style="dim")
        for cell_data in grid.cells[index * n_cols : (index + 1) * n_cols]:
            if grid.is_fragment:
                thread = cell_data.threads[0] if cell_data.threads else 0
                mark = "*" if grid.replicas > 1 else ""
                label = f"{thread}{mark}"
                colour = thread_colour(thread)
            else:
                label = str(cell_data.bank)
                colour = bank_colour(cell_data.bank or 0)
            line.append(f"{label:>{cell - 1}} ", style=Style(color="black", bgcolor=colour))
        ways = grid.conflicts.get(row)
        if ways:
            line.append(f" {ways}-way", style="bold red")
        lines.append(line)
    lines.append(_legend(grid))
    titles = len(lines) - len(grid.row_range) - 2
    return Group(*lines[:titles], *[_fit(line, width) for line in lines[titles:-1]], lines[-1])


def _fit(line: Text, width: int) -> Text:
    """A grid row never wraps (a wrapped row would read as two); titles and legend may."""
    line.no_wrap = True
    line.truncate(width, overflow="ellipsis")
    return line


def _legend(grid: LayoutGrid) -> Text:
    if grid.is_fragment:
        text = Text("numbers: the thread holding the element")
        if grid.replicas > 1:
            text.append(f"; * replicated: {grid.replicas} threads hold it (first shown)")
        text.append("; colour per thread")
    else:
        text = Text("numbers: the element's bank; colour per bank")
        if grid.conflicts:
            text.append("; N-way: 8 rows reading a 16-byte column conflict", style="red")
    if grid.cropped:
        text.append("; --rows/--cols A:B to move")
    return text
