"""``irtrace reduce``: the reproducer it writes holds fewer than a third of the statements the
failing pass received, and run in a fresh process it fails with the compiler's own error.

Oracles, computed here by other routes: the module the pass received is caught by a plain TVM
instrument around ``tilelang.lower`` (no irtrace); the reduced module is read out of the
script's ``MODULE_JSON`` literal; both are counted with ``post_order_visit``; the error to match
is what ``tilelang.lower`` raises for the kernel and target."""

from __future__ import annotations

import ast
import base64
import os
import re
import subprocess
import sys
import zlib
from pathlib import Path
from typing import Any

import pytest

from irtrace.ci.coverage import error_headline
from irtrace.ci.repro import mask_targets
from irtrace.cli.main import main
from irtrace.trace.model import Trace

from ..conftest import EXAMPLES, SMALL_GEMM, record_to_file
from ..passdiff.oracle import load_kernel_module

CASES = {
    # name: (spec, target, kernel file, factory call, failing pass)
    "gemm_webgpu": (SMALL_GEMM, "webgpu", "gemm.py", ("matmul", (256, 256, 256)), "tl.LayoutInference"),
    "flash_attention_sm70": (f"{EXAMPLES / 'flash_attention.py'}::flash_attention_fwd()", "cuda:sm_70",
                             "flash_attention.py", ("flash_attention_fwd", ()), "tl.LayoutInference"),
}  # fmt: skip


def _count_statements(module: Any) -> int:
    import tvm
    from tvm.tirx.stmt_functor import post_order_visit

    seen: list[Any] = []
    for _, function in module.functions.items():
        post_order_visit(
            function.body, lambda node: seen.append(node) if isinstance(node, tvm.tirx.Stmt) else None
        )
    return len(seen)


def _plain_lowering(case: str) -> tuple[Any, str]:
    """The module the failing pass receives and the error ``tilelang.lower`` raises, without irtrace."""
    import tilelang
    import tvm

    from irtrace.lowering.tvm_targets import make_tvm_target
    from irtrace.targets.backends import get_target

    _, target_name, file, (name, args), failing = CASES[case]
    received: list[Any] = []

    @tvm.instrument.pass_instrument
    class KeepBefore:
        def run_before_pass(self, mod: Any, info: Any) -> None:
            if info.name == failing and not received:
                received.append(mod)

    target = make_tvm_target(get_target(target_name))
    with target:
        func = getattr(load_kernel_module(EXAMPLES / file), name)(*args)
    with (
        pytest.raises(Exception) as raised,
        tvm.transform.PassContext(opt_level=3, instruments=[KeepBefore()]),
        target,
    ):
        tilelang.lower(func, target=target)
    assert received, f"{failing} did not run"
    return received[0], str(raised.value)


def _module_in_script(script: str) -> Any:
    """The module the reproducer stores, read from its ``MODULE_JSON`` literal (never run)."""
    import tvm

    for node in ast.parse(script).body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) == "MODULE_JSON":
            packed = ast.literal_eval(node.value)
            return tvm.ir.load_json(zlib.decompress(base64.b64decode(packed)).decode("utf-8"))
    raise AssertionError("no MODULE_JSON in the script")


def _same_error_as(error_text: str, module: Any) -> str:
    """The error's message without its exception type, target JSON, the module's buffer and
    variable names, or numbers (a pass may name another buffer for the same fault)."""
    import tvm
    from tvm.tirx.stmt_functor import post_order_visit

    names: set[str] = set()

    def visit(node: Any) -> None:
        if isinstance(node, tvm.tirx.Var):
            names.add(node.name)
        elif isinstance(node, tvm.tirx.SBlock):
            names.update(buffer.name for buffer in node.alloc_buffers)

    for _, function in module.functions.items():
        names.update(buffer.name for buffer in function.buffer_map.values())
        post_order_visit(function.body, visit)
    message = error_headline(mask_targets(error_text)).split(": ", 1)[-1]
    for name in sorted(names, key=len, reverse=True):
        message = re.sub(rf"\b{re.escape(name)}\b", "<name>", message)
    return re.sub(r"\d+", "N", message)


def _check_reduction(case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], trace: Trace) -> None:
    assert trace.path is not None
    (run,) = trace.runs
    assert run.status == "failed" and run.find_pass(CASES[case][4]).failed
    script_path = tmp_path / "reduced_repro.py"
    file = EXAMPLES / CASES[case][2]
    assert main(["reduce", trace.path, "-f", str(file), "-o", str(script_path), "--budget", "120"]) == 0
    summary = capsys.readouterr().out
    stated = re.search(r": (\d+) -> (\d+) statements", summary)
    assert stated, summary

    original, plain_error = _plain_lowering(case)
    script = script_path.read_text()
    reduced = _module_in_script(script)
    before, after = _count_statements(original), _count_statements(reduced)
    assert (before, after) == (int(stated.group(1)), int(stated.group(2)))
    assert 3 * after < before, f"{before} -> {after}"

    folder = tmp_path / "elsewhere"
    folder.mkdir()
    clean_env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    ran = subprocess.run(
        [sys.executable, str(script_path)], capture_output=True, text=True, cwd=folder, env=clean_env
    )
    assert ran.returncode == 1, ran.stdout + ran.stderr
    assert "does not print as recorded" not in ran.stderr
    raised = ran.stderr.strip().splitlines()
    # the first line of the compiler's error, after Python's traceback
    start = max(i for i, line in enumerate(raised) if line.startswith(("tvm.", "InternalError")))
    assert _same_error_as("\n".join(raised[start:]), original) == _same_error_as(plain_error, original)
    assert CASES[case][4] in summary


@pytest.fixture(scope="module")
def gemm_webgpu_trace(tmp_path_factory: pytest.TempPathFactory) -> Trace:
    path = tmp_path_factory.mktemp("reduce") / "gemm_webgpu.jsonl"
    return record_to_file(path, [CASES["gemm_webgpu"][0]], [CASES["gemm_webgpu"][1]])


def test_reduce_gemm_to_under_a_third(
    gemm_webgpu_trace: Trace, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _check_reduction("gemm_webgpu", tmp_path, capsys, gemm_webgpu_trace)


@pytest.mark.sweep
def test_reduce_flash_attention_to_under_a_third(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec, target = CASES["flash_attention_sm70"][:2]
    trace = record_to_file(tmp_path / "flash_attention.jsonl", [spec], [target])
    _check_reduction("flash_attention_sm70", tmp_path, capsys, trace)


def test_reduce_without_a_failed_run_or_kernel_file(
    gemm_trace: Trace, gemm_webgpu_trace: Trace, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert gemm_trace.path is not None and gemm_webgpu_trace.path is not None
    # the session's GEMM lowered for cuda:sm_90 without error
    assert main(["reduce", gemm_trace.path, "-t", "cuda:sm_90", "-f", str(EXAMPLES / "gemm.py")]) == 8
    assert "no run that failed to lower matches" in capsys.readouterr().err
    trace = gemm_webgpu_trace.path
    assert main(["reduce", trace, "-o", str(tmp_path / "r.py")]) == 2
    assert "give --kernel-file FILE" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exited:
        main(["reduce", trace, "-f", str(EXAMPLES / "gemm.py"), "--budget", "nan"])
    assert exited.value.code == 2
    assert "not a positive number of seconds" in capsys.readouterr().err
    assert not (tmp_path / "r.py").exists()


def test_reduce_of_a_pass_that_cannot_run_alone_says_why(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = record_to_file(tmp_path / "rmsnorm_c.jsonl", [f"{EXAMPLES / 'rmsnorm.py'}::rms_norm()"], ["c"])
    assert trace.path is not None
    out = tmp_path / "r.py"
    assert main(["reduce", trace.path, "-f", str(EXAMPLES / "rmsnorm.py"), "-o", str(out)]) == 2
    # (the recording's own TVM log lines come before irtrace's one line)
    (error,) = [line for line in capsys.readouterr().err.splitlines() if line.startswith("irtrace")]
    assert "did not recur with one pass run alone" in error
    assert "tl.MaterializeKernelLaunch" in error and "arguments that the trace does not hold" in error
    assert not out.exists()
