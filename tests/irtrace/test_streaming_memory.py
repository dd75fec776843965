"""``irtrace merge``, ``check``, ``show`` and ``passviz html`` go through a corpus run by run: the
memory they allocate is bounded by the largest run, not by the number of runs.

The corpus is the real GEMM lowering's first passes copied under N and 4N kernel names (its texts
stored once, so the files grow only by the runs' records; few passes, so the test is quick). The
oracle is Python's own allocation tracker (``tracemalloc``): the peak at 4N runs less the peak at
N runs, over the 3N runs added, is what each run costs that is kept across runs. Measured when
this test was written: 0.8 KB (merge), 2.7 KB (check: its per-pair findings and the runs' keys),
under 0 (show, report) a run; the same steps holding every run, as they did before: 14, 37 and
42 KB a run for merge, check and show (the report's peak, building the page, hid its runs).
"""

from __future__ import annotations

import contextlib
import os
import tracemalloc
from collections.abc import Callable
from pathlib import Path

from msgspec.structs import replace

from irtrace.ci.check import check_traces
from irtrace.cli.main import main as irtrace_main
from irtrace.trace.model import Trace
from irtrace.trace.stream import open_trace
from irtrace.trace.writer import TraceWriter, stream_merged
from passviz.report import write_report

SHARDS = 4
N = 12
PASSES = 8
"""Passes kept of each run (the first ones, parents before children)."""
PER_RUN = 8_000
"""Bytes of peak memory a run may add (the runs' keys, where they lie, a check's findings)."""


def _corpus(folder: Path, template: Trace, runs: int) -> tuple[list[Path], Path]:
    """``runs`` copies of the template's runs (kernels ``k0``...) in shards, and a baseline."""
    folder.mkdir()
    shards = [TraceWriter(folder / f"shard-{k}.jsonl") for k in range(SHARDS)]
    with TraceWriter(folder / "baseline.jsonl") as baseline:
        for k in range(runs):
            run = template.runs[k % len(template.runs)]
            copy = replace(
                run, kernel=f"k{k // len(template.runs)}", passes=run.passes[:PASSES], source_maps=()
            )
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
        # Only the check itself: the documents it writes hold every pair (output, not state).
        report = check_traces(open_trace(merged), open_trace(baseline))
        assert len(report.runs) == len(open_trace(merged).runs) and not report.gated
        return report

    def show() -> None:
        with open(os.devnull, "w") as null, contextlib.redirect_stdout(null):  # output kept nowhere
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
    per_run = {name: (large - small) / (3 * N) for name, (small, large) in peaks.items()}
    assert all(cost <= PER_RUN for cost in per_run.values()), (per_run, peaks)
