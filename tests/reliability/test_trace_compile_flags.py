"""Compile flags from a trace never reach a compiler unless the user asks (issue 34).

The attack: a trace whose failed step is ``target.build.tilelang_cuda`` (TileLang's codegen that
compiles with nvcc) and whose pass configs hold ``tl.device_compile_flags`` with a shell payload;
nvcc runs its host-compiler step through a shell, so the payload would create the marker. It must
not, from ``repro``, ``reduce``, the script ``repro`` writes, or ``resume``. Oracle for the config
types: TVM's own registry (``PassContext.list_configs``), read here."""

from __future__ import annotations

import ast
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from irtrace.cli.main import main
from irtrace.lowering.trace_configs import TraceConfigError, decode_trace_configs
from irtrace.trace.model import Trace
from irtrace.trace.reader import load_trace
from tests.conftest import EXAMPLES

CODEGEN = "target.build.tilelang_cuda"

needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="the attack path needs nvcc")


def payload(marker: Path) -> list[str]:
    return [f"-Xcompiler=-DX;touch${{IFS}}{marker};"]


def hostile_trace(trace: Trace, path: Path, marker: Path, error: str) -> Path:
    """``trace`` with its cuda run's codegen step made ``target.build.tilelang_cuda``, failed with
    ``error``, and the payload in its pass configs."""
    assert trace.path is not None
    cuda_run = next(run.run_id for run in trace.runs if run.target.startswith("cuda"))
    lines = []
    for line in Path(trace.path).read_text().splitlines():
        record: dict[str, Any] = json.loads(line)
        if record.get("run") == cuda_run:
            if record["record"] == "run":
                record["pass_configs"] = {"tl.device_compile_flags": payload(marker)}
            elif record["record"] == "pass" and record["name"] == "codegen":
                record.update(raw_name=CODEGEN, status="failed", error=error)
            elif record["record"] == "end":
                record.update(status="failed", error=error)
        lines.append(json.dumps(record))
    path.write_text("\n".join(lines) + "\n")
    return path


@needs_nvcc
def test_repro_and_reduce_never_hand_trace_flags_to_nvcc(
    gemm_trace: Trace, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    marker = tmp_path / "MARKER"
    kernel = str(EXAMPLES / "gemm.py")
    evil = hostile_trace(gemm_trace, tmp_path / "evil.jsonl", marker, "RuntimeError: anything")
    script = tmp_path / "repro.py"

    # repro: the flags are left out, codegen fails its own way (sm_90 without the `a`), not as recorded
    assert main(["repro", str(evil), "-f", kernel, "-t", "cuda:sm_90", "-o", str(script)]) == 2
    err = capsys.readouterr().err
    assert "left out of the trace's pass configs: tl.device_compile_flags" in err
    assert not marker.exists() and not script.exists()

    # reduce decodes the configs the same way (and refuses: the failure is not the recorded one)
    reduced = tmp_path / "reduced.py"
    assert main(["reduce", str(evil), "-f", kernel, "-t", "cuda:sm_90", "-o", str(reduced)]) == 2
    assert "left out of the trace's pass configs: tl.device_compile_flags" in capsys.readouterr().err
    assert not marker.exists() and not reduced.exists()

    # asked for, the flags must each be one plain flag: this one is refused before anything runs
    asked = ["repro", str(evil), "-f", kernel, "-t", "cuda:sm_90", "-o", "asked.py", "--trace-compile-flags"]
    assert main(asked) == 3
    err = capsys.readouterr().err.strip()
    assert "not one plain compiler flag" in err and len(err.splitlines()) == 1
    assert not marker.exists() and not (tmp_path / "asked.py").exists()


@needs_nvcc
@pytest.mark.sweep  # two nvcc compiles of the GEMM and its lowering: 30-60 s on 2 cores
def test_the_script_repro_writes_from_a_hostile_trace_holds_no_flag(
    gemm_trace: Trace, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The attacker records the error codegen really gives, so repro writes a script: its
    ``PASS_CONFIGS`` hold no flag, and running it (as a maintainer would) runs no payload."""
    monkeypatch.chdir(tmp_path)
    marker = tmp_path / "MARKER"
    kernel = str(EXAMPLES / "gemm.py")
    script = tmp_path / "repro.py"
    evil = hostile_trace(gemm_trace, tmp_path / "evil.jsonl", marker, "RuntimeError: anything")
    assert main(["repro", str(evil), "-f", kernel, "-t", "cuda:sm_90", "-o", str(script)]) == 2
    err = capsys.readouterr().err
    found = re.search(r"failed differently on its own \((.*?)\) \(left out", err)
    assert found, err
    evil = hostile_trace(gemm_trace, tmp_path / "evil.jsonl", marker, found.group(1))
    assert main(["repro", str(evil), "-f", kernel, "-t", "cuda:sm_90", "-o", str(script)]) == 0
    assert "pass config tl.device_compile_flags: reaches the device compiler" in capsys.readouterr().err
    assert not marker.exists()
    configs = next(
        node.value
        for node in ast.parse(script.read_text()).body
        if isinstance(node, ast.Assign) and ast.unparse(node.targets[0]) == "PASS_CONFIGS"
    )
    assert "tl.device_compile_flags" not in ast.literal_eval(configs)
    assert "touch" not in script.read_text()
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 1 and "warpgroup_reg" in done.stderr, done.stderr[-2000:]
    assert not marker.exists()


def test_resume_runs_with_the_decoded_configs(
    gemm_trace: Trace, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    marker = tmp_path / "MARKER"
    evil = hostile_trace(gemm_trace, tmp_path / "evil.jsonl", marker, "RuntimeError: anything")
    ir = tmp_path / "edited.py"
    trace = load_trace(evil)
    run = trace.find_run(target="cuda:sm_90")
    ir.write_text(trace.ir_before(run.find_pass("tl.ProducerConsumerWarpSpecialized")))
    out = tmp_path / "resumed.jsonl"
    args = ["resume", str(evil), "-t", "cuda:sm_90", "--from", "tl.ProducerConsumerWarpSpecialized"]
    assert main([*args, "--ir", str(ir), "-o", str(out)]) == 0
    assert "tl.device_compile_flags: reaches the device compiler" in capsys.readouterr().err
    assert load_trace(out).runs[0].pass_configs == {}
    assert main([*args, "--ir", str(ir), "-o", str(out), "--trace-compile-flags"]) == 3
    assert not marker.exists()


def test_configs_are_decoded_against_the_registered_types() -> None:
    import tilelang  # noqa: F401
    import tvm

    registered = {str(k): str(dict(v)["type"]) for k, v in tvm.transform.PassContext.list_configs().items()}
    on_off = next(k for k, t in registered.items() if k.startswith("tl.disable_") and t == "ir.IntImm")
    text = next(k for k, t in registered.items() if t == "str" and k == "tl.layout_cost_model")
    kept = decode_trace_configs({on_off: True, text: "greedy", "tl.device_compile_flags": ["-O3"]})
    assert kept.configs == {on_off: True, text: "greedy"}
    assert [line.split(":")[0] for line in kept.dropped] == ["tl.device_compile_flags"]
    flags = decode_trace_configs(
        {"tl.device_compile_flags": ["-O3", "--use_fast_math", "-DN=4"]}, compile_flags=True
    )
    assert flags.configs == {"tl.device_compile_flags": ["-O3", "--use_fast_math", "-DN=4"]}
    dropped = decode_trace_configs(
        {"no.such_option": 1, "tl.dump_ir_path": "/home/u/.bashrc", "tl.enable_dump_ir": True}
    )
    assert dropped.configs == {} and len(dropped.dropped) == 3
    for bad in (
        {on_off: "yes"},
        {on_off: [1]},
        {text: "$(touch x)"},
        {text: "a b"},
        {"tl.device_compile_flags": ["-O3 -DX"]},
        {"tl.device_compile_flags": ["-DX`id`"]},
        {"tl.device_compile_flags": "-DX|id"},
        {"tl.device_compile_flags": [{"x": 1}]},
    ):
        with pytest.raises(TraceConfigError):
            decode_trace_configs(bad, compile_flags=True)
