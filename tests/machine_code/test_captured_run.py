"""``irtrace run --machine-code --bench`` on a script's own eager kernel: the machine code is what
ptxas reports for the source TileLang gave the script; the bench never makes the run fail, and
without a GPU it says why."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from irtrace.trace.model import PHASE_MACHINE, STATUS_OK, text_sha256
from irtrace.trace.reader import load_trace

from ..conftest import DATA, ROOT
from .conftest import oracle_resources, ptxas_verbose

pytestmark = pytest.mark.slow


def test_captured_kernel_gets_machine_code_and_a_bench(tmp_path: Path) -> None:
    import torch

    out, oracle_file = tmp_path / "t.jsonl", tmp_path / "oracle.json"
    options = ["--machine-code", "--bench", "-o", str(out)]
    script = ["python", str(DATA / "captured_call_script.py"), str(oracle_file)]
    done = subprocess.run(
        [sys.executable, "-m", "irtrace.cli", "run", *options, "--", *script],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    oracle = json.loads(oracle_file.read_text())
    (run,) = load_trace(out).runs
    assert (run.status, run.source_sha256) == (STATUS_OK, text_sha256(oracle["source"]))
    assert [p.name for p in run.passes if p.phase == PHASE_MACHINE] == ["ptx", "sass"]
    log, _ = ptxas_verbose(oracle["source"], "sm_90a", tmp_path / "oracle")
    got = {
        item.function: {
            "registers": item.registers,
            "barriers": item.barriers,
            "static_smem": item.static_smem,
            "stack": item.stack,
            "spill_stores": item.spill_stores,
            "spill_loads": item.spill_loads,
        }
        for item in run.resources
    }
    assert got == oracle_resources(log)
    assert run.bench is not None
    # the sizes are the script's own call (it prints them), with or without a GPU
    assert (run.bench.shape, run.bench.shape_from) == (oracle["dynamic"], "captured")
    if torch.cuda.is_available():
        assert run.bench.latency_ms is not None and run.bench.latency_ms > 0, run.bench.error
        assert len(run.bench.samples_ms) == 5 and run.bench.latency_ms == sorted(run.bench.samples_ms)[2]
    else:
        assert run.bench.latency_ms is None
        assert run.bench.error and "no CUDA GPU" in run.bench.error
