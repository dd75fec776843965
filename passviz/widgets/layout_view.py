"""The layouts pane (key ``l``): the run's buffers with their inferred layouts, and the selected
buffer's grid (thread per fragment element, bank per shared-memory element) from
``passviz.layout_text``, in a pane that scrolls both ways.

The grid shows the top-left ``GRID_SPAN`` rows and columns; ``w`` writes the whole layout as SVG.
"""

from __future__ import annotations

import io
import re
from pathlib import Path

from rich.console import Console, RenderableType
from rich.measure import Measurement
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import ScrollableContainer, Vertical
from textual.widgets import DataTable, Static

from irtrace.base.errors import IrtraceError
from irtrace.base.safe_text import terminal_safe
from irtrace.edge.layout_pictures import MAX_CELLS, grid_size, layout_grid, layout_svg
from irtrace.trace.model import KernelRun, Trace
from irtrace.trace.schema import BufferLayout, LayoutRecord
from passviz.layout_text import ROW_LABEL, grid_text

GRID_SPAN = 64
"""Rows and columns drawn in the terminal; the pane scrolls over them."""

_MEASURE = Console(width=100_000, file=io.StringIO())


def layouts_at(run: KernelRun, pass_index: int | None) -> LayoutRecord | None:
    """The layouts as they stand after the selected pass: the last record at or before it, else
    (a pass before layout inference) the first."""
    if not run.layouts:
        return None
    earlier = [r for r in run.layouts if pass_index is not None and r.after <= pass_index]
    return earlier[-1] if earlier else run.layouts[0]


def _cell(text: object) -> Text:
    return Text(terminal_safe(str(text), newlines=False))


def svg_path(trace: Trace, run: KernelRun, layout: BufferLayout) -> Path:
    """Beside the trace: ``<trace>.<kernel>.<target>.<buffer>.svg``, names reduced to safe characters
    (they come from the trace, which is data)."""
    folder = Path(trace.path).parent if trace.path else Path.cwd()
    stem = Path(trace.path).stem if trace.path else "trace"
    parts = [stem, run.kernel, run.target, layout.buffer]
    name = ".".join(re.sub(r"[^A-Za-z0-9_-]+", "_", part)[:60] or "_" for part in parts)
    return folder / f"{name}.svg"


def write_svg(trace: Trace, run: KernelRun, layout: BufferLayout) -> tuple[Path, str]:
    """The whole layout as SVG beside the trace (at most ``MAX_CELLS`` cells: the top rows of a
    larger one); the path and what was drawn."""
    from irtrace.base.output import write_atomically

    rows, cols = grid_size(layout)
    shown_rows = min(rows, max(1, MAX_CELLS // max(cols, 1)))
    shown_cols = min(cols, MAX_CELLS)
    grid = layout_grid(layout, range(shown_rows), range(shown_cols))
    path = write_atomically(svg_path(trace, run, layout), layout_svg(grid))
    drawn = f"{rows} x {cols}"
    if grid.cropped:
        drawn = f"the top-left {shown_rows} x {shown_cols} of {drawn}"
    return Path(path), drawn


class LayoutView(Vertical):
    """Buffers on top (a table: arrows pick one), the picked buffer's grid below."""

    DEFAULT_CSS = """
    LayoutView { height: 1fr; background: $surface; }
    LayoutView #layout-note { padding: 0 1; color: $text-muted; height: auto; }
    LayoutView #layout-buffers { height: auto; max-height: 7; }
    LayoutView #layout-scroll { height: 1fr; border-top: solid $primary-darken-2; }
    LayoutView #layout-grid { padding: 0 1; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.record: LayoutRecord | None = None
        self._grid_of: BufferLayout | None = None

    def compose(self) -> ComposeResult:
        yield Static(id="layout-note")
        table: DataTable[Text] = DataTable(id="layout-buffers", cursor_type="row", zebra_stripes=True)
        table.add_columns("buffer", "scope", "shape", "layout")
        yield table
        with ScrollableContainer(id="layout-scroll"):
            yield Static(id="layout-grid")

    @property
    def table(self) -> DataTable[Text]:
        return self.query_one("#layout-buffers", DataTable)

    @property
    def selected(self) -> BufferLayout | None:
        """The buffer under the table's cursor."""
        if self.record is None or not self.record.layouts:
            return None
        row = min(max(self.table.cursor_row, 0), len(self.record.layouts) - 1)
        return self.record.layouts[row]

    def show_run(self, run: KernelRun, pass_index: int | None, pass_names: dict[int, str]) -> None:
        """The run's layouts after ``pass_index``, keeping the buffer picked if the new run has it."""
        record = layouts_at(run, pass_index)
        note = self.query_one("#layout-note", Static)
        if record is self.record and record is not None:
            return
        wanted = self.selected.buffer if self.selected is not None else None
        self.record = record
        table = self.table
        table.clear()
        table.display = record is not None
        if record is None:
            note.update(  # Text: trace text is not Rich markup
                Text(
                    f"{terminal_safe(run.kernel, newlines=False)} on {terminal_safe(run.target)} has no "
                    "layout records (recorded before traces held layouts, or failed before layout inference)"
                )
            )
            self._show_grid(None)
            return
        count = len(record.layouts)
        after = terminal_safe(pass_names.get(record.after, f"pass {record.after}"), newlines=False)
        note.update(
            Text(
                f"{count} buffer{'' if count == 1 else 's'} after #{record.after} {after}"
                " · ↑↓ pick · w: SVG beside the trace · f: the lists"
            )
        )
        for layout in record.layouts:
            shape = "[" + ", ".join(str(d) for d in layout.shape) + "]"
            table.add_row(_cell(layout.buffer), _cell(layout.scope), _cell(shape), _cell(layout.summary))
        names = [layout.buffer for layout in record.layouts]
        table.move_cursor(row=names.index(wanted) if wanted in names else 0)
        self._show_grid(self.selected)

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        event.stop()
        self._show_grid(self.selected)

    def _show_grid(self, layout: BufferLayout | None) -> None:
        if layout is not None and layout is self._grid_of:
            return
        self._grid_of = layout
        grid_pane = self.query_one("#layout-grid", Static)
        shown = grid_renderable(layout) if layout is not None else Text()
        # as wide as its longest line: a row never wraps, the pane scrolls sideways instead
        measured = Measurement.get(_MEASURE, _MEASURE.options, shown).maximum
        grid_pane.styles.width = measured + 2
        grid_pane.update(shown)
        self.query_one("#layout-scroll", ScrollableContainer).scroll_home(animate=False)


def grid_renderable(layout: BufferLayout) -> RenderableType:
    """The top-left ``GRID_SPAN`` square of the grid, wide enough never to crop a row."""
    try:
        rows, cols = grid_size(layout)
        grid = layout_grid(layout, range(min(rows, GRID_SPAN)), range(min(cols, GRID_SPAN)))
    except IrtraceError as error:
        return Text(f"nothing to draw: {error}", style="yellow")
    width = ROW_LABEL + 8 + len(grid.col_range) * 5
    return grid_text(grid, width=width)
