"""``irtrace run --no-gpu`` and ``IRTRACE_NO_GPU=1``: a GPU program runs to its end on this machine
(which has no GPU), every kernel it builds is captured, and the runs say they used stand-ins.

Oracles: the program's own ``built NAME`` lines (which kernels it compiled, and that it reached its
end), and, for the kernel source, TileLang's own ``tilelang.compile(...).get_kernel_source()`` of
the same kernels in a fresh process, untraced and with the device compiler. The same program on a
GPU is the oracle of ``test_no_gpu_oracle.py``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from irtrace.trace.reader import load_trace

from ..conftest import DATA, ROOT

PROGRAM = DATA / "no_gpu_program.py"
H100_SMS = 132
"""What the stand-in GPU for ``cuda:sm_90a`` reports (an H100 SXM), which sizes ``add_one``."""


def irtrace(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    environment.pop("IRTRACE", None)
    return subprocess.run(
        [sys.executable, "-m", "irtrace.cli", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=environment,
        timeout=600,
    )


def untraced_sources(cwd: Path) -> dict[str, str]:
    """The kernel source TileLang's own compile gives for the program's two kernels at the sizes
    its run on the stand-in GPU used, in a fresh process without irtrace."""
    code = f"""
import importlib.util, json, sys
import tilelang
spec = importlib.util.spec_from_file_location("no_gpu_program", {str(PROGRAM)!r})
program = importlib.util.module_from_spec(spec)
sys.modules["no_gpu_program"] = program
spec.loader.exec_module(program)  # the kernels; its main() is not run
target = {{"kind": "cuda", "arch": "sm_90a"}}
scale = tilelang.compile(program.scale_rows.get_tir(64, 512), out_idx=[-1], target=target)
add = tilelang.compile(program.add_one({H100_SMS} * 256), out_idx=[1], target=target)
print(json.dumps({{"scale_rows": scale.get_kernel_source(), "add_one": add.get_kernel_source()}}))
"""
    import json

    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=cwd, timeout=600, check=True
    )
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="the oracle compiles with nvcc")
def test_a_gpu_program_runs_to_its_end_and_every_kernel_is_captured(tmp_path: Path) -> None:
    out = tmp_path / "t.jsonl"
    done = irtrace("run", "--no-gpu", "-o", str(out), "--", "python", str(PROGRAM), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    built = [line.split()[1] for line in done.stdout.splitlines() if line.startswith("built ")]
    assert built == ["scale_rows", "add_one"]
    assert "END" in done.stdout.splitlines()
    trace = load_trace(out)
    assert [run.kernel for run in trace.runs] == built
    for run in trace.runs:
        assert run.status == "ok"
        assert run.instance is not None and run.instance.stand_in
        assert run.target == "cuda:sm_90a"
    oracle = untraced_sources(tmp_path)
    for run in trace.runs:
        assert trace.kernel_source(run) == oracle[run.kernel], run.kernel


def test_without_no_gpu_the_same_program_stops_at_its_first_gpu_call(tmp_path: Path) -> None:
    """What ``--no-gpu`` is for: on this machine the program cannot get past ``.cuda()``."""
    out = tmp_path / "t.jsonl"
    done = irtrace("run", "-o", str(out), "--", "python", str(PROGRAM), cwd=tmp_path)
    assert done.returncode == 7
    assert "built " not in done.stdout


def test_bench_refuses_a_stand_in_run(tmp_path: Path) -> None:
    out = tmp_path / "t.jsonl"
    done = irtrace("run", "--no-gpu", "--bench", "-o", str(out), "--", "python", str(PROGRAM), cwd=tmp_path)
    assert done.returncode == 2
    assert "--no-gpu launches nothing" in done.stderr
    assert "Traceback" not in done.stderr
    assert not out.exists()


def test_a_pytest_suite_runs_under_no_gpu(tmp_path: Path) -> None:
    """CI on a CPU runner: the suite's tests pass on stand-ins and each compiled kernel is kept."""
    suite = tmp_path / "suite"
    shutil.copytree(DATA / "no_gpu_suite", suite)
    out = tmp_path / "t.jsonl"
    done = irtrace(
        "run",
        "--no-gpu",
        "-o",
        str(out),
        "--",
        "python",
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:randomly",
        "-p",
        "no:cacheprovider",
        str(suite),
        cwd=suite,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 passed" in done.stdout
    trace = load_trace(out)
    assert [run.kernel for run in trace.runs] == ["negate", "negate"]
    test_ids = [run.instance.test_id if run.instance else None for run in trace.runs]
    assert [str(test_id).rpartition("::")[2] for test_id in test_ids] == [
        "test_negate[1024]",
        "test_negate[4096]",
    ]
    assert all(run.instance is not None and run.instance.stand_in for run in trace.runs)


def test_irtrace_no_gpu_1_beside_irtrace_captures_on_stand_ins(tmp_path: Path) -> None:
    out = tmp_path / "t.jsonl"
    environment = {**os.environ, "PYTHONPATH": str(ROOT), "IRTRACE": str(out), "IRTRACE_NO_GPU": "1"}
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            f"import irtrace.lowering.autocapture as a; a.start_from_environment(); "
            f"import runpy; runpy.run_path({str(PROGRAM)!r}, run_name='__main__')",
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=environment,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    assert "END" in done.stdout.splitlines()
    trace = load_trace(out)
    assert [run.kernel for run in trace.runs] == ["scale_rows", "add_one"]
    assert all(run.instance is not None and run.instance.stand_in for run in trace.runs)


@pytest.mark.parametrize("value", ["0", "true", " 1"])
def test_only_irtrace_no_gpu_1_turns_stand_ins_on(value: str, tmp_path: Path) -> None:
    """Any other value leaves the program as it is: it stops at its first GPU call."""
    out = tmp_path / "t.jsonl"
    environment = {**os.environ, "PYTHONPATH": str(ROOT), "IRTRACE": str(out), "IRTRACE_NO_GPU": value}
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "import irtrace.lowering.autocapture as a; a.start_from_environment(); "
            f"import runpy; runpy.run_path({str(PROGRAM)!r}, run_name='__main__')",
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=environment,
        timeout=600,
    )
    assert done.returncode != 0
    assert "built " not in done.stdout


def test_autotune_builds_the_given_tunable_else_the_first_config(tmp_path: Path) -> None:
    """As TileLang's tuner: a call that gives a tunable compiles it; one that does not is tuned,
    which under ``--no-gpu`` (nothing can be timed) builds the first config."""
    out = tmp_path / "t.jsonl"
    done = irtrace(
        "run", "--no-gpu", "-o", str(out), "--", "python", str(DATA / "no_gpu_autotune.py"), cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    said = {
        line.split()[1]: int(line.split()[2])
        for line in done.stdout.splitlines()
        if line.startswith("block ")
    }
    blocks = [run.args["kwargs"]["block"] for run in load_trace(out).runs]
    assert blocks == [said["given"], said["tuned"]] == [128, 64]


def test_a_config_with_its_own_pass_configs_is_built_with_them(tmp_path: Path) -> None:
    """TileLang's tuner takes a config's ``pass_configs`` apart from the kernel's arguments; the
    first config is built so, and the run records those pass configs."""
    out = tmp_path / "t.jsonl"
    program = DATA / "no_gpu_autotune_pass_configs.py"
    done = irtrace("run", "--no-gpu", "-o", str(out), "--", "python", str(program), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "END" in done.stdout.splitlines()
    said = next(line for line in done.stdout.splitlines() if line.startswith("config "))
    assert said == "config 64 {'tl.disable_warp_specialized': True}"
    (run,) = load_trace(out).runs
    assert run.status == "ok"
    assert run.args["kwargs"]["block"] == 64
    assert run.pass_configs.get("tl.disable_warp_specialized") is True


def test_a_program_profiling_its_kernel_on_streams_runs_to_its_end(tmp_path: Path) -> None:
    """``torch.cuda.init``, the profiler's start and stop, NVTX ranges and streams, which a CPU
    build of torch refuses, are answered: the stand-in GPU runs nothing, so there is nothing to
    wait for, profile or annotate."""
    out = tmp_path / "t.jsonl"
    program = DATA / "no_gpu_cuda_tools.py"
    done = irtrace("run", "--no-gpu", "-o", str(out), "--", "python", str(program), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert [line for line in done.stdout.splitlines() if line in ("built double", "END")] == [
        "built double",
        "END",
    ]
    (run,) = load_trace(out).runs
    assert (run.kernel, run.status) == ("double", "ok")
    assert run.instance is not None and run.instance.stand_in


def test_auto_means_the_auto_target_even_where_the_stand_in_says_cuda(tmp_path: Path) -> None:
    """TileLang's CUDA detector takes the stand-in's ``torch.cuda.is_available()`` for a CUDA GPU;
    ``--auto-target hip:gfx942`` must still lower ``target="auto"`` for HIP. Oracle: TileLang's own
    lowering of the same kernel for gfx942 in a fresh process, untraced."""
    program = tmp_path / "auto_kernel.py"
    program.write_text(
        (DATA / "no_gpu_cuda_tools.py").read_text().split('if __name__ == "__main__":')[0]
        + 'if __name__ == "__main__":\n    double(1024)(torch.randn(1024, device="cuda"))\n'
    )
    out = tmp_path / "t.jsonl"
    done = irtrace(
        "run",
        "--no-gpu",
        "--auto-target",
        "hip:gfx942",
        "-o",
        str(out),
        "--",
        "python",
        str(program),
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    (run,) = load_trace(out).runs
    assert (run.kernel, run.target, run.status) == ("double", "hip:gfx942", "ok")
    code = """
import sys, tilelang
from tvm.target import Target
sys.path.insert(0, ".")
import auto_kernel
target = Target({"kind": "hip", "mcpu": "gfx942"})
with target:
    print(tilelang.lower(auto_kernel.double.get_tir(1024), target=target).kernel_source)
"""
    oracle = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=600, check=True
    )
    assert load_trace(out).kernel_source(run) == oracle.stdout.removesuffix("\n")


def test_tilelangs_carver_sees_the_stand_in_gpu(tmp_path: Path) -> None:
    """TileLang's carver asks TVM's runtime, not torch, whether GPU 0 exists and what it is; it gets
    the stand-in's facts (an H100 SXM for ``cuda:sm_90a``: 132 SMs, warp 32, 48 KiB of shared memory
    per block), and its analysis of the compiled kernel counts the GEMM's 2*M*N*K FLOPs."""
    out = tmp_path / "t.jsonl"
    done = irtrace(
        "run", "--no-gpu", "-o", str(out), "--", "python", str(DATA / "no_gpu_carver.py"), cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert "END" in lines
    assert f"device {H100_SMS} 32 90 {48 * 1024}" in lines
    (flops,) = [line.split()[1:] for line in lines if line.startswith("flops ")]
    assert flops[0] == flops[1]
    (run,) = load_trace(out).runs
    assert (run.kernel, run.status) == ("matmul", "ok")
