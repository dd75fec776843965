"""Where ``irtrace run --no-gpu`` must stop a program, the stop says why and where.

A program that reads the values of a kernel's output (printing its error statistics with
``.tolist()``, as TileLang's examples do after their checks, or counting it with ``bincount``, as
TileLang's fused MoE counts its random experts) cannot go on without a GPU: those
values exist only on one, and a stand-in never guesses them. The message names the program's line
(the oracle: the line in the program's own text) and keeps the kernel built before it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from irtrace.trace.reader import load_trace

from ..conftest import ROOT

PROGRAM = """
import tilelang
import tilelang.language as T
import torch


@tilelang.jit(out_idx=[-1])
def double(N, dtype=T.float32):
    @T.prim_func
    def main(X: T.Tensor((N,), dtype), Y: T.Tensor((N,), dtype)):
        with T.Kernel(T.ceildiv(N, 128), threads=128) as bx:
            for i in T.Parallel(128):
                Y[bx * 128 + i] = X[bx * 128 + i] * 2

    return main


def main():
    x = torch.randn(256, device="cuda")
    y = double(256)(x)
    print("built double", flush=True)
    errors = (y - x * 2).abs().READ
    print("errors", errors)


main()
"""


def run_no_gpu(tmp_path: Path, read: str) -> tuple[subprocess.CompletedProcess[str], Path, int]:
    text = PROGRAM.replace("READ", read)
    script = tmp_path / "program.py"
    script.write_text(text)
    line = next(n for n, words in enumerate(text.splitlines(), 1) if read in words)
    out = tmp_path / "t.jsonl"
    environment = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "irtrace.cli",
            "run",
            "--no-gpu",
            "-q",
            "-o",
            str(out),
            "--",
            "python",
            "program.py",
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=environment,
        timeout=600,
    )
    return done, out, line


@pytest.mark.parametrize("read", ["tolist()", "max().item()", "cpu()", "numpy()", "long().bincount()"])
def test_reading_a_kernels_output_stops_with_its_line_and_why(tmp_path: Path, read: str) -> None:
    done, out, line = run_no_gpu(tmp_path, read)
    assert done.returncode == 7, done.stderr
    assert "built double" in done.stdout
    error = done.stderr.strip().splitlines()[-1]
    assert error.startswith("irtrace: error: the script failed after 1 captured run(s): "), error
    reads = "bincount() is shaped by" if "bincount" in read else "the program reads"
    assert f"program.py:{line}: {reads} the values of a tensor that only a GPU computes" in error
    assert "torch.compile" not in error  # PyTorch's words about its compiler are not this program's
    assert "Traceback" not in done.stderr
    assert [run.kernel for run in load_trace(out).runs] == ["double"]
