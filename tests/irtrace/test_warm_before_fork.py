"""The parent of ``--jobs`` workers may warm the backends before it forks them: the warm-up runs
in the parent, before any worker exists, and leaves no thread behind to be copied by a fork."""

from __future__ import annotations

import os
import threading
from typing import Any

import pytest

from irtrace.core.targets import TARGETS
from irtrace.core.trace_writer import TraceWriter
from irtrace.recording.executor import run_tasks
from irtrace.recording.warmup import native_threads, warm_backends


def test_the_warm_up_runs_in_the_parent_before_the_first_fork() -> None:
    seen: dict[str, Any] = {}

    def warm() -> None:  # what the workers see of it proves it ran before they were forked
        seen["pid"] = os.getpid()
        seen["threads"] = threading.active_count()

    def task(writer: TraceWriter) -> list[int]:
        return [seen.get("pid", -1), os.getpid()]

    results = list(run_tasks([task, task, task], TraceWriter(), workers=2, before_fork=warm))
    assert seen["pid"] == os.getpid()
    for result in results:
        warmed_in, ran_in = result.value
        assert warmed_in == os.getpid() and ran_in != os.getpid()


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="counts threads through /proc")
def test_warming_a_backend_leaves_no_thread_running() -> None:
    import tilelang  # noqa: F401  (its import may start threads of its own: not the warm-up's)

    before = native_threads()
    sources = warm_backends([TARGETS["cuda:sm_90a"], TARGETS["cuda:sm_80"], TARGETS["ascend"]])
    assert list(sources) == ["cuda"]  # once per backend; Ascend kernels are another dialect
    assert "__global__" in (sources["cuda"] or "")  # a real lowering to CUDA source
    assert native_threads() <= before
