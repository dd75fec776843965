"""Wall time to record every bundled example on every target with ``--jobs 1`` and ``--jobs 2``.

Runs ``irtrace record --manifest examples/irtrace.toml -t all`` as CI would, start-up included,
first with one process and then with two workers, in one run of this script; checks that both
traces hold the same runs (passes, IR and kernel sources) and prints both times and their
ratio. Before timing, ``import tilelang`` runs once so that neither recording pays for a cold
file cache; with ``--rounds R`` the two alternate R times and each keeps its fastest. The
recording with workers orders its runs longest first by the times of the one-process trace
(``--order-from``), as a CI job with a previous trace at hand would. Ends with
``RESULT speedup=<x>`` (time with --jobs 1 over time with --jobs N).

``--corpus`` records the regression corpus ``bench/corpus.toml`` instead: every example on every
target under 7 pass configs, 1,022 runs, the size at which the pool's efficiency matters (the
start-up a process pays once is a small part of it). It takes about an hour with ``--jobs 1`` on
two cores: run it on a machine with many.

    .venv/bin/python bench/record_scale.py [--jobs 2] [--rounds 1] [--manifest examples/irtrace.toml] [-t all]
    .venv/bin/python bench/record_scale.py --corpus --jobs 8
    .venv/bin/python bench/record_scale.py --corpus --shard 1/4 --jobs 8

``--shard I/N`` records one slice of the runs in both recordings (``irtrace record --shard``).
``--smoke`` (for CI) records two small kernels for one target instead of the manifest.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def record(
    manifest: str,
    targets: list[str],
    jobs: int,
    output: Path,
    order_from: Path | None = None,
    *,
    shard: str | None = None,
) -> float:
    """Seconds ``irtrace record`` takes, as a command (interpreter start-up included)."""
    command = [sys.executable, "-m", "irtrace.cli", "record", "--manifest", manifest, "-q", "-o", str(output)]
    for target in targets:
        command += ["-t", target]
    command += ["--jobs", str(jobs)]
    if order_from is not None:
        command += ["--order-from", str(order_from)]
    if shard is not None:
        command += ["--shard", shard]
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, env=env)
    elapsed = time.perf_counter() - started
    if done.returncode not in (0, 5):  # 5: some kernels fail to lower on some targets, as expected
        raise SystemExit(f"irtrace record --jobs {jobs} failed ({done.returncode}):\n{done.stderr[-2000:]}")
    return elapsed


def smoke_manifest(folder: Path) -> str:
    """A manifest of two small kernels for one target, written into ``folder``."""
    examples = ROOT / "examples"
    manifest = folder / "smoke.toml"
    manifest.write_text(
        f'[[kernel]]\nspec = "{examples / "gemm.py"}::matmul(256, 256, 256)"\ntargets = ["cuda:sm_90"]\n\n'
        f'[[kernel]]\nspec = "{examples / "rmsnorm.py"}::rms_norm(256, 256)"\ntargets = ["cuda:sm_90"]\n'
    )
    return str(manifest)


def same_runs(first: Path, second: Path) -> tuple[int, list[str]]:
    """How many runs the traces hold, and the runs where they differ (times aside)."""
    from irtrace.trace.reader import load_trace

    a, b = load_trace(first), load_trace(second)
    differ = []
    for run_a, run_b in zip(a.runs, b.runs, strict=False):
        if _facts(run_a) != _facts(run_b):
            differ.append(f"{run_a.kernel} on {run_a.target}")
    if len(a.runs) != len(b.runs):
        differ.append(f"{len(a.runs)} runs against {len(b.runs)}")
    return len(a.runs), differ


def _facts(run: Any) -> tuple[Any, ...]:
    return (run.kernel, run.target, run.status, run.source_sha256, [p.ir_after for p in run.passes])


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--jobs", type=int, default=2, help="workers of the second recording (default 2)")
    parser.add_argument("--rounds", type=int, default=1, help="alternate the two recordings R times")
    parser.add_argument("--manifest", default=str(ROOT / "examples" / "irtrace.toml"))
    parser.add_argument("-t", "--target", action="append", default=None, help="default: all")
    parser.add_argument(
        "--corpus", action="store_true", help="record bench/corpus.toml (1,022 runs) with its own targets"
    )
    parser.add_argument(
        "--shard", help="record only shard I/N of the runs (irtrace record --shard), e.g. 1/25 of --corpus"
    )
    parser.add_argument("--smoke", action="store_true", help="two small kernels for one target: for CI")
    args = parser.parse_args()
    targets = args.target or ["all"]
    if args.corpus:
        args.manifest, targets = str(ROOT / "bench" / "corpus.toml"), args.target or []

    subprocess.run([sys.executable, "-c", "import tilelang"], capture_output=True, check=True)  # warm caches
    times: dict[int, list[float]] = {1: [], args.jobs: []}
    with tempfile.TemporaryDirectory(prefix="record-scale-") as folder:
        if args.smoke:
            args.manifest, targets = smoke_manifest(Path(folder)), []
        outputs = {jobs: Path(folder) / f"jobs{jobs}.jsonl" for jobs in times}
        one = outputs[1]
        for _ in range(args.rounds):
            for jobs in times:
                # --jobs N takes the longest runs first, by the times of the --jobs 1 trace
                previous = one if jobs > 1 else None
                elapsed = record(args.manifest, targets, jobs, outputs[jobs], previous, shard=args.shard)
                times[jobs].append(elapsed)
                print(f"--jobs {jobs}: {elapsed:7.1f} s", flush=True)
        runs, differ = same_runs(one, outputs[args.jobs])
    serial, parallel = min(times[1]), min(times[args.jobs])
    speedup = serial / parallel
    print(f"fastest of {args.rounds}: --jobs 1 {serial:.1f} s, --jobs {args.jobs} {parallel:.1f} s")
    cpus = len(os.sched_getaffinity(0))
    print(f"{runs} runs ({args.manifest} on {' '.join(targets) or 'its'} targets), {cpus} CPUs to run on")
    if differ:
        print(f"the traces differ in: {'; '.join(differ)}")
    else:
        print("both traces hold the same runs: passes, IR texts and kernel sources")
    print(f"speedup with --jobs {args.jobs}: {speedup:.2f}x")
    print(f"RESULT speedup={speedup:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
