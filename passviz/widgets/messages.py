"""Messages the browser's widgets post to the app."""

from __future__ import annotations

from dataclasses import dataclass

from textual.message import Message


@dataclass
class RunChosen(Message):
    """A kernel and target was picked in the run tree."""

    trace_no: int
    """0 for the main trace, 1 for the one opened with ``--compare``."""
    run_id: int


@dataclass
class PassChosen(Message):
    """The cursor of the pass table moved onto a pass."""

    index: int
    """``PassRecord.index`` in the current run."""


@dataclass
class FiltersChanged(Message):
    """The filter bar's name, phase or changed-only setting changed."""

    name: str
    phase: str
    changed_only: bool
