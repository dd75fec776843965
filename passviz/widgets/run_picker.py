"""Pick a kernel and target by typing part of its name (key ``k``), without walking the tree."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, OptionList, Static
from textual.widgets.option_list import Option

from irtrace.trace.model import Trace
from passviz.model import run_label
from passviz.widgets.run_tree import RunRef


class RunPicker(ModalScreen[RunRef | None]):
    """A filterable list of every kernel @ target of the open traces; enter picks, escape cancels."""

    DEFAULT_CSS = """
    RunPicker { align: center middle; }
    RunPicker #picker { width: 80; max-width: 96%; height: auto; max-height: 80%; border: round $accent;
        background: $panel; padding: 0 1; }
    RunPicker OptionList { height: auto; max-height: 30; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", "cancel"),
        Binding("down", "cursor(1)", "next", show=False),
        Binding("up", "cursor(-1)", "previous", show=False),
    ]

    def __init__(self, traces: Sequence[Trace], current: RunRef | None) -> None:
        super().__init__()
        self.choices: list[tuple[str, RunRef, Text]] = []
        for trace_no, trace in enumerate(traces):
            prefix = "compare: " if trace_no else ""
            for run in trace.runs:
                label = Text(f"{prefix}{run.kernel} @ ")
                label.append(run_label(run), style="red" if run.status == "failed" else "")
                self.choices.append(
                    (f"{prefix}{run.kernel} @ {run.target}".lower(), (trace_no, run.run_id), label)
                )
        self.current = current

    def compose(self) -> ComposeResult:
        with Vertical(id="picker"):
            yield Static("kernel @ target  (type to filter, enter to open)")
            yield Input(placeholder=self.example(), id="picker-filter")
            yield OptionList(id="picker-list")

    def example(self) -> str:
        """A query that matches a run of these traces: the last run's kernel (its first word)
        and target family, so the hint is true of the trace open."""
        if not self.choices:
            return "kernel target"
        text = self.choices[-1][0].removeprefix("compare: ")
        kernel, _, target = text.partition(" @ ")
        return f"e.g. {kernel.split('_')[0]} {target.split(':')[0]}"

    def on_mount(self) -> None:
        self._fill("")
        self.query_one(Input).focus()

    @property
    def shown(self) -> list[RunRef]:
        """The runs listed now, in order."""
        options = self.query_one(OptionList)
        return [self._ref(options.get_option_at_index(i).id) for i in range(options.option_count)]

    @staticmethod
    def _ref(option_id: str | None) -> RunRef:
        trace_no, run_id = (option_id or "0:0").split(":")
        return (int(trace_no), int(run_id))

    def _fill(self, query: str) -> None:
        words = query.lower().split()
        options = self.query_one(OptionList)
        options.clear_options()
        wanted = [c for c in self.choices if all(word in c[0] for word in words)]
        options.add_options([Option(label, id=f"{ref[0]}:{ref[1]}") for _, ref, label in wanted])
        refs = [ref for _, ref, _ in wanted]
        if refs:
            options.highlighted = refs.index(self.current) if self.current in refs else 0

    def on_input_changed(self, event: Input.Changed) -> None:
        event.stop()
        self._fill(event.value)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        options = self.query_one(OptionList)
        if options.highlighted is not None and options.option_count:
            self.dismiss(self._ref(options.get_option_at_index(options.highlighted).id))

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        self.dismiss(self._ref(event.option.id))

    def action_cursor(self, step: int) -> None:
        options = self.query_one(OptionList)
        if options.option_count:
            current = options.highlighted if options.highlighted is not None else 0
            options.highlighted = (current + step) % options.option_count

    def action_cancel(self) -> None:
        self.dismiss(None)
