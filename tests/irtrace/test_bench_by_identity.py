"""``irtrace run --bench`` finds the function it benches by identity, not by the name the run shows:
a PrimFunc called ``main`` is recorded under its factory's name (``scale``, ``shift``), and the
bench must still find it. Without a GPU every bench says "no CUDA GPU"; before the fix the renamed
ones said ``KeyError: 'scale'``. The oracle of the names is the script's own ``called NAME`` lines."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from irtrace.trace.reader import load_trace

from ..conftest import DATA, ROOT

pytestmark = pytest.mark.skipif(
    subprocess.run([sys.executable, "-c", "import torch; assert not torch.cuda.is_available()"]).returncode
    != 0,
    reason="checks the bench's answer on a machine without a GPU",
)


def test_kernels_renamed_from_main_reach_the_bench(tmp_path: Path) -> None:
    out = tmp_path / "t.jsonl"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "irtrace.cli",
            "run",
            "--bench",
            "-o",
            str(out),
            "--",
            "python",
            "main_factories.py",
        ],
        capture_output=True,
        text=True,
        cwd=DATA,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    called = [line.split()[1] for line in done.stdout.splitlines() if line.startswith("called ")]
    runs = load_trace(out).runs
    renamed = [run for run in runs if run.kernel != "main"]
    assert (
        [run.kernel for run in renamed] == [name for name in called if name != "main"] == ["scale", "shift"]
    )
    for run in runs:
        assert run.bench is not None
        assert run.bench.error is not None and run.bench.error.startswith(
            "not benched: torch sees no CUDA GPU"
        ), (
            run.kernel,
            run.bench.error,
        )
