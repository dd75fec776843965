"""Ask for a line of the kernel's file (key ``g``): its IR lines are then highlighted in each pass."""

from __future__ import annotations

import re
from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Static

LINE = re.compile(r"[1-9][0-9]{0,6}")
"""What may be typed: a line number from 1 (or nothing, to stop highlighting)."""
CLEAR = 0
"""The result when the box is left empty: stop highlighting."""


class LinePrompt(ModalScreen[int | None]):
    """One input box; enter picks the line (empty: none), escape keeps what was picked."""

    DEFAULT_CSS = """
    LinePrompt { align: center middle; }
    LinePrompt #line-box { width: 60; max-width: 96%; height: auto; border: round $accent;
        background: $panel; padding: 0 1; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "cancel")]

    def __init__(self, current: int | None) -> None:
        super().__init__()
        self.current = current

    def compose(self) -> ComposeResult:
        with Vertical(id="line-box"):
            yield Static("line of the kernel's file (empty: highlight none)", id="line-title")
            yield Input(value=str(self.current or ""), placeholder="36", id="line-input")
            yield Static("", id="line-error")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        text = event.value.strip()
        if not text:
            self.dismiss(CLEAR)
        elif LINE.fullmatch(text):
            self.dismiss(int(text))
        else:
            self.query_one("#line-error", Static).update("a line number from 1, as 36")

    def action_cancel(self) -> None:
        self.dismiss(None)
