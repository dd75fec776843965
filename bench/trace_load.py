"""How long loading a large trace takes, against parsing the same lines with plain ``json.loads``.

Writes a trace of 60,000 records with irtrace's own writer (runs of 80 passes each, a start and
a pass record per pass, IR texts shared between runs as in a real recording), then loads it with
``irtrace.trace.model.load_trace`` (every field type-checked) and, as the baseline measured in the same
run, decodes each line with ``json.loads`` and nothing else. Each figure is the best of several
interleaved repeats.

Loading must stay linear in the records as well as fast: ``--smoke`` (6,000 records, for CI) also
prints the time per record, which a reader that rebuilds a collection per record would inflate.

Run: .venv/bin/python bench/trace_load.py [--records 60000] [--repeats 5] [--smoke]
Ends with: RESULT seconds=<s> ratio_vs_json=<x>
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from irtrace.trace.model import STATUS_OK, KernelRun, PassRecord  # noqa: E402
from irtrace.trace.reader import load_trace  # noqa: E402
from irtrace.trace.writer import TraceWriter  # noqa: E402

PASSES_PER_RUN = 80
DISTINCT_TEXTS = 200


def write_trace(path: Path, records: int) -> int:
    """A trace of about ``records`` records; returns how many lines it has."""
    runs = max(1, records // (2 * PASSES_PER_RUN + 2))
    writer = TraceWriter(path)
    texts = [
        writer.add_text(f"# module {i}\n" + "x = T.alloc_buffer((128, 128))\n" * 40)
        for i in range(DISTINCT_TEXTS)
    ]
    for r in range(runs):
        run = writer.begin_run(
            KernelRun(
                run_id=0,
                kernel=f"kernel_{r % 40}",
                spec=f"examples/gemm.py::matmul({r})",
                args={"args": [r], "kwargs": {"block_M": 128}},
                target="cuda:sm_90",
                target_detail="cuda -arch=sm_90",
                pass_configs={"tl.disable_tma_lower": False},
                tilelang_version="0.1.15",
                host={"hostname": "bench", "platform": "linux", "python": "3.11"},
            )
        )
        for i in range(PASSES_PER_RUN):
            record = PassRecord(
                index=i,
                name=f"tl.Pass{i}",
                raw_name=f"tl.Pass{i}",
                phase="lower",
                pipeline="cuda",
                depth=0,
                parent=None,
                start_s=i * 0.001,
                wall_s=0.001,
                self_s=0.001,
                changed=i % 2 == 0,
                ir_before=texts[(r + i) % DISTINCT_TEXTS],
                ir_after=texts[(r + i + 1) % DISTINCT_TEXTS],
            )
            writer.start_pass(run.run_id, record)
            writer.add_pass(run.run_id, record)
        writer.end_run(
            run.run_id,
            status=STATUS_OK,
            error=None,
            total_s=0.1,
            input_ir=texts[0],
            source_sha256=texts[1],
        )
    writer.close()
    return sum(1 for _ in path.open(encoding="utf-8"))


def plain_json(path: Path) -> int:
    with path.open(encoding="utf-8") as handle:
        return sum(1 for line in handle if json.loads(line))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=60_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument(
        "--smoke", action="store_true", help="6,000 records, 2 repeats: runs in a few seconds"
    )
    options = parser.parse_args()
    if options.smoke:
        options.records, options.repeats = 6_000, 2
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "large.trace.jsonl"
        lines = write_trace(path, options.records)
        print(f"trace: {lines} lines, {path.stat().st_size / 1e6:.1f} MB")
        load_best = json_best = float("inf")
        for _ in range(options.repeats):
            started = time.perf_counter()
            trace = load_trace(path)
            load_best = min(load_best, time.perf_counter() - started)
            started = time.perf_counter()
            plain_json(path)
            json_best = min(json_best, time.perf_counter() - started)
        passes = sum(len(run.passes) for run in trace.runs)
        print(f"load_trace: {load_best:.3f} s ({len(trace.runs)} runs, {passes} passes)")
        print(f"json.loads per line: {json_best:.3f} s")
        print(f"per record: {load_best / lines * 1e6:.1f} us")
        print(f"RESULT seconds={load_best:.3f} ratio_vs_json={load_best / json_best:.2f}")


if __name__ == "__main__":
    main()
