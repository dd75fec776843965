"""Run as ``python bench_at_launch_sizes.py SCRIPT TRACE``: capture SCRIPT as ``irtrace run`` does,
then bench its kernel as ``irtrace run --bench`` does, with only the GPU step stubbed: TileLang
compiles the kernel for real (for the run's own target), and where ``launch_bench`` would time it
on a GPU, this prints the plan it was given as JSON (sizes, where they came from, each input)."""

from __future__ import annotations

import json
import sys

from irtrace.lowering import capture_extras
from irtrace.lowering.capture import run_script
from irtrace.trace.resources import BenchResult
from irtrace.trace.writer import TraceWriter


def main() -> None:
    script, trace = sys.argv[1], sys.argv[2]
    launched: list[dict[str, object]] = []

    def launch_at_the_gpu(bench: capture_extras.PreparedBench, device: str, repeat: int = 1) -> BenchResult:
        launched.append(
            {
                "compiled": type(bench.kernel).__name__,
                "shape": bench.plan.shape,
                "shape_from": bench.plan.shape_from,
                "inputs": [
                    [item.name, item.scalar if item.param is None else [int(d) for d in item.param.shape]]
                    for item in bench.plan.inputs
                ],
                "launched": {
                    item.name: item.launched.tolist()
                    for item in bench.plan.inputs
                    if item.launched is not None
                },
            }
        )
        return BenchResult(latency_ms=None, device=device, error="stubbed")

    capture_extras.launch_bench = launch_at_the_gpu  # type: ignore[assignment]
    with TraceWriter(trace) as writer:
        outcome = run_script(["python", script], writer)
    (run,) = outcome.runs
    capture_extras.bench_captured(run, outcome.kernels[run.run_id], "stub-gpu")
    print("BENCHED " + json.dumps(launched))


if __name__ == "__main__":
    main()
