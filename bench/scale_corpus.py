"""irtrace at the size of a compiler's regression corpus: merge, check and report of N and 4N runs.

The runs are synthetic, but shaped like real ones: each is a copy of a run of a real trace (by
default the coverage trace, every example of ``examples/irtrace.toml`` on every target; recorded
when missing, which takes minutes) with its pass tree, which passes changed the IR, and the size
of every IR text it holds; the texts are made up, each pass's output differing from its input in
a few lines as real ones do, and unique to each synthetic kernel so nothing is shared that a real
corpus would not share. The corpus is written as 16 ``.jsonl.gz`` shards (what a CI matrix
uploads; ``--plain`` for ``.jsonl``) and once more as the baseline, with one changed pass in
every 20th run of the shards.

Each step runs as the CLI a CI job runs, in a fresh process whose peak RSS is measured:
``irtrace merge`` of the 16 shards, ``irtrace check`` of the merged trace against the baseline,
and ``passviz html`` of one kernel's runs on every target. ``growth`` is the per-run cost (all
three steps, CPU time of their processes, which other work on a shared machine does not stretch
as it does the wall time printed beside it) at 4N over the per-run cost at N: 1.0 is linear.
``peak_mb`` is the largest peak RSS of the three steps at 4N, and ``peak_growth`` that peak over
the same at N: the runs are copies of the same real runs, so the largest run is the same at N and
4N, and a peak bounded by the largest run, not by the corpus, gives 1.0.

Run: .venv/bin/python bench/scale_corpus.py [--runs 500] [--profile TRACE] [--keep DIR] [--plain] [--smoke]
``--smoke`` (for CI): N = 16, copied from a small GEMM's run recorded for one target.
Ends with: RESULT runs=<4N> merge_s=<> check_s=<> report_s=<> peak_mb=<> growth=<> peak_growth=<>
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
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from irtrace.trace.model import PHASE_MACHINE, KernelRun, PassRecord  # noqa: E402

SHARDS = 16
CHANGED_EVERY = 20
"""Every 20th run of the new corpus has one pass whose output differs from the baseline's."""

_MEASURED = """
import resource, runpy, sys
out, module, *argv = sys.argv[1:]
sys.argv = [module, *argv]
code = 0
try:
    runpy.run_module(module, run_name="__main__")
except SystemExit as stop:
    code = stop.code if isinstance(stop.code, int) else 1
finally:
    # VmHWM: this process's own peak. ru_maxrss would also count the parent's, copied by fork.
    try:
        with open("/proc/self/status") as status:
            peak = next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))
    except (OSError, StopIteration):
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    usage = resource.getrusage(resource.RUSAGE_SELF)
    with open(out, "w") as handle:
        handle.write(f"{peak} {usage.ru_utime + usage.ru_stime}")
sys.exit(code)
"""


@dataclass(frozen=True)
class Step:
    seconds: float
    peak_mb: float
    cpu_s: float
    """CPU time of the step's process: what other work on a shared machine does not stretch."""


def measured(module: str, *argv: str, ok: tuple[int, ...] = (0,)) -> Step:
    """Run ``python -m module argv`` in a fresh process: wall time and that process's peak RSS."""
    with tempfile.NamedTemporaryFile("r", suffix=".rss") as rss:
        started = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-c", _MEASURED, rss.name, module, *argv],
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        took = time.perf_counter() - started
        if done.returncode not in ok:
            raise SystemExit(f"{module} {' '.join(argv)} exited {done.returncode}: {done.stderr[-2000:]}")
        peak, cpu = rss.read().split()
        return Step(took, int(peak) / 1024, float(cpu))


def profile_runs(path: Path) -> tuple[list[KernelRun], dict[str, int]]:
    """The real runs to copy (machine-code stages left out) and the size of every text they hold."""
    from irtrace.trace.reader import load_trace

    trace = load_trace(path)
    runs = [run for run in trace.runs if run.passes]
    sizes = {sha: len(trace.texts[sha]) for sha in trace.texts}
    return runs, sizes


def _text(kernel: int, serial: int, size: int, base: list[str] | None) -> list[str]:
    """A made-up IR text of about ``size`` characters: ``base`` with a few lines changed."""
    lines = list(base or [])
    if lines:
        for k in range(3):
            where = (serial * 7 + k * 13) % len(lines)
            lines[where] = f"    k{kernel}_{serial} = T.call_extern('tl.op{k}', A[{where}], B[{serial}])"
    used = sum(len(line) + 1 for line in lines)
    while used < size:
        line = (
            f"    for i{len(lines)} in T.serial({len(lines) % 97}): C[i{len(lines)}] = k{kernel} + {serial}"
        )
        lines.append(line)
        used += len(line) + 1
    while lines and used > size + 80:
        used -= len(lines.pop()) + 1
    return lines


def synthetic_run(
    template: KernelRun, sizes: dict[str, int], kernel: int, change: bool
) -> tuple[KernelRun, dict[str, str]]:
    """A copy of ``template`` named ``k<kernel>``, with made-up texts of the template's sizes."""
    from msgspec.structs import replace

    from irtrace.trace.model import text_sha256

    texts: dict[str, str] = {}
    made: dict[str, str] = {}
    current: list[str] = []
    serial = 0

    def text_for(sha: str | None, previous: list[str]) -> tuple[str | None, list[str]]:
        nonlocal serial
        if sha is None:
            return None, previous
        if sha in made:
            return made[sha], previous
        serial += 1
        lines = _text(kernel, serial, sizes.get(sha, 0), previous)
        text = "\n".join(lines) + "\n"
        key = text_sha256(text)
        texts[key] = text
        made[sha] = key
        return key, lines

    passes: list[PassRecord] = []
    changed_one = not change
    input_ir, current = text_for(template.input_ir, current)
    for record in template.passes:
        if record.phase == PHASE_MACHINE:
            continue
        before, current = text_for(record.ir_before, current)
        after, current = text_for(record.ir_after, current)
        if not changed_one and record.changed and after is not None:
            serial += 1
            lines = [*current, f"    # changed by the compiler under test ({serial})"]
            after = text_sha256("\n".join(lines) + "\n")
            texts[after] = "\n".join(lines) + "\n"
            changed_one = True
        passes.append(replace(record, ir_before=before, ir_after=after))
    source, _ = text_for(template.source_sha256, current)
    kernel_file, _ = text_for(template.kernel_file_sha256, [])
    run = replace(
        template,
        kernel=f"k{kernel}",
        spec=f"corpus/k{kernel}.py::k{kernel}()",
        passes=tuple(passes),
        input_ir=input_ir,
        source_sha256=source,
        kernel_file_sha256=kernel_file,
        resources=(),
        bench=None,
        layouts=tuple(layout for layout in template.layouts if layout.after in {p.index for p in passes}),
    )
    return run, texts


def write_corpus(
    folder: Path, runs: int, templates: list[KernelRun], sizes: dict[str, int], suffix: str
) -> list[Path]:
    """The baseline (one file) and the new corpus (``SHARDS`` files); returns the shard paths."""
    from irtrace.trace.writer import TraceWriter

    shards = [TraceWriter(folder / f"shard-{k}{suffix}") for k in range(SHARDS)]
    with TraceWriter(folder / f"baseline{suffix}") as baseline:
        for k in range(runs):
            template = templates[k % len(templates)]
            kernel = k // len(templates) * 1000 + k % len(templates)
            old, old_texts = synthetic_run(template, sizes, kernel, change=False)
            new, new_texts = synthetic_run(template, sizes, kernel, change=k % CHANGED_EVERY == 0)
            baseline.add_run(old, old_texts)
            shards[k % SHARDS].add_run(new, new_texts)
    for shard in shards:
        shard.close()
    return [folder / f"shard-{k}{suffix}" for k in range(SHARDS)]


@dataclass(frozen=True)
class Size:
    runs: int
    merge: Step
    check: Step
    report: Step
    megabytes: float

    @property
    def seconds(self) -> float:
        return self.merge.seconds + self.check.seconds + self.report.seconds

    @property
    def cpu_s(self) -> float:
        return self.merge.cpu_s + self.check.cpu_s + self.report.cpu_s

    @property
    def peak_mb(self) -> float:
        return max(self.merge.peak_mb, self.check.peak_mb, self.report.peak_mb)


def measure(folder: Path, runs: int, templates: list[KernelRun], sizes: dict[str, int], suffix: str) -> Size:
    folder.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    shards = write_corpus(folder, runs, templates, sizes, suffix)
    made = time.perf_counter() - started
    merged = folder / f"merged{suffix}"
    merge = measured("irtrace.cli", "merge", *map(str, shards), "-o", str(merged))
    check = measured(
        "irtrace.cli", "check", str(merged), "--baseline", str(folder / f"baseline{suffix}"),
        "--json", str(folder / "check.json"), "-q", ok=(0, 1),
    )  # fmt: skip
    # The report a reader opens: one kernel on every target it was recorded for.
    report = measured("passviz.cli", "html", str(merged), "-k", "k0", "-o", str(folder / "k0.html"))
    megabytes = merged.stat().st_size / 1e6
    print(
        f"runs={runs}: corpus {megabytes:.0f} MB written in {made:.1f} s; "
        + "; ".join(
            f"{name} {step.seconds:.2f} s wall, {step.cpu_s:.2f} s CPU, {step.peak_mb:.0f} MB"
            for name, step in (("merge", merge), ("check", check), ("report", report))
        ),
        flush=True,
    )
    return Size(runs, merge, check, report, megabytes)


SMOKE_RECORD = (f"{ROOT / 'examples' / 'gemm.py'}::matmul(256, 256, 256)", "-t", "cuda:sm_90")
"""What ``--smoke`` records as its profile: one small kernel for one target."""


def record_profile(path: Path, *, smoke: bool = False) -> None:
    command = [sys.executable, "-m", "irtrace.cli", "record", "-o", str(path)]
    what = SMOKE_RECORD if smoke else ("--manifest", str(ROOT / "examples" / "irtrace.toml"), "-t", "all")
    done = subprocess.run([*command, *what, "--jobs", "2", "-q"], cwd=ROOT)
    # 5: some kernels fail on some targets (the coverage matrix has expected failures); the trace is whole
    if done.returncode not in (0, 5):
        raise SystemExit(f"recording the profile trace {path} failed with exit code {done.returncode}")


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=500, help="N: the small corpus (the large one is 4N)")
    parser.add_argument(
        "--profile", type=Path, default=Path(tempfile.gettempdir()) / "passviz-bench-coverage.jsonl",
        help="the real trace whose runs are copied (recorded from examples/irtrace.toml when missing)",
    )  # fmt: skip
    parser.add_argument("--keep", type=Path, help="write the corpora here and keep them")
    parser.add_argument(
        "--plain", action="store_true", help="plain .jsonl files (default: .jsonl.gz, as CI jobs upload them)"
    )
    parser.add_argument("--smoke", action="store_true", help="N = 16 copies of a small profile: for CI")
    args = parser.parse_args()
    if args.smoke:
        args.runs = 16
        args.profile = Path(tempfile.mkdtemp(prefix="scale-corpus-smoke-")) / "profile.jsonl"
        atexit.register(shutil.rmtree, args.profile.parent, True)
        record_profile(args.profile, smoke=True)
    elif not args.profile.exists():
        record_profile(args.profile)
    templates, sizes = profile_runs(args.profile)
    passes = sum(len(run.passes) for run in templates)
    print(f"profile: {args.profile} ({len(templates)} runs, {passes / len(templates):.0f} passes per run)")
    folder = args.keep or Path(tempfile.mkdtemp(prefix="scale-corpus-"))
    try:
        suffix = ".jsonl" if args.plain else ".jsonl.gz"
        small = measure(folder / "n", args.runs, templates, sizes, suffix)
        shutil.rmtree(folder / "n", ignore_errors=True)
        large = measure(folder / "4n", 4 * args.runs, templates, sizes, suffix)
    finally:
        if args.keep is None:
            shutil.rmtree(folder, ignore_errors=True)
    # Growth from CPU time: on a shared machine the wall time measures the neighbours too.
    growth = (large.cpu_s / large.runs) / (small.cpu_s / small.runs)
    growth_wall = (large.seconds / large.runs) / (small.seconds / small.runs)
    print(f"growth: {growth:.2f} by CPU time, {growth_wall:.2f} by wall time")
    steps = ("merge", "check", "report")
    print(
        "peak RSS, N -> 4N: "
        + ", ".join(
            f"{name} {getattr(small, name).peak_mb:.0f} -> {getattr(large, name).peak_mb:.0f} MB"
            for name in steps
        )
    )
    peak_growth = large.peak_mb / small.peak_mb
    print(
        f"corpus: {small.megabytes:.0f} MB at N, {large.megabytes:.0f} MB at 4N; "
        f"load_average={os.getloadavg()[0]:.1f}"
    )
    print(
        f"RESULT runs={large.runs} merge_s={large.merge.seconds:.2f} check_s={large.check.seconds:.2f} "
        f"report_s={large.report.seconds:.2f} peak_mb={large.peak_mb:.0f} growth={growth:.2f} "
        f"peak_growth={peak_growth:.2f}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
