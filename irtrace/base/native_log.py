"""TileLang's native log lines (TVM's C++ warnings on stderr): the known-harmless ones folded into
one note, so a terminal and a language server show only what a kernel author can act on.
Used by the command lines (``hide_harmless_native_warnings``) and by the analysis facts.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import tempfile
import threading
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

HARMLESS_NATIVE_WARNINGS: dict[str, re.Pattern[str]] = {
    # TVM asks the ROCm driver for its version each time a hip target is made; lowering needs no
    # driver, and the assumed version is the right one for every GPU TileLang supports.
    "Unable to detect ROCm version, assuming >= 3.5": re.compile(
        r"^(\[\d\d:\d\d:\d\d\] )?\S*: Warning: Unable to detect ROCm version, assuming >= 3\.5$"
    ),
}
"""Lines TileLang's C++ logging prints to stderr that say nothing about the user's kernels."""

RECORDED_FATAL = re.compile(r"^(\[\d\d:\d\d:\d\d\] )?\S*: Fatal: ")
"""TVM's ``LOG(FATAL)`` line: printed just before the same message is raised, so it is the error
of a run that failed, which the trace records and the summary shows (``-q``: the exit status)."""
FATAL_KEY = "Fatal: ..."

FORWARD_JOIN_S = 5.0
"""How long to wait for the last lines once the command is done (a child may hold the pipe)."""


@dataclass
class NativeStderr:
    """What ``hide_harmless_native_warnings`` held back: how many lines of each known warning."""

    hidden: Counter[str] = field(default_factory=Counter)

    def note(self, tool: str) -> str | None:
        """One line saying what was hidden and how to see it, or None when nothing was."""
        harmless = {text: count for text, count in self.hidden.items() if text != FATAL_KEY}
        notes = []
        if harmless:
            kinds = "; ".join(f'{count}x "{text}"' for text, count in harmless.items())
            notes.append(f"{sum(harmless.values())} known-harmless TileLang warning(s) ({kinds})")
        if self.hidden[FATAL_KEY]:
            notes.append(
                f'{self.hidden[FATAL_KEY]} TileLang "Fatal:" line(s), each the error of a failed run, '
                "which the trace records"
            )
        return f"{tool}: note: hid {' and '.join(notes)}; --debug shows them" if notes else None


@contextlib.contextmanager
def hide_harmless_native_warnings(*, debug: bool) -> Iterator[NativeStderr]:
    """Filter file descriptor 2 while the block runs: known-harmless lines are counted, not shown.

    TVM's C++ logging writes to ``std::cerr`` directly, out of Python's reach, so the descriptor
    itself goes through a pipe; every other line (Python's own stderr included) is passed on as
    it arrives. With ``debug`` nothing is filtered.
    """
    result = NativeStderr()
    if debug:
        yield result
        return
    sys.stderr.flush()
    try:
        original = os.dup(2)
    except OSError:  # no stderr at all: nothing to keep clean
        yield result
        return
    read_end, write_end = os.pipe()
    os.dup2(write_end, 2)
    os.close(write_end)
    forwarder = threading.Thread(
        target=_forward_lines, args=(read_end, original, result.hidden), name="irtrace-stderr", daemon=True
    )
    forwarder.start()
    try:
        yield result
    finally:
        sys.stderr.flush()
        os.dup2(original, 2)  # closes the pipe's write end, so the forwarder reads to the end
        forwarder.join(FORWARD_JOIN_S)
        if not forwarder.is_alive():
            os.close(original)


def _forward_lines(read_end: int, original: int, hidden: Counter[str]) -> None:
    with os.fdopen(read_end, "rb") as pipe:
        for raw in pipe:
            line = raw.decode("utf-8", "replace").rstrip("\r\n")
            known = next(
                (name for name, pattern in HARMLESS_NATIVE_WARNINGS.items() if pattern.match(line)), None
            )
            if known is None and RECORDED_FATAL.match(line):
                known = FATAL_KEY
            if known is not None:
                hidden[known] += 1
                continue
            with contextlib.suppress(OSError):
                while raw:
                    raw = raw[os.write(original, raw) :]


_LOGGED_WARNING = re.compile(r"^(?:\[[0-9:]+\] )?\S*: Warning: ", re.MULTILINE)
"""The head of a TVM ``LOG(WARNING)`` line: ``[18:45:09] file.cc:12: Warning: `` (time optional)."""


def split_native_log(log: str) -> tuple[list[str], str]:
    """The warnings in a stretch of native stderr, each without its time and location prefix
    (a warning's further lines kept, up to a blank line or the next warning), and the rest of
    the text as it was.

    Known-harmless warnings are dropped: they say nothing about the kernel.
    """
    warnings: list[str] = []
    rest: list[str] = []
    current: list[str] | None = None
    for line in log.splitlines(keepends=True):
        head = _LOGGED_WARNING.match(line)
        if head is not None:
            if current is not None:
                warnings.append("".join(current).rstrip())
            current = None
            if any(pattern.match(line.rstrip("\r\n")) for pattern in HARMLESS_NATIVE_WARNINGS.values()):
                continue
            current = [line[head.end() :]]
        elif current is not None and line.strip():
            current.append(line)  # a multi-line warning: its source excerpt and advice, up to a blank line
        else:
            if current is not None:
                warnings.append("".join(current).rstrip())
                current = None
            rest.append(line)
    if current is not None:
        warnings.append("".join(current).rstrip())
    return warnings, "".join(rest)


run_log_path: Path | None = None
"""Where ``capture_run_log`` writes, when set (a ``--jobs`` worker sets it per task): a file the
parent can still read, and show, when the worker dies mid-lowering (a crash's native backtrace)."""


@dataclass
class RunLog:
    """What file descriptor 2 received while ``capture_run_log`` was active."""

    text: str = ""


@contextlib.contextmanager
def capture_fd2(path: Path | None = None) -> Iterator[RunLog]:
    """Take file descriptor 2 into ``path`` (else a temporary file) while the block runs (TVM's
    C++ logging writes there, out of Python's reach), then give its text."""
    captured = RunLog()
    sys.stderr.flush()
    saved = os.dup(2)
    sink = open(path, "w+b") if path is not None else tempfile.TemporaryFile(mode="w+b")  # noqa: SIM115
    with sink:
        os.dup2(sink.fileno(), 2)
        try:
            yield captured
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            sink.seek(0)
            captured.text = sink.read().decode("utf-8", "replace")


@contextlib.contextmanager
def capture_run_log() -> Iterator[RunLog]:
    """A run's fd-2 log, in ``run_log_path`` when set (a worker's log survives its death there);
    the caller decides what to pass on."""
    path = run_log_path
    with capture_fd2(path) as captured:
        yield captured
    if path is not None:
        path.unlink(missing_ok=True)


def show_run_log(path: Path) -> None:
    """Pass on to stderr what a worker that died had logged in ``capture_run_log``, and remove it."""
    with contextlib.suppress(OSError):
        text = path.read_bytes()
        path.unlink()
        if text:
            sys.stderr.flush()
            sys.stderr.buffer.write(text)
            sys.stderr.flush()
