"""A failing pass is timed as its own work: TVM's one-time setup of error backtraces (over a
second, the first time an error crosses its C++ frames in a process) is not charged to it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from irtrace.trace.reader import load_trace

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"


@pytest.mark.sweep  # slow; a sibling covers it in make test
def test_a_failing_checker_is_timed_close_to_a_passing_one(tmp_path: Path) -> None:
    manifest = tmp_path / "irtrace.toml"
    # The failing run comes first in a fresh process: it is the one that met TVM's error path cold.
    manifest.write_text(
        f'[[kernel]]\nspec = "{EXAMPLES / "gemm.py"}::matmul(256, 256, 256)"\ntargets = ["ascend"]\n'
        f'[[kernel]]\nspec = "{EXAMPLES / "ascend_vector.py"}::add_silu()"\ntargets = ["ascend"]\n'
    )
    output = tmp_path / "t.jsonl"
    command = [sys.executable, "-m", "irtrace.cli", "record", "--manifest", str(manifest), "-o", str(output)]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    subprocess.run(command, capture_output=True, text=True, env=env, timeout=600, check=False)
    failing, passing = (
        next(p for p in run.passes if p.name == "VFChecker") for run in load_trace(output).runs
    )
    assert failing.failed and not passing.failed
    # Cold, the failing VFChecker took 1.3-2.4 s here; warm it takes a few ms (the error still
    # crosses TVM's frames twice), against well under 1 ms when it passes.
    assert failing.wall_s < 0.1, (failing.wall_s, passing.wall_s)
    assert passing.wall_s < 0.01
