"""Filters for the pass table: a name search, a phase and changed-only; posts ``FiltersChanged``."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.widgets import Checkbox, Input, Select

from passviz.model import PHASES
from passviz.widgets.messages import FiltersChanged

ALL_PHASES = "all"


class FilterBar(Horizontal):
    """The three filters; the app's keys change them through ``toggle_changed`` and ``cycle_phase``."""

    DEFAULT_CSS = """
    FilterBar { height: auto; }
    FilterBar Input { width: 1fr; }
    FilterBar Select { width: 18; }
    FilterBar Checkbox { width: auto; }
    """

    def compose(self) -> ComposeResult:
        yield Input(placeholder="search passes  (/)", id="name-filter")
        yield Select(
            [("all phases", ALL_PHASES), *((phase, phase) for phase in PHASES)],
            value=ALL_PHASES,
            allow_blank=False,
            id="phase-filter",
        )
        yield Checkbox("changed", id="changed-filter")

    @property
    def name_input(self) -> Input:
        return self.query_one("#name-filter", Input)

    def toggle_changed(self) -> None:
        box = self.query_one("#changed-filter", Checkbox)
        box.value = not box.value

    def cycle_phase(self) -> None:
        select: Select[str] = self.query_one("#phase-filter", Select)
        order = [ALL_PHASES, *PHASES]
        current = select.value if isinstance(select.value, str) else ALL_PHASES
        select.value = order[(order.index(current) + 1) % len(order)]

    def clear(self) -> None:
        self.name_input.value = ""
        self.query_one("#phase-filter", Select).value = ALL_PHASES
        self.query_one("#changed-filter", Checkbox).value = False

    def _post(self) -> None:
        phase = self.query_one("#phase-filter", Select).value
        self.post_message(
            FiltersChanged(
                name=self.name_input.value.strip(),
                phase="" if phase in (ALL_PHASES, Select.BLANK) else str(phase),
                changed_only=self.query_one("#changed-filter", Checkbox).value,
            )
        )

    def on_input_changed(self, event: Input.Changed) -> None:
        event.stop()
        self._post()

    def on_select_changed(self, event: Select.Changed) -> None:
        event.stop()
        self._post()

    def on_checkbox_changed(self, event: Checkbox.Changed) -> None:
        event.stop()
        self._post()
