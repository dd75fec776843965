"""``irtrace merge``, ``check``, ``show`` and ``passviz html`` go through a corpus run by run: the
memory they allocate is bounded by the largest run, not by the number of runs.

The corpus is the real GEMM lowering copied under N and 4N kernel names (its texts stored once,
so the files grow only by the runs' records); the oracle is Python's own allocation tracker
(``tracemalloc``): the peak at 4N runs must stay close to the peak at N runs. Reading every run
into memory, as ``load_trace`` does, makes it grow about 3x (measured when this test was written).
"""

from __future__ import annotations

import contextlib
import io
import tracemalloc
from collections.abc import Callable
from pathlib import Path

from msgspec.structs import replace

from irtrace.ci.check import check_traces
from irtrace.ci.check_report import render_junit, report_document
from irtrace.cli.main import main as irtrace_main
from irtrace.core.trace import Trace
from irtrace.core.trace_stream import open_trace
from irtrace.core.trace_writer import TraceWriter, stream_merged
from passviz.report import write_report

SHARDS = 4
N = 25
BOUND = 1.5
"""Peak at 4N over the peak at N: what a per-run cost of a few hundred bytes stays well under."""


def _corpus(folder: Path, template: Trace, runs: int) -> tuple[list[Path], Path]:
    """``runs`` copies of the template's runs (kernels ``k0``...) in shards, and a baseline."""
    folder.mkdir()
    shards = [TraceWriter(folder / f"shard-{k}.jsonl") for k in range(SHARDS)]
    with TraceWriter(folder / "baseline.jsonl") as baseline:
        for k in range(runs):
            run = template.runs[k % len(template.runs)]
            copy = replace(run, kernel=f"k{k // len(template.runs)}")
            baseline.add_run(copy, template.texts)
            shards[k % SHARDS].add_run(copy, template.texts)
    for shard in shards:
        shard.close()
    return [folder / f"shard-{k}.jsonl" for k in range(SHARDS)], folder / "baseline.jsonl"


def _peak(step: Callable[[], object]) -> int:
    tracemalloc.start()
    try:
        step()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def _steps(shards: list[Path], baseline: Path, out: Path) -> dict[str, Callable[[], object]]:
    merged = out / "merged.jsonl"

    def merge() -> int:
        return stream_merged([open_trace(path) for path in shards], merged)

    def check() -> object:
        report = check_traces(open_trace(merged), open_trace(baseline))
        assert len(report.runs) == len(open_trace(merged).runs) and not report.gated
        return report_document(report), render_junit(report)

    def show() -> None:
        with contextlib.redirect_stdout(io.StringIO()):
            assert irtrace_main(["show", str(merged), "--json"]) == 0

    def report() -> None:
        trace = open_trace(merged)
        write_report(trace, out / "k0.html", trace.select("k0"))

    return {"merge": merge, "check": check, "show": show, "report": report}


def test_memory_is_bounded_by_the_largest_run_not_the_corpus(gemm_trace: Trace, tmp_path: Path) -> None:
    template = open_trace(gemm_trace.path or "")
    peaks: dict[str, list[int]] = {}
    for runs in (N, 4 * N):
        shards, baseline = _corpus(tmp_path / f"n{runs}", template, runs)
        for name, step in _steps(shards, baseline, tmp_path / f"n{runs}").items():
            peaks.setdefault(name, []).append(_peak(step))
        assert len(open_trace(tmp_path / f"n{runs}" / "merged.jsonl").runs) == runs
    growth = {name: large / small for name, (small, large) in peaks.items()}
    print(growth, peaks)
    assert all(ratio <= BOUND for ratio in growth.values()), (growth, peaks)
