"""``irtrace record --jobs N`` scale-out: workers take the longest runs first, and die with their parent.

The order is seen where the parent hands runs to workers (the progress events); the trace keeps
the plan's order. That traces are the same with any ``--jobs`` and order is in test_parallel.py.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from msgspec.structs import replace

from irtrace.lowering.api import RecordRequest, record_kernels
from irtrace.perf.schedule import longest_first, previous_run_times
from irtrace.targets.specs import parse_spec
from irtrace.trace.writer import TraceWriter

from ..conftest import DATA, ROOT

FAILING = f"{DATA / 'misbehaving.py'}::raising_factory()"
TARGETS = ("cuda:sm_90", "hip:gfx942", "metal")


class Handed:
    """A ``RecordProgress`` that keeps the order runs were handed to workers in."""

    def __init__(self) -> None:
        self.order: list[int] = []

    def planned(self, total: int) -> None:
        pass

    def started(self, index: int, label: str) -> None:
        self.order.append(index)

    def ended(self, index: int, label: str) -> None:
        pass


def record_failing(run_times: dict[tuple[str, str, str], float] | None) -> tuple[list[int], list[str]]:
    progress = Handed()
    writer = TraceWriter()
    recording = record_kernels(
        [RecordRequest(parse_spec(FAILING), TARGETS)], writer, jobs=2, progress=progress, run_times=run_times
    )
    return progress.order, [run.target for run in recording.runs]


def test_workers_take_the_runs_that_took_longest_in_a_previous_trace_first(tmp_path: Path) -> None:
    writer = TraceWriter()
    record_kernels([RecordRequest(parse_spec(FAILING), TARGETS)], writer)  # in process, plan order
    previous = TraceWriter(tmp_path / "previous.jsonl")
    for run, seconds in zip(writer.trace().runs, (1.0, 2.0, 3.0), strict=True):  # metal took longest
        previous.add_run(replace(run, total_s=seconds), writer.trace().texts)
    previous.close()
    times = previous_run_times(tmp_path / "previous.jsonl")
    assert sorted(times.values()) == [1.0, 2.0, 3.0]

    handed, written = record_failing(times)
    assert handed == [2, 1, 0]  # metal, hip, cuda
    assert written == list(TARGETS)  # the trace keeps the plan's order


def test_without_a_previous_trace_slow_target_families_go_first() -> None:
    keys = [("k", "s", "metal"), ("k", "s", "c"), ("k", "s", "cuda:sm_90"), ("k", "s", "hip:gfx942")]
    assert longest_first(keys, {}) == [2, 3, 0, 1]
    # a known time wins over the static estimate, scaled by the median of the known ones
    assert longest_first(keys, {keys[1]: 10.0, keys[2]: 1.0})[0] == 1


def _children(pid: int) -> list[int]:
    with contextlib.suppress(OSError):
        return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    return []


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"  # a zombie has ended; only its parent's wait is missing


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc to find the workers")
def test_workers_die_when_the_parent_is_killed_with_sigkill(tmp_path: Path) -> None:
    env = dict(os.environ, IRTRACE_TEST_MISBEHAVE="hang:LowerTileOp")
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    spec = f"{DATA / 'misbehaving.py'}::copy"
    command = [sys.executable, "-m", "irtrace.cli", "record", spec, "-t", "cuda:sm_90", "-t", "hip:gfx942"]
    parent = subprocess.Popen(
        [*command, "--jobs", "2", "-q", "-o", "t.jsonl"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    workers: list[int] = []
    try:
        deadline = time.monotonic() + 120
        scratch = tmp_path / "t.jsonl.partial.task-0"
        # both workers are forked, and the first is inside the hanging pass (its start is written)
        while time.monotonic() < deadline and parent.poll() is None:
            workers = _children(parent.pid)
            if len(workers) == 2 and scratch.exists() and b"LowerTileOp" in scratch.read_bytes():
                break
            time.sleep(0.1)
        assert len(workers) == 2 and parent.poll() is None, "the workers never got busy"
        parent.send_signal(signal.SIGKILL)
        parent.wait()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and any(map(_alive, workers)):
            time.sleep(0.1)
        assert not [pid for pid in workers if _alive(pid)], "a worker outlived its killed parent"
    finally:
        for pid in [parent.pid, *workers]:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        parent.wait()


def test_an_order_from_file_that_is_not_a_trace_is_a_one_line_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from irtrace.cli.main import main

    (tmp_path / "notes.txt").write_text("not a trace\n")
    output = tmp_path / "t.jsonl"
    code = main(
        ["record", FAILING, "--jobs", "2", "--order-from", str(tmp_path / "notes.txt"), "-o", str(output)]
    )
    assert code == 6 and not output.exists()
    assert capsys.readouterr().err.count("\n") == 1
