"""The key list, shown over the browser by ``?``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from rich.table import Table
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from passviz.widgets.run_info import legend


class HelpScreen(ModalScreen[None]):
    """Lists every key of the browser; any of escape, q or ? closes it."""

    CSS_PATH = "help_screen.tcss"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "dismiss", "close"),
        Binding("q", "dismiss", "close", show=False),
        Binding("question_mark", "dismiss", "close", show=False),
    ]

    def __init__(self, keys: Sequence[tuple[str, str]]) -> None:
        super().__init__()
        self.keys = keys

    def compose(self) -> ComposeResult:
        table = Table(box=None, show_header=False, padding=(0, 2))
        table.add_column(style="bold cyan", no_wrap=True)
        table.add_column()
        for key, description in self.keys:
            table.add_row(key, description)
        with VerticalScroll(id="help-box"):
            yield Static("passviz keys  (Esc, q or ? closes this)", id="help-title")
            yield Static(table, id="help-keys")
            yield Static("Mouse: click a target, a pass or a tab; scroll the panes.", id="help-mouse")
            yield Static(legend(), id="help-legend")

    async def action_dismiss(self, result: None = None) -> None:
        self.dismiss(result)
