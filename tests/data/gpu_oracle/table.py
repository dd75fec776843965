"""The table issue readers ask for: each TileLang example with a GPU trace here, the kernels its
GPU run built, the kernels ``irtrace run --no-gpu`` builds on this machine, and whether they are
identical (the same comparison as ``tests/irtrace/test_no_gpu_oracle.py``, the paged MLA decode's
``workspace`` buffers unnumbered: TileLang numbers them by heap address).

    TILELANG_EXAMPLES=.../tilelang/examples .venv/bin/python tests/data/gpu_oracle/table.py [CASE...]

Prints a Markdown table, then ``RESULT examples=<n> identical=<n>``.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

from tests.irtrace.test_no_gpu_oracle import (  # noqa: E402
    ADDRESS_DEPENDENT,
    ORACLE,
    _tilelang_cases,
    differences,
    load_gz,
    no_gpu_run,
)


def script_of(examples: Path, case: str) -> Path:
    folder, _, name = case.partition("_example_")
    script = examples / folder / f"example_{name}.py"
    if script.exists():
        return script
    return next(iter(examples.rglob(f"example_{name}.py")))


def main() -> int:
    examples = Path(os.environ.get("TILELANG_EXAMPLES", ""))
    if not examples.is_dir():
        print("set TILELANG_EXAMPLES to tile-ai/tilelang's examples folder", file=sys.stderr)
        return 2
    cases = sys.argv[1:] or _tilelang_cases()
    same = 0
    print("| example | kernels on the GPU | kernels with `--no-gpu` | identical |")
    print("|---|---|---|---|")
    for case in cases:
        with tempfile.TemporaryDirectory() as folder:
            script = script_of(examples, case)
            gpu = load_gz(ORACLE / "tilelang" / f"{case}.jsonl.gz", Path(folder))
            try:
                cpu = no_gpu_run(script, [], Path(folder))
                found = differences(
                    gpu, cpu, tuned=False, folder=script.parent.name, renumbered=case in ADDRESS_DEPENDENT
                )
                cpu_kernels = len(cpu.runs)
            except (AssertionError, OSError) as error:
                found, cpu_kernels = [f"no trace: {str(error)[-160:]}"], 0
        same += not found
        verdict = "yes" if not found else "no: " + "; ".join(found)[:200].replace("|", "/")
        print(f"| {case} | {len(gpu.runs)} | {cpu_kernels} | {verdict} |", flush=True)
    print(f"RESULT examples={len(cases)} identical={same}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
