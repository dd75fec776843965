"""``make demo``, as a newcomer runs it: every bundled example on every backend without a warning
from TileLang about the examples, then the slowest passes and three commands to try next, each of
which works on the demo's trace. Records every example on every target: a ``sweep``."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from irtrace.trace.reader import load_trace

from .conftest import ROOT

pytestmark = pytest.mark.sweep

HIP_PV_GEMM = "flash_attention_fwd on hip:"
"""The one warning left: flash attention's P·V GEMM reads V (seq x dim, its natural layout) along
K, which HIP's matrix-core loads cannot vectorize; storing V transposed would change the kernel."""


def test_make_demo_ends_with_three_commands_that_work_on_its_trace(tmp_path: Path) -> None:
    venv = Path(sys.prefix)
    trace = tmp_path / "demo.trace.jsonl"
    done = subprocess.run(
        ["make", "-s", "demo", f"VENV={venv}", f"TRACE={trace}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    warnings = [line for line in done.stderr.splitlines() if line.startswith("warning:")]
    assert all(HIP_PV_GEMM in line for line in warnings), warnings
    lines = done.stdout.rstrip().splitlines()
    assert lines[-4] == "Try next:"
    # the table before it is short: ten passes and one line for the rest
    assert re.fullmatch(
        r"\.\.\. and \d+ more passes, [\d.]+% of the time \(--top 0 lists them all\)", lines[-6]
    )
    commands = [shlex.split(line.split("  #")[0]) for line in lines[-3:]]
    assert [Path(c[0]).name for c in commands] == ["passviz", "passviz", "irtrace"]
    assert all(c[1] == str(trace) or c[2] == str(trace) for c in commands)
    assert load_trace(trace).runs  # what `passviz TRACE` browses (a terminal app: not run here)
    env = {k: v for k, v in os.environ.items() if k != "IRTRACE"}
    for command in commands[1:]:
        ran = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, env=env, timeout=600)
        assert ran.returncode == 0, (command, ran.stderr[-2000:])
    report = Path(commands[1][commands[1].index("-o") + 1])
    assert report.stat().st_size > 0 and shutil.which(commands[0][0]) is not None
    shown = subprocess.run(commands[2], cwd=ROOT, capture_output=True, text=True, env=env, timeout=600)
    assert "C_local" in shown.stdout and "cuda:sm_90a" in shown.stdout
