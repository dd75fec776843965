"""Small helpers every ``irtrace`` command that prints with Rich shares."""

from __future__ import annotations

from typing import Any

from irtrace.trace.model import STOPPED_BY_CRASH, STOPPED_BY_TIMEOUT, KernelRun


def escape(text: object) -> str:
    """``text`` shown as it is: Rich would take ``C_local[i, j]`` or ``[/x]`` for markup."""
    from rich.markup import escape as rich_escape

    return rich_escape(str(text))


def console(stderr: bool = False) -> Any:
    """Rich's console, with the text of a trace unable to drive the terminal (``irtrace.edge.console``)."""
    from irtrace.edge.console import safe_console

    return safe_console(stderr=stderr)


def run_status(run: KernelRun) -> str:
    """``ok``, ``failed``, ``timed out``, ``crashed`` or ``incomplete``."""
    if run.stopped_by == STOPPED_BY_TIMEOUT:
        return "timed out"
    if run.stopped_by == STOPPED_BY_CRASH:
        return "crashed"
    return run.status


def first_line(text: str | None) -> str:
    lines = [line for line in (text or "").splitlines() if line.strip()]
    return lines[0][:300] if lines else ""
