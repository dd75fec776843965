"""``irtrace run --no-gpu`` on a kernel library written as published ones are: the device queries
TileLang and torch answer with a GPU (TileLang's compute version, ``torch.cuda.device``, stream
capture) are answered for the stand-in GPU, so the library imports, picks the kernels of the
target asked and runs to its end."""

from __future__ import annotations

from pathlib import Path

from irtrace.trace.reader import load_trace

from ..conftest import DATA
from .test_no_gpu import irtrace

LIBRARY = DATA / "no_gpu_library.py"


def test_a_library_that_asks_tilelang_for_the_gpu_runs_to_its_end(tmp_path: Path) -> None:
    out = tmp_path / "t.jsonl"
    done = irtrace("run", "--no-gpu", "-o", str(out), "--", "python", str(LIBRARY), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "arch 9.0"  # the stand-in for the default target, cuda:sm_90a
    assert lines.index("built double") < lines.index("END")
    (run,) = load_trace(out).runs
    assert run.kernel == "double" and run.status == "ok" and run.instance is not None
    assert run.instance.stand_in


def test_without_no_gpu_the_library_stops_at_its_import(tmp_path: Path) -> None:
    """What the answers are for: on this machine TileLang finds no GPU to ask."""
    done = irtrace("run", "-o", str(tmp_path / "t.jsonl"), "--", "python", str(LIBRARY), cwd=tmp_path)
    assert done.returncode == 7
    assert "No CUDA architecture was specified or GPU detected" in done.stderr
