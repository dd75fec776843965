"""`irtrace record` on a terminal and in a log: progress only on a terminal, and each native
warning kept with the run that logged it (checked against the kernels lowered alone)."""

from __future__ import annotations

import functools
import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest

from irtrace.cli.main import main
from irtrace.trace.reader import load_trace

ROOT = Path(__file__).resolve().parents[2]
GEMM = f"{ROOT / 'tests' / 'data' / 'gemm_k_by_n.py'}::matmul(1024, 1024, 1024)"  # warns on HIP
RMSNORM = f"{ROOT / 'examples' / 'rmsnorm.py'}::rms_norm()"
VECTORIZE = "is lowered as a serial loop"


def _manifest(tmp_path: Path) -> Path:
    path = tmp_path / "irtrace.toml"
    path.write_text(
        f'[[kernel]]\nspec = "{GEMM}"\ntargets = ["cuda:sm_80", "hip:gfx942"]\n'
        f'[[kernel]]\nspec = "{RMSNORM}"\ntargets = ["hip:gfx942"]\n'
    )
    return path


def _record(tmp_path: Path, jobs: int, *, terminal: bool) -> tuple[str, Path]:
    """Run `irtrace record` with stderr on a pseudo-terminal or a pipe; its stderr and trace."""
    output = tmp_path / f"jobs{jobs}.jsonl"
    command = [sys.executable, "-m", "irtrace.cli", "record", "--manifest", str(_manifest(tmp_path))]
    command += ["-o", str(output), "--jobs", str(jobs)]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TERM": "xterm"}
    if not terminal:
        done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=600, check=False)
        assert done.returncode == 0, done.stderr
        return done.stderr, output
    leader, follower = pty.openpty()
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=follower, env=env)
    os.close(follower)
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # the terminal's other end closed: the command is done
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(leader)
    assert process.wait(timeout=600) == 0
    return b"".join(chunks).decode("utf-8", "replace"), output


@functools.cache
def _alone_logs_vectorize(spec: str, target: str) -> bool:
    """The oracle: the kernel lowered alone by plain `tilelang.lower` in a fresh process, no irtrace,
    for ``target`` (the TVM target JSON the trace says the run had)."""
    path, call = spec.split("::")
    script = (
        "import importlib.util, json, tilelang, tvm\n"
        f"spec = importlib.util.spec_from_file_location('k', {path!r})\n"
        "module = importlib.util.module_from_spec(spec); spec.loader.exec_module(module)\n"
        f"target = tvm.target.Target(json.loads({target!r}))\n"
        f"with target: tilelang.lower(module.{call}, target=target)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr
    return VECTORIZE in done.stderr


# with the sweeps (26-28 s each on 2 cores), to keep make test within 10 minutes; test_no_progress_in_a_log
# checks in make test that each warning is logged with its own run
@pytest.mark.parametrize(
    "jobs", [pytest.param(1, marks=pytest.mark.sweep), pytest.param(2, marks=pytest.mark.sweep)]
)
def test_progress_on_a_terminal_and_warnings_on_their_run(tmp_path: Path, jobs: int) -> None:
    shown, output = _record(tmp_path, jobs, terminal=True)
    assert "recording" in shown and "3/3" in shown, shown
    assert "matmul on hip:gfx942" in shown
    assert "warning: matmul on hip:gfx942: T.vectorized loop" in shown
    trace = load_trace(output)
    logged = {run.key: any(VECTORIZE in w for w in run.warnings) for run in trace.runs}
    alone = {
        run.key: _alone_logs_vectorize(GEMM if run.kernel == "matmul" else RMSNORM, run.target_detail)
        for run in trace.runs
    }
    assert logged == alone
    assert alone == {
        ("matmul", "cuda:sm_80"): False,
        ("matmul", "hip:gfx942"): True,
        ("rms_norm", "hip:gfx942"): False,
    }


def test_no_progress_in_a_log(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    logged, output = _record(tmp_path, 1, terminal=False)
    assert "\x1b[" not in logged and "recording" not in logged and "ETA" not in logged, logged
    assert logged.count("warning: matmul on hip:gfx942: T.vectorized loop") == 1, logged
    hip = next(run for run in load_trace(output).runs if run.key == ("matmul", "hip:gfx942"))
    assert any(VECTORIZE in w for w in hip.warnings)
    assert main(["show", str(output), "-k", "matmul", "-t", "hip:gfx942"]) == 0
    assert "warning: T.vectorized loop" in capsys.readouterr().out
    assert main(["show", str(output), "-k", "matmul", "-t", "cuda:sm_80"]) == 0
    assert "warning:" not in capsys.readouterr().out


@pytest.mark.sweep  # slow; a sibling covers it in make test
def test_a_multi_line_warning_is_kept_whole_with_its_run(tmp_path: Path) -> None:
    """tests/data/bad_layout.py's buffer-init check logs a warning of several lines (source
    excerpt, advice): the run keeps all of it, and the terminal gets its first line once."""
    spec = f"{ROOT / 'tests' / 'data' / 'bad_layout.py'}::conflicting_layouts()"
    output = tmp_path / "bad.jsonl"
    command = [sys.executable, "-m", "irtrace.cli", "record", spec, "-t", "cuda:sm_90", "-o", str(output)]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300, check=False)
    (run,) = load_trace(output).runs
    (warning,) = run.warnings
    # the oracle: the same kernel lowered alone by plain tilelang, its stderr as logged
    path, call = spec.split("::")
    script = (
        "import importlib.util, json, tilelang, tvm\n"
        f"spec = importlib.util.spec_from_file_location('k', {path!r})\n"
        "module = importlib.util.module_from_spec(spec); spec.loader.exec_module(module)\n"
        f"target = tvm.target.Target(json.loads({run.target_detail!r}))\n"
        "try:\n"
        f"    with target: tilelang.lower(module.{call}, target=target)\n"
        "except Exception: pass\n"
    )
    alone = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300, check=False
    )
    assert warning in alone.stderr and len(warning.splitlines()) > 3
    assert warning.splitlines()[-1] not in done.stderr  # the advice is in the trace, not on the terminal
    assert done.stderr.count(f"warning: conflicting_layouts on cuda:sm_90: {warning.splitlines()[0]}") == 1
