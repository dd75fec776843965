"""Pass alignment and the HTML report on long pipelines: time and memory against the full table.

The runs are pipelines shaped like TileLang's (40 passes with two ``tl.Simplify`` nested in
``tl.LowerTileOp``, repeated), the second with about 1 pass in 80 replaced and its first and last
passes different, so that no common head or tail hides the work. Measured in this process:

- ``irtrace.diff.align_passes`` on two runs of 2,000 passes, against the full weighted table it used
  before (``irtrace.diff.align._weighted_lcs``, still used for short levels) on the same runs: the
  ratio of their times and peak memory (``tracemalloc``);
- ``align_passes`` on two 32,000-pass runs (the full table would need 10^9 cells);
- ``passviz.report.report_html`` of a CUDA and a HIP run of 20,000 passes each.

Run: .venv/bin/python bench/long_pipelines.py [--smoke]
Ends with: RESULT align_2k_ratio=<new/old time> align_2k_mb=<new> full_table_2k_mb=<old>
           align_32k_s=<s> align_32k_mb=<MB> report_20k_s=<s>
``--smoke`` runs each step once on pipelines a tenth as long (for CI: the keys stay, the sizes do not).
"""

from __future__ import annotations

import argparse
import random
import sys
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from irtrace.diff.align import _weighted_lcs, align_passes  # noqa: E402
from irtrace.trace.model import KernelRun, Trace  # noqa: E402
from passviz.report import report_html  # noqa: E402
from tests.passdiff.test_long_alignment import TEXTS, make_run, pipeline_tree  # noqa: E402


def pair(passes: int, target: str = "cuda:sm_90") -> tuple[KernelRun, KernelRun]:
    tree = pipeline_tree(passes // 40)
    other = list(tree)
    rng = random.Random(passes)
    for k in rng.sample(range(len(tree)), len(tree) // 80):
        if other[k][1] is None:
            other[k] = ("tl.Added", None)
    other[0], other[-1] = ("tl.First", None), ("tl.Last", None)
    return make_run(tree, changing=5), make_run(other, "hip:gfx942", changing=5)


def measured(action: Callable[[], Any]) -> tuple[float, float]:
    """Seconds (without tracemalloc) and peak MB (with it) of ``action``."""
    started = time.perf_counter()
    action()
    seconds = time.perf_counter() - started
    tracemalloc.start()
    action()
    peak = tracemalloc.get_traced_memory()[1] / 1e6
    tracemalloc.stop()
    return seconds, peak


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="run once, on pipelines a tenth as long: for CI")
    scale = 10 if parser.parse_args().smoke else 1
    a, b = pair(2_000 // scale)
    top_a = [p for p in a.passes if p.parent is None]
    top_b = [p for p in b.passes if p.parent is None]
    new_s, new_mb = measured(lambda: align_passes(a, b))
    old_s, old_mb = measured(lambda: _weighted_lcs(top_a, top_b))
    if scale > 1:
        print(f"smoke run: every pipeline {scale}x shorter than the RESULT keys say")
    print(
        f"{2_000 // scale:,} passes: align_passes {new_s:.3f} s, {new_mb:.1f} MB; "
        f"full table {old_s:.3f} s, {old_mb:.1f} MB"
    )

    a, b = pair(32_000 // scale)
    started = time.perf_counter()
    rows = align_passes(a, b)
    long_s = time.perf_counter() - started
    _, long_mb = measured(lambda: align_passes(a, b))
    print(f"{32_000 // scale:,} passes: {long_s:.2f} s, {long_mb:.1f} MB, approximate={rows.approximate}")

    a, b = pair(20_000 // scale)
    trace = Trace((a, b), dict(TEXTS), "2026-12-03T00:00:00Z", None)
    started = time.perf_counter()
    page = report_html(trace)
    report_s = time.perf_counter() - started
    print(f"report of 2 x {20_000 // scale:,} passes: {report_s:.2f} s, {len(page) / 1e6:.1f} MB")
    print(
        f"RESULT align_2k_ratio={new_s / old_s:.3f} align_2k_mb={new_mb:.1f} full_table_2k_mb={old_mb:.1f} "
        f"align_32k_s={long_s:.2f} align_32k_mb={long_mb:.1f} report_20k_s={report_s:.2f}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
