"""Size and build time of the HTML report (`passviz html`) of the coverage trace.

The coverage trace is every example of ``examples/irtrace.toml`` on every target (about 150 runs):
``irtrace record --manifest examples/irtrace.toml -t all -o coverage.jsonl``. It takes minutes to
record, so it is given with ``--trace`` (or recorded there when the file is missing).

Ends with ``RESULT mb=<x> seconds=<y>``: mb is the page's size in MB (10^6 bytes); seconds the
best of ``--repeat`` builds, each from reading the trace file to the page written (what
``passviz html`` does), measured in this process. ``load_seconds`` says how much of it is reading
the trace.

``--smoke`` (for CI) records a small GEMM for one target into a temporary trace and builds once.
"""

from __future__ import annotations

import argparse
import atexit
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


SMOKE_RECORD = (f"{ROOT / 'examples' / 'gemm.py'}::matmul(256, 256, 256)", "-t", "cuda:sm_90", "-q")
"""What ``--smoke`` records instead of the coverage trace: one small kernel for one target."""


def record(path: Path, *, smoke: bool = False) -> None:
    """The coverage trace (or the smoke run's small one), recorded through TileLang's real pipelines."""
    from irtrace.base.errors import ExitCode

    command = [sys.executable, "-m", "irtrace.cli", "record", "-o", str(path)]
    what = SMOKE_RECORD if smoke else ("--manifest", str(ROOT / "examples" / "irtrace.toml"), "-t", "all")
    done = subprocess.run([*command, *what, "--jobs", "2"], cwd=ROOT)
    # exit 5 (ExitCode.LOWERING): some example fails to lower on some target (the `c` target has
    # no SIMT threads); those runs are recorded, and the report shows them: still a whole trace.
    if done.returncode not in (ExitCode.OK, ExitCode.LOWERING):
        raise SystemExit(f"report_scale: recording the coverage trace failed (exit {done.returncode})")


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--trace", type=Path, default=Path(tempfile.gettempdir()) / "passviz-bench-coverage.jsonl"
    )
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", type=Path, default=Path(tempfile.gettempdir()) / "passviz-bench-report.html")
    parser.add_argument("--smoke", action="store_true", help="a small trace recorded here, one build: for CI")
    args = parser.parse_args()
    if args.smoke:
        folder = Path(tempfile.mkdtemp(prefix="report-scale-smoke-"))
        atexit.register(shutil.rmtree, folder, True)
        args.trace, args.out, args.repeat = folder / "smoke.jsonl", folder / "report.html", 1
        record(args.trace, smoke=True)
    elif not args.trace.exists():
        record(args.trace)

    from irtrace.trace.reader import load_trace
    from passviz.report import write_report

    builds, loads, cpu = [], [], []
    for _ in range(args.repeat):
        started, started_cpu = time.perf_counter(), time.process_time()
        trace = load_trace(args.trace)
        loaded = time.perf_counter()
        write_report(trace, args.out)
        builds.append(time.perf_counter() - started)
        cpu.append(time.process_time() - started_cpu)
        loads.append(loaded - started)
    size = args.out.stat().st_size
    print(f"trace: {args.trace} ({args.trace.stat().st_size / 1e6:.1f} MB, {len(trace.runs)} runs)")
    print(f"builds: {', '.join(f'{s:.2f}' for s in builds)} s; load_seconds={min(loads):.2f}")
    # Other work on the machine stretches the wall time; the CPU time of this process does not.
    print(f"cpu_seconds={min(cpu):.2f} load_average={os.getloadavg()[0]:.1f} cores={os.cpu_count()}")
    print(f"RESULT mb={size / 1e6:.2f} seconds={min(builds):.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
