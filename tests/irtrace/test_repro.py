"""``irtrace repro``: the script it writes, run in a fresh process, fails with the error the
compiler gives when the kernel is lowered plainly for that target."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from irtrace.ci.coverage import error_headline
from irtrace.ci.repro import mask_targets
from irtrace.trace.reader import load_trace

from ..conftest import EXAMPLES, ROOT, SMALL_GEMM, record_to_file
from ..passdiff.oracle import load_kernel_module

CASES = [
    # (spec, target, failing step, kernel file, factory call)
    (SMALL_GEMM, "webgpu", "tl.LayoutInference", "gemm.py", ("matmul", (256, 256, 256))),
    (f"{EXAMPLES / 'hopper_tma_gemm.py'}::hopper_ws_gemm()", "hip:gfx942", "codegen", "hopper_tma_gemm.py",
     ("hopper_ws_gemm", ())),
]  # fmt: skip


def irtrace(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.run(
        [sys.executable, "-m", "irtrace.cli", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
    )


def _message(error_text: str) -> str:
    """The error's headline without its exception type (``tvm.error.InternalError`` in a traceback,
    ``InternalError`` in a trace) and with the target JSON masked."""
    headline = error_headline(mask_targets(error_text))
    kind, separator, rest = headline.partition(": ")
    return rest if separator and kind.replace(".", "").replace("_", "").isalnum() else headline


def _plain_lowering_error(file: str, factory: tuple[str, tuple[Any, ...]], target_name: str) -> str:
    """What ``tilelang.lower`` raises for the kernel and target, without irtrace."""
    import tilelang
    import tvm

    from irtrace.lowering.tvm_targets import make_tvm_target
    from irtrace.targets.backends import get_target

    target = make_tvm_target(get_target(target_name))
    name, args = factory
    with target:
        func = getattr(load_kernel_module(EXAMPLES / file), name)(*args)
    # any compiler error is the oracle
    with pytest.raises(Exception) as raised, tvm.transform.PassContext(opt_level=3), target:
        tilelang.lower(func, target=target)
    return str(raised.value)


@pytest.mark.parametrize(
    ("spec", "target", "step", "file", "factory"),
    # with the sweeps (12 s and more each); repro runs in make test through
    # tests/reliability/test_trace_is_data.py (hostile fields written as literals)
    [pytest.param(*CASES[0], marks=pytest.mark.sweep), pytest.param(*CASES[1], marks=pytest.mark.sweep)],
    ids=["pass", "codegen"],
)
def test_repro_script_reproduces_the_failure(
    spec: str, target: str, step: str, file: str, factory: tuple[str, tuple[Any, ...]], tmp_path: Path
) -> None:
    trace_path = tmp_path / "failing.jsonl"
    record_to_file(trace_path, [spec], [target])
    (run,) = load_trace(trace_path).runs
    assert run.status == "failed"

    done = irtrace("repro", trace_path, "--kernel-file", EXAMPLES / file, "-o", "repro.py", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert f"wrote repro.py: {step} fails alone" in done.stdout
    script = (tmp_path / "repro.py").read_text()
    assert "irtrace" not in script.split('"""', 2)[2].split("# The module")[0]  # needs only tilelang

    clean_env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    folder = tmp_path / "elsewhere"
    folder.mkdir()
    ran = subprocess.run(
        [sys.executable, str(tmp_path / "repro.py")],
        capture_output=True,
        text=True,
        cwd=folder,
        env=clean_env,
    )
    assert ran.returncode == 1, ran.stdout + ran.stderr
    assert "does not print as recorded" not in ran.stderr  # the rebuilt module is the trace's
    raised = ran.stderr.strip().splitlines()[-1]
    expected = _message(_plain_lowering_error(file, factory, target))
    assert _message(raised) == expected
    assert _message(run.error or "") == expected


def test_repro_of_a_run_that_lowered_is_a_usage_error(tmp_path: Path) -> None:
    trace_path = tmp_path / "ok.jsonl"
    record_to_file(trace_path, [SMALL_GEMM], ["cuda:sm_90"])
    done = irtrace("repro", trace_path, cwd=tmp_path)
    assert done.returncode == 8 and "no run that failed to lower" in done.stderr
    assert not list(tmp_path.glob("repro_*.py"))
