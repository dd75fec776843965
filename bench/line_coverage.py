"""How many of the lines an author wrote the source maps follow: at the first pass, after
``tl.LowerTileOp`` and in the CUDA/HIP source, over real kernels on real pipelines.

The denominator comes from the kernel's file, never from the spans: with Python's ``ast``, every
call statement, assignment and loop header inside a ``with T.Kernel(...)`` block of the kernel's
function (``tests/source_lines_oracle.py``; ORACLES.md, "Source maps"). A line is covered at a
stage when the trace's map names IR (or source) lines for it there; it is *wrong* when those lines
mention none of the buffers the Python line uses (lines that use no buffer are not judged).

A line that ran and built no statement but binds a name (``loop_range = T.ceildiv(...)``) is
followed at a stage when the lines reading its value are (the IR that stands for it in every view),
and judged by their IR. A line the trace says the frontend did not run (a branch Python left out)
counts as followed only when an independent oracle agrees: the bench builds each kernel for each
target in a child process of its own under ``sys.settrace`` and notes the kernel file's lines
Python ran (the frontend's rewritten code keeps the file's name and line numbers); ``not_run``
counts those lines.

Each kernel is recorded by ``irtrace record --source-map`` in a subprocess (a kernel that fails to
lower on a target is reported and left out). TileLang's own examples are read from
``--tilelang-examples`` (a checkout's ``examples`` folder) when given, copied to a temporary folder.

    .venv/bin/python bench/line_coverage.py [--smoke] [--tilelang-examples DIR] [-t cuda:sm_90a ...]

Ends with ``RESULT lines=<n> at_first_pass=<%> at_lower_tile_op=<%> in_source=<%> wrong=<n>
not_run=<n>``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from irtrace.trace.reader import load_trace  # noqa: E402
from tests.source_lines_oracle import StageCoverage, run_coverage  # noqa: E402

ORACLE_FLAG = "--python-ran-lines"
"""Run as a child: build one kernel for each target under ``sys.settrace``, print the lines run."""

OURS = [
    ("examples/gemm.py", "matmul(1024, 1024, 1024)"),
    ("examples/flash_attention.py", "flash_attention_fwd()"),
    ("examples/rmsnorm.py", "rms_norm()"),
    ("examples/hopper_tma_gemm.py", "hopper_ws_gemm()"),
    ("examples/autotune_gemm.py", "matmul_relu(1024, 1024, 1024)"),
    ("examples/eager_gemm.py", "token_matmul(N=4096, K=1024)"),
    ("examples/fp8_quant.py", "per_token_quant(1 << 10, HIDDEN, out_dtype=determine_fp8_type())"),
    ("tests/data/row_reduce.py", "row_reduce()"),
    ("tests/data/fragment_scale.py", "scale_rows()"),
    ("tests/data/gemm_k_by_n.py", "matmul(1024, 1024, 1024)"),
    ("tests/data/two_workspaces.py", "row_stats()"),
]
"""Our kernels, with the arguments our manifests and tests give them."""
THEIRS = [
    ("gemm/example_gemm.py", "matmul(M=1024, N=1024, K=1024, block_M=128, block_N=128, block_K=32)"),
    ("norm/rms_norm.py", "rms_norm(M=1024, N=1024, blk_m=1)"),
    (
        "elementwise/example_elementwise_add.py",
        "elementwise_add(M=1024, N=1024, block_M=32, block_N=32, "
        "in_dtype=T.float32, out_dtype=T.float32, threads=128)",
    ),
]
"""TileLang's own examples (their ``examples`` folder), with sizes given by keyword."""
SMOKE = [("tests/data/row_reduce.py", "row_reduce()"), ("examples/gemm.py", "matmul(256, 256, 256)")]
TARGETS = ["cuda:sm_90a", "cuda:sm_80", "hip:gfx942"]


def spec_of(path: Path, call: str) -> str:
    return f"{path}::{call}"


def record(spec: str, target: str, output: Path, timeout: float) -> str | None:
    """Record ``spec`` on ``target`` with source maps; the error line when it fails."""
    command = [
        sys.executable,
        "-m",
        "irtrace.cli",
        "record",
        spec,
        "-t",
        target,
        "--source-map",
        "-o",
        str(output),
    ]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, cwd=ROOT)
    except subprocess.TimeoutExpired:
        return f"timed out after {timeout:.0f} s"
    if not output.exists():
        return (done.stderr.strip().splitlines() or ["no trace"])[-1]
    return None


def python_ran_lines(spec: str, targets: list[str]) -> dict[str, list[int]]:
    """In this process: build ``spec`` for each target as ``irtrace record`` would (the loader,
    inside the target's context) with ``sys.settrace`` on, and return per target the lines of the
    kernel's file Python ran (an empty list: the build failed)."""
    from irtrace.lowering.api import RecordRequest, bind_unit, lowering_units
    from irtrace.lowering.loader import build_primfunc
    from irtrace.targets.specs import parse_spec

    path = os.path.realpath(spec.split("::", 1)[0])
    found: dict[str, list[int]] = {}
    request = RecordRequest(parse_spec(spec), targets=tuple(targets))
    lines: set[int] = set()

    def local(frame: object, event: str, arg: object) -> object:
        if event == "line":
            lines.add(frame.f_lineno)  # type: ignore[attr-defined]
        return local

    def calls(frame: object, event: str, arg: object) -> object:
        code = frame.f_code  # type: ignore[attr-defined]
        return local if os.path.realpath(code.co_filename) == path else None

    for unit in lowering_units(request):
        lines.clear()
        try:
            call = bind_unit(unit)
            sys.settrace(calls)
            try:
                build_primfunc(unit.kernel, unit.spec, unit.tvm_target, unit.loaded.path, call)
            finally:
                sys.settrace(None)
        except Exception:
            lines.clear()
        found[unit.target.name] = sorted(lines)
    return found


def oracle_ran(spec: str, targets: list[str], timeout: float) -> dict[str, set[int]]:
    """``python_ran_lines`` in a child process of its own (nothing cached from another kernel)."""
    command = [sys.executable, str(Path(__file__).resolve()), ORACLE_FLAG, spec, *targets]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, cwd=ROOT)
        answer = json.loads(done.stdout.strip().splitlines()[-1])
    except (subprocess.TimeoutExpired, IndexError, ValueError):
        return {}
    return {target: set(lines) for target, lines in answer.items() if lines}


def main() -> int:
    if len(sys.argv) > 2 and sys.argv[1] == ORACLE_FLAG:
        print(json.dumps(python_ran_lines(sys.argv[2], sys.argv[3:])))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--smoke", action="store_true", help="two small kernels on cuda:sm_90a")
    parser.add_argument("--tilelang-examples", type=Path, help="TileLang's examples folder")
    parser.add_argument("-t", "--target", action="append", help=f"targets (default {' '.join(TARGETS)})")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per recording")
    parser.add_argument("--only", action="append", help="only kernel files whose name contains this")
    args = parser.parse_args()
    targets = args.target or (["cuda:sm_90a"] if args.smoke else TARGETS)
    with tempfile.TemporaryDirectory(prefix="line-coverage-") as folder:
        kernels: list[tuple[Path, str]] = [
            (ROOT / path, call) for path, call in (SMOKE if args.smoke else OURS)
        ]
        if args.tilelang_examples is not None and not args.smoke:
            for relative, call in THEIRS:
                source = args.tilelang_examples / relative
                if source.is_file():
                    copy = Path(folder) / "theirs" / relative
                    copy.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy(source, copy)
                    kernels.append((copy, call))
        if args.only:
            kernels = [(path, call) for path, call in kernels if any(part in path.name for part in args.only)]
        total = StageCoverage()
        for number, (path, call) in enumerate(kernels):
            python_ran = oracle_ran(spec_of(path, call), targets, args.timeout)
            for target in targets:
                output = Path(folder) / f"{number}-{target.replace(':', '_')}.jsonl"
                failed = record(spec_of(path, call), target, output, args.timeout)
                if failed is not None:
                    print(f"{path.name} {target}: not lowered: {failed[:160]}")
                    continue
                trace = load_trace(output)
                for run in trace.runs:
                    if run.status != "ok":
                        print(f"{path.name} {target}: {run.status}: {(run.error or '')[:160]}")
                        continue
                    found = run_coverage(
                        trace, run, path.read_text(encoding="utf-8"), python_ran=python_ran.get(target)
                    )
                    total.add(found)
                    print(f"{path.name} {target}: {found.describe()}")
    print(
        f"RESULT lines={total.lines} at_first_pass={total.percent(total.at_first_pass)} "
        f"at_lower_tile_op={total.percent(total.at_lower_tile_op)} "
        f"in_source={total.percent(total.in_source)} wrong={total.wrong} not_run={total.not_run}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
