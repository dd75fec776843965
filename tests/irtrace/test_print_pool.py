"""The print pool behind exact tracing (issue 26): who prints, and how many threads print.

The pipeline's thread does not sit idle while prints are queued: at a barrier and at the end it
prints the waiting ones itself, so the last prints of a short lowering finish on every core
there is. ``--jobs`` workers divide the cores among them instead of each starting the threads
a whole machine would get. That every record stays exact is test_exact_passes.py.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from irtrace.lowering import snapshots
from irtrace.lowering.executor import run_tasks
from irtrace.lowering.snapshots import ModuleState, print_workers, share_cores
from irtrace.trace.writer import TraceWriter


def small_modules(count: int) -> list[Any]:
    """Real TVM modules of one function each, told apart by the constant they evaluate."""
    import tilelang  # noqa: F401  (puts its TVM on the path)
    import tvm
    from tvm import tirx

    return [
        tvm.IRModule({"main": tirx.PrimFunc([], tirx.Evaluate(tirx.IntImm("int32", value)))})
        for value in range(count)
    ]


def test_a_thread_waiting_for_prints_prints_the_queued_ones_itself(monkeypatch: pytest.MonkeyPatch) -> None:
    modules = small_modules(4)
    worker_busy, release_worker = threading.Event(), threading.Event()
    printed_on: dict[int, str] = {}
    real_print = snapshots._print_state

    def print_state(state: ModuleState) -> Any:
        number = next(i for i, mod in enumerate(modules) if state.functions[0][1].same_as(mod["main"]))
        printed_on[number] = threading.current_thread().name
        if threading.current_thread() is not threading.main_thread() and not worker_busy.is_set():
            worker_busy.set()
            release_worker.wait(30)  # the one print thread stays on the first module
        return real_print(state)

    monkeypatch.setattr(snapshots, "_print_state", print_state)
    pool = snapshots._PrintPool(1)
    jobs = [pool.submit(ModuleState(mod)) for mod in modules]
    assert worker_busy.wait(30)
    pool.help()  # the calling thread takes modules 1-3 while the print thread is held on module 0
    assert [printed_on.get(n) for n in (1, 2, 3)] == [threading.main_thread().name] * 3
    release_worker.set()
    pool.shutdown()
    assert printed_on[0].startswith("irtrace-print")
    assert [job.result()[1] for job in jobs] == [mod.script() for mod in modules]


def test_drain_prints_on_the_pipelines_thread_what_the_print_thread_has_not_begun(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    modules = small_modules(3)
    release = threading.Event()
    on_main: list[int] = []
    real_print = snapshots._print_state

    def print_state(state: ModuleState) -> Any:
        if threading.current_thread() is threading.main_thread():
            on_main.append(
                next(i for i, mod in enumerate(modules) if state.functions[0][1].same_as(mod["main"]))
            )
            if len(on_main) == 2:
                release.set()
        else:
            release.wait(20)  # the print thread is held until drain has printed the others
        return real_print(state)

    monkeypatch.setattr(snapshots, "_print_state", print_state)
    monkeypatch.setattr(snapshots, "print_workers", lambda: 1)
    writer = TraceWriter()
    printer = snapshots.SnapshotPrinter(writer, threaded=True)
    snaps = [printer.snapshot(mod) for mod in modules]
    printer.drain()
    assert len(on_main) >= 2  # all but the one the held print thread took, if it took one
    trace = writer.trace()
    assert [trace.text(snap.sha) for snap in snaps] == [mod.script() for mod in modules]


def cores() -> int:
    return len(os.sched_getaffinity(0))


def test_a_process_alone_prints_on_up_to_three_threads_and_jobs_share_the_cores() -> None:
    assert print_workers() == max(1, min(3, cores() - 1))
    try:
        share_cores(cores())
        assert print_workers() == 1  # one core each: the pipeline's thread and one printer
    finally:
        share_cores(1)


def test_each_jobs_worker_knows_how_many_workers_share_the_cores() -> None:
    def sharing(writer: TraceWriter) -> int:
        return snapshots._processes_sharing_cores

    results = list(run_tasks([sharing, sharing], TraceWriter(), workers=2))
    assert [result.value for result in results] == [2, 2]
    assert snapshots._processes_sharing_cores == 1  # the parent is left as it was


def test_the_writer_writes_while_the_pipelines_thread_is_busy_in_a_pass(tmp_path: Path) -> None:
    """A pass that hangs finds every record up to its start in the file: the pipeline's thread
    never wakes the writer (no barrier, no drain here), the writer takes its jobs on its own."""
    path = tmp_path / "busy.jsonl"
    writer = TraceWriter(path)
    printer = snapshots.SnapshotPrinter(writer, threaded=True)
    (mod,) = small_modules(1)
    snap = printer.snapshot(mod)
    printer.write(lambda: writer.add_text("the record a hanging pass leaves behind"))
    deadline = time.monotonic() + 10
    while b"the record a hanging pass leaves behind" not in path.read_bytes():
        assert time.monotonic() < deadline, "the writer did not write without being woken"
        time.sleep(0.005)
    assert snap.sha is not None and snap.sha in path.read_text()  # the text before the record
    printer.drain()
    writer.close()


def test_a_writer_asleep_after_a_long_quiet_wakes_for_the_next_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A writer with nothing to write stops its rounds (a printer nobody drains costs no CPU), and
    the next record wakes it: it is still in the file without a barrier."""
    monkeypatch.setattr(snapshots, "WRITER_IDLE_ROUNDS", 2)
    path = tmp_path / "quiet.jsonl"
    writer = TraceWriter(path)
    printer = snapshots.SnapshotPrinter(writer, threaded=True, capture_ir=False)
    deadline = time.monotonic() + 10
    while not printer._sleeping:
        assert time.monotonic() < deadline, "the writer kept its rounds with nothing to write"
        time.sleep(0.01)
    printer.write(lambda: writer.add_text("the record after the quiet"))
    while b"the record after the quiet" not in path.read_bytes():
        assert time.monotonic() < deadline, "the record did not wake the writer"
        time.sleep(0.005)
    printer.drain()
    writer.close()
