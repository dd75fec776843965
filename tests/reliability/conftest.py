"""Helpers for the reliability tests: the real CLIs in subprocesses, as users run them."""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from irtrace.targets.backends import DEFAULT_TARGET
from irtrace.trace.model import UNFINISHED, KernelRun, PassRecord, Trace
from tests.conftest import DATA, ROOT, record_to_file

MISBEHAVING = DATA / "misbehaving.py"
COPY = f"{MISBEHAVING}::copy()"
"""A small kernel; with IRTRACE_TEST_MISBEHAVE set, its tl.LowerTileOp crashes or hangs."""
LOWER_TILE_OP_INDEX = 25
"""Where tl.LowerTileOp runs in COPY's cuda:sm_90 pipeline (checked by the tests against a clean run)."""


def cli_command(tool: str, *args: str) -> list[str]:
    return [sys.executable, "-c", f"import sys; from {tool}.cli import main; sys.exit(main())", *args]


def run_tool(
    tool: str,
    *args: str,
    misbehave: str | None = None,
    file_size_limit: int | None = None,
    timeout: float = 300,
) -> subprocess.CompletedProcess[str]:
    """Run ``tool`` (irtrace, passdiff, passviz) in a subprocess; ``file_size_limit`` in bytes makes
    writes past it fail with EFBIG, as a full disk fails them with ENOSPC."""
    env = dict(os.environ)
    env.pop("IRTRACE_TEST_MISBEHAVE", None)
    if misbehave:
        env["IRTRACE_TEST_MISBEHAVE"] = misbehave

    def limit() -> None:
        if file_size_limit is not None:
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
            resource.setrlimit(resource.RLIMIT_FSIZE, (file_size_limit, file_size_limit))

    return subprocess.run(
        cli_command(tool, *args),
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=timeout,
        preexec_fn=limit,
    )


def start_tool(tool: str, *args: str, log: Path, misbehave: str | None = None) -> subprocess.Popen[str]:
    """Start ``tool`` in the background; its stdout and stderr go to ``log``."""
    env = dict(os.environ)
    env.pop("IRTRACE_TEST_MISBEHAVE", None)
    if misbehave:
        env["IRTRACE_TEST_MISBEHAVE"] = misbehave
    with open(log, "w") as sink:
        return subprocess.Popen(
            cli_command(tool, *args), stdout=sink, stderr=subprocess.STDOUT, text=True, cwd=ROOT, env=env
        )


def wait_for(condition: Callable[[], bool], what: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


def holds(path: Path, text: str) -> bool:
    """Whether ``path`` exists and holds ``text`` (a plain trace being written)."""
    try:
        return text in path.read_text(errors="replace")
    except OSError:
        return False


def one_line(stderr: str, tool: str = "irtrace") -> str:
    """The single error line of a failed command (no traceback, nothing else)."""
    lines = [line for line in stderr.splitlines() if line.startswith(f"{tool}: error:")]
    assert "Traceback" not in stderr, stderr
    assert len(lines) == 1, stderr
    return lines[0]


@pytest.fixture(scope="session")
def copy_trace(tmp_path_factory: pytest.TempPathFactory) -> Trace:
    """COPY lowered for the default target (what a recording without -t gets), untouched by any
    misbehaviour: a small real trace."""
    return record_to_file(tmp_path_factory.mktemp("reliability") / "copy.jsonl", [COPY], [DEFAULT_TARGET])


def pass_names(trace: Trace) -> Sequence[str]:
    return [p.name for p in trace.runs[0].passes]


def finished_and_running(run: KernelRun) -> tuple[list[PassRecord], PassRecord]:
    """The passes that finished, and the one that was running when the recording stopped (kept as a
    failed record with the IR it received); checks that exactly one was running."""
    running = [p for p in run.passes if p.error == UNFINISHED]
    assert len(running) == 1 and running[0].failed and running[0].name == run.running, run.passes[-3:]
    return [p for p in run.passes if p.error != UNFINISHED], running[0]
