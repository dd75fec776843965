"""What ``irtrace record`` says while it works: a progress line on a terminal, and each native
warning with the run that logged it once it is done.

The progress display draws only when stderr is a terminal (CI logs stay clean). It writes to its
own copy of file descriptor 2, taken before ``hide_harmless_native_warnings`` puts a pipe there,
and refreshes only when a run starts or ends, at most every ``REFRESH_S``: no thread runs
beside TVM's when the workers of ``--jobs N`` are forked.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from typing import IO

from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from irtrace.edge.console import SafeConsole
from irtrace.trace.model import KernelRun

REFRESH_S = 0.1
"""The progress line is drawn at most this often: the parent must stay free to feed workers."""


class RecordingProgress:
    """``irtrace.lowering.api.RecordProgress`` drawn with rich: runs done of all, the run being
    lowered (and how many more are), time elapsed and the estimated time left."""

    def __init__(self, stream: IO[str]) -> None:
        try:
            width = os.get_terminal_size(stream.fileno()).columns
        except OSError:
            width = 0
        width = width or 80  # a terminal that gives no size (a fresh pty says 0)
        console = SafeConsole(file=stream, force_terminal=True, width=width)
        self.progress = Progress(
            TextColumn("recording"),
            BarColumn(bar_width=20),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("ETA"),
            TimeRemainingColumn(),
            TextColumn("{task.description}"),
            console=console,
            auto_refresh=False,
            transient=True,
            # our stdout is the summary table, and Python's stderr is filtered for TileLang's lines
            redirect_stdout=False,
            redirect_stderr=False,
        )
        self.task: TaskID | None = None
        self.drawn = 0.0
        """When the line was last drawn (``time.monotonic``)."""
        self.running: dict[int, str] = {}

    def planned(self, total: int) -> None:
        self.progress.start()
        self.task = self.progress.add_task("", total=total)
        self.progress.refresh()

    def started(self, index: int, label: str) -> None:
        self.running[index] = label
        self._show()

    def ended(self, index: int, label: str) -> None:
        self.running.pop(index, None)
        if self.task is not None:
            self.progress.advance(self.task)
        self._show()

    def _show(self) -> None:
        if self.task is None:
            return
        labels = list(self.running.values())
        text = labels[-1] if labels else ""
        if len(labels) > 1:
            text += f" (+{len(labels) - 1} running)"
        self.progress.update(self.task, description=text)
        now = time.monotonic()
        if now - self.drawn >= REFRESH_S:  # short runs on many workers end in bursts
            self.drawn = now
            self.progress.refresh()

    def stop(self) -> None:
        self.progress.stop()


@contextlib.contextmanager
def recording_progress(*, quiet: bool) -> Iterator[RecordingProgress | None]:
    """A progress display on stderr when it is a terminal and not ``quiet``; else None."""
    if quiet or not _stderr_is_terminal():
        yield None
        return
    stream = os.fdopen(os.dup(2), "w", buffering=1)
    display = RecordingProgress(stream)
    try:
        yield display
    finally:
        with contextlib.suppress(OSError):
            display.stop()
            stream.close()


def _stderr_is_terminal() -> bool:
    try:
        return os.isatty(2) and os.environ.get("TERM") != "dumb"
    except OSError:
        return False


def run_warning_lines(runs: Sequence[KernelRun]) -> list[str]:
    """``warning: KERNEL on TARGET: MESSAGE``, once per distinct warning of a run, with a count
    when it was logged more than once; a multi-line warning by its first line."""
    counted: Counter[tuple[str, str, str]] = Counter()
    for run in runs:
        for warning in run.warnings:
            first = warning.strip().splitlines()[0] if warning.strip() else ""
            counted[(run.kernel, run.target, first)] += 1
    return [
        f"warning: {kernel} on {target}: {message}" + (f" (x{count})" if count > 1 else "")
        for (kernel, target, message), count in counted.items()
    ]
