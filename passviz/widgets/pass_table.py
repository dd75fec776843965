"""The list of a run's passes: nesting, phase, scope, a time bar and +/- lines."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import ClassVar

from rich.text import Text
from textual.binding import Binding, BindingType
from textual.widgets import DataTable
from textual.widgets.data_table import ColumnKey

from irtrace.trace.model import PassRecord
from irtrace.trace.summary import NEW_STAGE, is_new_stage
from passviz.model import PassEntry, format_ms, time_bar
from passviz.widgets.messages import PassChosen

BAR_WIDTH = 8
SCOPES = {"module": "", "host": "host", "device": "dev"}
"""Short scope names; before the host/device split the cell stays empty."""


class PassTable(DataTable[Text | str]):
    """One row per pass; moving the cursor posts ``PassChosen``."""

    DEFAULT_CSS = """
    PassTable { height: 1fr; }
    """
    # DataTable's Home/End scroll sideways; in a list of passes they go to the first and last pass.
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("home", "first_pass", "first pass", show=False),
        Binding("end", "last_pass", "last pass", show=False),
    ]

    def __init__(self, *, show_times: bool = True, id: str | None = None) -> None:
        super().__init__(cursor_type="row", zebra_stripes=False, id=id)
        self.show_times = show_times
        self._entries: list[PassEntry] = []
        self._quiet = False

    def on_resize(self) -> None:
        """In a narrow list, cut the pass column so ``+/-`` and the time stay in view (the pass
        header names the selected pass in full); the share bar, scope and phase may go off-screen."""
        if ColumnKey("pass") not in self.columns:
            return
        kept = [ColumnKey(key) for key in ("mark", "lines", "time") if ColumnKey(key) in self.columns]
        others = sum(self.columns[key].get_render_width(self) for key in kept)
        room = max(8, self.scrollable_content_region.width - others - 2 * self.cell_padding)
        column = self.columns[ColumnKey("pass")]
        widest = max((len("  " * e.record.depth + e.label) for e in self._entries), default=4)
        column.auto_width = widest <= room
        column.width = room
        self._clear_caches()
        self._require_update_dimensions = True
        self.refresh()

    def on_mount(self) -> None:
        # Most telling first: a narrow list still shows the pass, what it changed and its time.
        # The pass column is sized in on_resize; the others fit their content.
        self.add_column(" ", key="mark", width=1)
        self.add_column("pass", key="pass")
        self.add_column("+/-", key="lines")
        if self.show_times:
            self.add_column("time", key="time")
            self.add_column("share", key="share")
        self.add_column("scope", key="scope")
        self.add_column("phase", key="phase")

    @property
    def entries(self) -> list[PassEntry]:
        return self._entries

    @property
    def selected_index(self) -> int | None:
        """``PassRecord.index`` under the cursor."""
        if not self._entries or self.cursor_row < 0 or self.cursor_row >= len(self._entries):
            return None
        return self._entries[self.cursor_row].index

    def show_entries(
        self,
        entries: Sequence[PassEntry],
        counts: Mapping[int, tuple[int, int] | None] | None,
        select: int | None,
    ) -> None:
        """Fill the table; ``counts`` may be ``None`` while they are computed; cursor onto ``select``."""
        self._quiet = True
        try:
            self.clear()
            self._entries = list(entries)
            for entry in self._entries:
                record = entry.record
                cells: list[Text | str] = [
                    _mark(entry),
                    Text("  " * record.depth + entry.label, style="bold red" if record.failed else ""),
                    _lines_cell(record, counts.get(record.index) if counts else None),
                ]
                if self.show_times:
                    cells += [Text(f"{format_ms(record.self_s):>7}"), Text(time_bar(entry.share, BAR_WIDTH))]
                cells += [SCOPES.get(record.scope, record.scope), record.phase]
                self.add_row(*cells, key=str(record.index))
        finally:
            self._quiet = False
        self.on_resize()
        self.move_to(select)

    def move_to(self, index: int | None) -> None:
        """Put the cursor on the pass with this index (the first row if it is not listed).

        The cursor moves at once, so a key pressed right after sees the new pass; the panes
        follow when ``PassChosen`` is handled.
        """
        row = next((i for i, e in enumerate(self._entries) if e.index == index), 0)
        if self._entries:
            self.move_cursor(row=row, animate=False, scroll=True)
            self.post_message(PassChosen(self._entries[row].index))

    def action_first_pass(self) -> None:
        if self._entries:
            self.move_to(self._entries[0].index)

    def action_last_pass(self) -> None:
        if self._entries:
            self.move_to(self._entries[-1].index)

    def update_counts(self, counts: Mapping[int, tuple[int, int] | None]) -> None:
        for entry in self._entries:
            self.update_cell(str(entry.index), "lines", _lines_cell(entry.record, counts.get(entry.index)))

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        event.stop()
        if self._quiet or event.row_key.value is None:
            return
        self.post_message(PassChosen(int(event.row_key.value)))


def _mark(entry: PassEntry) -> Text:
    if entry.record.failed:
        return Text("✗", style="bold red")
    return Text("●", style="green") if entry.record.changed else Text("·", style="dim")


def _lines_cell(record: PassRecord, counts: tuple[int, int] | None) -> Text:
    if is_new_stage(record) and not record.failed:
        # "new stage" in short: the column stays as narrow as the counts (the header says it whole)
        return Text(NEW_STAGE.split()[0], style="cyan")
    if not record.changed:
        return Text("")
    if counts is None:
        return Text("…", style="dim")
    added, removed = counts
    text = Text()
    text.append(f"+{added}", style="green")
    text.append(f" -{removed}", style="red")
    return text
