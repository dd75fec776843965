"""TileLang's target="auto" on a machine without a GPU: files and scripts written for a GPU
machine still load, lowering for the target the user asked for (here there is no GPU)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from irtrace.cli.main import main
from irtrace.trace.model import STATUS_OK
from irtrace.trace.reader import load_trace

from ..conftest import DATA, ROOT

KERNEL_FILE = DATA / "auto_target_kernel.py"


def irtrace(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "irtrace.cli", *args], capture_output=True, text=True, cwd=ROOT, timeout=300
    )


def test_plain_tilelang_finds_no_target_here() -> None:
    """The premise: without irtrace, importing the file fails on this GPU-less machine."""
    done = subprocess.run([sys.executable, str(KERNEL_FILE)], capture_output=True, text=True, timeout=300)
    assert done.returncode != 0
    assert "No registered target detector found an available target" in done.stderr


def test_record_loads_a_file_that_lowers_at_import(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    # in process: the file's import is what is checked, not a process boundary (the run tests
    # below start irtrace as users do); the premise holds in this process too
    from tilelang.backend.target import determine_target

    with pytest.raises(ValueError, match="No registered target detector found an available target"):
        determine_target("auto", return_object=True)
    out = tmp_path / "t.jsonl"
    code = main(["record", f"{KERNEL_FILE}::scale(N=512)", "-t", "hip:gfx942", "-o", str(out)])
    assert code == 0, capsys.readouterr().err
    (run,) = load_trace(out).runs
    assert (run.target, run.status) == ("hip:gfx942", STATUS_OK)


def test_run_captures_a_script_lowering_for_auto(tmp_path) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "t.jsonl"
    done = irtrace("run", "--auto-target", "hip:gfx942", "-o", str(out), "--", "python", str(KERNEL_FILE))
    assert done.returncode == 0, done.stderr
    runs = load_trace(out).runs
    # target="auto" meant --auto-target, so the script's own lowering is that target's
    assert [(r.target, r.status) for r in runs] == [("hip:gfx942", STATUS_OK)]
    assert "hip_runtime.h" in (load_trace(out).kernel_source(runs[0]) or "")


def test_run_auto_stays_cuda_and_t_adds_targets(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """-t adds a target: the script's own lowering keeps target="auto" (cuda:sm_90a here), and
    the kernel is lowered again for each -t target, except the one it already has."""
    out = tmp_path / "t.jsonl"
    done = irtrace(
        "run", "-t", "hip:gfx942", "-t", "cuda:sm_90a", "-o", str(out), "--", "python", str(KERNEL_FILE)
    )
    assert done.returncode == 0, done.stderr
    trace = load_trace(out)
    assert [(r.target, r.status) for r in trace.runs] == [
        ("cuda:sm_90a", STATUS_OK),
        ("hip:gfx942", STATUS_OK),
    ]
    assert "hip_runtime.h" in (trace.kernel_source(trace.runs[1]) or "")
    assert "Warning: Unable to detect ROCm version" not in done.stderr
