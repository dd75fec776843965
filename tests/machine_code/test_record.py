"""``irtrace record --machine-code`` on the bundled CUDA examples, checked against nvcc and ptxas run
by the test on the kernel source of a plain ``tilelang.lower``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from irtrace.cli.main import main
from irtrace.lowering.machine_code import find_cuda_tools
from irtrace.targets.backends import DEFAULT_TARGET
from irtrace.trace.model import PHASE_CODEGEN, PHASE_MACHINE, STATUS_FAILED, STATUS_OK, text_sha256
from irtrace.trace.reader import load_trace

from ..conftest import DATA, EXAMPLES, ROOT
from .conftest import CASES, Recorded, oracle_resources, ptxas_verbose

pytestmark = pytest.mark.slow


def _run_of(recorded: Recorded, spec: str, target: str):  # type: ignore[no-untyped-def]
    kernel = spec.split("::")[1].split("(")[0]
    (run,) = recorded.trace.select(kernel, target)
    return run


@pytest.mark.parametrize(("spec", "target"), CASES, ids=[f"{s.split('::')[1][:24]}-{t}" for s, t in CASES])
def test_resources_are_what_ptxas_reports(recorded: Recorded, spec: str, target: str, tmp_path: Path) -> None:
    run = _run_of(recorded, spec, target)
    assert run.status == "ok", run.error
    plain = recorded.plain[(run.kernel, target)]
    source = str(plain["source"])
    if text_sha256(source) != run.source_sha256:
        pytest.fail(f"{run.kernel} on {target}: the traced kernel source differs from the untraced one")
    arch = json.loads(run.target_detail)["arch"]
    log, _ = ptxas_verbose(source, arch, tmp_path)
    expected = oracle_resources(log)
    dynamic = plain["dynamic_smem"]
    assert isinstance(dynamic, dict)
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
    assert got == expected
    assert {item.function: item.dynamic_smem for item in run.resources} == dynamic
    assert all(item.arch == arch for item in run.resources)


def test_ptx_and_sass_are_stages_after_codegen(recorded: Recorded, tmp_path: Path) -> None:
    spec, target = CASES[0]
    run = _run_of(recorded, spec, target)
    codegen = next(p for p in run.passes if p.phase == PHASE_CODEGEN and p.depth == 0)
    ptx, sass = run.passes[-2:]
    assert [ptx.name, sass.name] == ["ptx", "sass"]
    assert {ptx.phase, sass.phase} == {PHASE_MACHINE}
    assert ptx.index > codegen.index and sass.index == ptx.index + 1
    # a chain: kernel source -> PTX -> SASS
    assert ptx.ir_before == run.source_sha256 == codegen.ir_after
    assert sass.ir_before == ptx.ir_after
    # the SASS is the disassembly of the cubin nvcc makes of this source with TileLang's flags
    arch = json.loads(run.target_detail)["arch"]
    _, cubin = ptxas_verbose(str(recorded.plain[(run.kernel, target)]["source"]), arch, tmp_path)
    tools = find_cuda_tools()
    oracle = subprocess.run(
        tools.disassemble_command(cubin), capture_output=True, text=True, check=True
    ).stdout
    assert recorded.trace.ir_after(sass) == oracle
    text = recorded.trace.ir_after(ptx)
    assert f".target {arch}" in text.replace("\t", " ")
    assert '.file\t1 "tvm_kernels.cu"' in text, "the temporary folder is kept out of the PTX"


def test_record_says_what_compiling_added(recorded: Recorded) -> None:
    assert f"{len(CASES)} CUDA run(s) compiled" in recorded.stderr
    assert "waited for at the end" in recorded.stderr


def test_show_prints_resources_and_json_holds_them(recorded: Recorded) -> None:
    irtrace = Path(sys.executable).with_name("irtrace")
    env = {**os.environ, "NO_COLOR": "1"}
    spec, target = CASES[0]
    run = _run_of(recorded, spec, target)
    (item,) = run.resources
    shown = subprocess.run(
        [str(irtrace), "show", str(recorded.path), "-k", run.kernel, "-t", target],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    ).stdout
    assert f"resources: {item.function} ({item.arch}): {item.registers} registers" in shown
    document = json.loads(
        subprocess.run(
            [str(irtrace), "show", str(recorded.path), "-k", run.kernel, "-t", target, "--json"],
            capture_output=True,
            text=True,
            env=env,
            check=True,
        ).stdout
    )
    assert document["runs"][0]["resources"][item.function]["registers"] == item.registers
    assert [p["name"] for p in document["runs"][0]["passes"][-2:]] == ["ptx", "sass"]


def test_merge_keeps_machine_code(recorded: Recorded, tmp_path: Path) -> None:
    from irtrace.trace.writer import merge_traces

    merged = merge_traces([recorded.path], tmp_path / "merged.jsonl")
    again = load_trace(tmp_path / "merged.jsonl")
    assert again.runs == merged.runs
    assert [run.resources for run in again.runs] == [run.resources for run in recorded.trace.runs]
    assert [run.passes for run in again.runs] == [run.passes for run in recorded.trace.runs]


def test_a_source_nvcc_rejects_fails_the_run_at_stage_ptx(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # TileLang hands tl.device_compile_flags to nvcc; one nvcc does not know fails the compile
    out = tmp_path / "bad.jsonl"
    # in process (main): the command's answer is the point, not a process boundary
    code = main(
        [
            "record",
            "--machine-code",
            f"{EXAMPLES / 'gemm.py'}::matmul(256, 256, 256)",
            "-t",
            "cuda:sm_80",
            "-c",
            "tl.device_compile_flags=['--no-such-flag']",
            "-o",
            str(out),
        ]
    )
    done = capsys.readouterr()
    assert code == 5, done.err
    (run,) = load_trace(out).runs
    assert run.status == STATUS_FAILED
    ptx = run.passes[-1]
    assert (ptx.name, ptx.status) == ("ptx", STATUS_FAILED)
    assert "--no-such-flag" in (ptx.error or "") and run.error == ptx.error
    assert "matmul on cuda:sm_80 in pass ptx: nvcc failed (exit 1): nvcc fatal" in done.out


def test_missing_tools_are_named_with_the_way_to_get_them(tmp_path: Path) -> None:
    """Where neither CUDA_HOME, PATH nor the environment's packages give nvcc: an interpreter
    that sees no site-packages (so no nvidia-cuda-* package) and an empty PATH."""
    code = (
        "import sys\n"
        "from irtrace.lowering.machine_code import MachineCodeError, find_cuda_tools\n"
        "try:\n    print(find_cuda_tools())\nexcept MachineCodeError as error:\n    print(error.message)\n"
    )
    import shutil

    import msgspec

    # the one package irtrace needs from site-packages, copied alone so nvidia-cuda-* stay unseen
    deps = tmp_path / "deps"
    shutil.copytree(Path(msgspec.__file__).parent, deps / "msgspec")
    env = {"CUDA_HOME": str(tmp_path / "no-cuda"), "PATH": str(tmp_path), "PYTHONPATH": f"{ROOT}:{deps}"}
    done = subprocess.run(
        [sys.executable, "-S", "-c", code], capture_output=True, text=True, env=env, check=True
    )
    assert done.stdout.startswith(
        "machine code needs CUDA's nvcc, and there is none in CUDA_HOME, on PATH or"
    )
    assert "pip install 'tilelang-devtools[cuda]'" in done.stdout
    # nvcc alone: the disassembler is what is missing
    bin_dir = tmp_path / "cuda" / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "nvcc").symlink_to(find_cuda_tools().nvcc)
    env["CUDA_HOME"] = str(tmp_path / "cuda")
    done = subprocess.run(
        [sys.executable, "-S", "-c", code], capture_output=True, text=True, env=env, check=True
    )
    assert done.stdout.startswith(
        f"machine code needs nvdisasm or cuobjdump to print SASS; nvcc is {bin_dir}"
    )
    # ptxas's figures alone (the language server's lens) need nvcc and nothing else
    lens = code.replace("find_cuda_tools()", "find_cuda_tools(disassembler=False).nvcc")
    done = subprocess.run(
        [sys.executable, "-S", "-c", lens], capture_output=True, text=True, env=env, check=True
    )
    assert done.stdout.strip() == str(bin_dir / "nvcc")


def test_record_stops_before_lowering_without_tools(tmp_path: Path) -> None:
    import importlib.metadata

    try:
        importlib.metadata.distribution("nvidia-cuda-nvcc")
        pytest.skip("nvcc comes from the nvidia-cuda-nvcc package ([cuda] extra) in this environment")
    except importlib.metadata.PackageNotFoundError:
        pass
    irtrace = Path(sys.executable).with_name("irtrace")
    env = {**os.environ, "CUDA_HOME": str(tmp_path / "no-cuda"), "PATH": "/usr/bin:/bin"}
    done = subprocess.run(
        [str(irtrace), "record", "--machine-code", f"{EXAMPLES / 'gemm.py'}::matmul", "-t", "cuda:sm_90"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
    )
    assert done.returncode == 2
    assert "nvcc" in done.stderr and "tilelang-devtools[cuda]" in done.stderr
    assert not (tmp_path / "irtrace.jsonl").exists()


def test_bench_without_a_gpu_says_so_before_lowering(tmp_path: Path) -> None:
    from irtrace.lowering.bench import cuda_device

    if cuda_device() is not None:
        pytest.skip("this machine has a GPU")
    irtrace = Path(sys.executable).with_name("irtrace")
    done = subprocess.run(
        [str(irtrace), "record", "--bench", f"{EXAMPLES / 'gemm.py'}::matmul", "-t", "cuda:sm_90"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert done.returncode == 2
    assert done.stderr.startswith("irtrace: error: --bench launches the kernels on a CUDA GPU, and torch ")
    assert not (tmp_path / "irtrace.jsonl").exists()


def test_bench_does_everything_up_to_the_launch(recorded: Recorded) -> None:
    """tilelang.compile with the run's target and configs and TileLang's profiler on random inputs:
    all of --bench but the launch, which needs the GPU CI does not have."""
    from irtrace.lowering.api import RecordRequest, prepare_request
    from irtrace.lowering.bench import cuda_device, launch_bench, prepare_bench
    from irtrace.targets.specs import parse_spec

    spec, target = CASES[0]
    (prepared,) = prepare_request(RecordRequest(parse_spec(spec), (target,), base_dir=EXAMPLES))
    bench = prepare_bench(prepared)
    run = _run_of(recorded, spec, target)
    assert bench.source_sha256 == run.source_sha256, "tilelang.compile built another source than traced"
    assert bench.backend == "tvm_ffi"
    if cuda_device() is None:
        with pytest.raises(Exception, match="device"):
            launch_bench(bench, "none")
    else:
        result = launch_bench(bench, str(cuda_device()))
        assert result.latency_ms is not None and result.latency_ms > 0
        assert result.source_sha256 == run.source_sha256


_TILELANG_COMPILE = """
import json, sys
from pathlib import Path
import tilelang
from irtrace.lowering.api import RecordRequest, prepare_request
from irtrace.targets.specs import parse_spec

configs = json.loads(sys.argv[2])
(prepared,) = prepare_request(RecordRequest(parse_spec(sys.argv[1]), ("cuda:sm_80",), configs))
tilelang.compile(prepared.built.func, target=prepared.tvm_target, pass_configs=prepared.pass_configs)
print(json.dumps({"target_detail": str(prepared.tvm_target), "pass_configs": prepared.pass_configs}))
"""


@pytest.mark.sweep  # 10 s on 2 cores: with the sweeps (machine code of a captured run stays in make test)
def test_nvcc_command_is_tilelangs_own(tmp_path: Path) -> None:
    """The command TileLang's compile step logs (TILELANG_VERBOSE) is ours, but for what we add:
    -keep (the PTX), --time (phase times) and our file names."""
    from irtrace.lowering.machine_code import plan_compile

    configs = {"tl.enable_fast_math": True, "tl.ptxas_register_usage_level": 5}
    env = {**os.environ, "TILELANG_VERBOSE": "1", "TILELANG_DISABLE_CACHE": "1"}
    spec = f"{EXAMPLES / 'gemm.py'}::matmul(256, 256, 256)"
    done = subprocess.run(
        [sys.executable, "-c", _TILELANG_COMPILE, spec, json.dumps(configs)],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        check=True,
    )
    logged = [
        line for line in (done.stdout + done.stderr).splitlines() if "NVCC compilation command: " in line
    ]
    assert logged, "TileLang logged no nvcc command"
    theirs = logged[-1].split("NVCC compilation command: ", 1)[1].split()
    facts = json.loads(done.stdout.strip().splitlines()[-1])
    plan = plan_compile(facts["target_detail"], facts["pass_configs"])
    ours = plan.nvcc_command(tmp_path / "k.cu", tmp_path / "k.cubin", keep_dir=tmp_path)

    def essential(command: list[str]) -> list[str]:
        output = command.index("-o")
        kept = command[:output]  # drop -o OUTPUT SOURCE
        return [
            arg
            for arg in kept
            if arg not in ("-w", "-keep") and not arg.startswith(("--keep-dir=", "--time="))
        ]

    assert essential(ours) == essential(theirs)
    assert "--use_fast_math" in ours and "--ptxas-options=--register-usage-level=5" in ours


def test_the_perf_gate_names_the_resources_that_grew(recorded: Recorded) -> None:
    """``irtrace check``'s gate (``perf_findings``) on ptxas's real figures of two archs: a finding
    for each of registers and spills that grew, gated by the default policy, none for the same run,
    and none gated once the policy allows the growth."""
    from irtrace.ci.perf_gates import FunctionResources, PerfCheck, perf_findings
    from irtrace.ci.policy import REGISTERS, SPILLS, PerfTable, Policy

    sm_80, sm_90a = _run_of(recorded, *CASES[1]), _run_of(recorded, *CASES[0])
    (before,), (after,) = sm_80.resources, sm_90a.resources

    def findings(old: Any, new: Any, policy: Policy) -> list[Any]:
        check = PerfCheck(None, None, None, (FunctionResources(new.function, old, new),))
        return [f for f in perf_findings(check, policy) if f.kind in (REGISTERS, SPILLS)]

    grew = [
        kind
        for kind, name in ((REGISTERS, "registers"), (SPILLS, "spills"))
        if getattr(after, name) > getattr(before, name)
    ]
    gated = findings(before, after, Policy())
    assert [f.kind for f in gated if f.gated] == grew
    for finding in gated:
        name = "registers" if finding.kind == REGISTERS else "spills"
        assert f"{getattr(before, name)} -> {getattr(after, name)}" in finding.message
    assert findings(after, after, Policy()) == []
    loose = Policy(perf=PerfTable(registers=10_000, spill_bytes=10_000))
    assert not any(f.gated for f in findings(before, after, loose))


def test_the_same_source_gives_the_same_ptx(recorded: Recorded) -> None:
    """nvcc names internal symbols after the folder it compiles in; two builds of one source must
    still give one PTX, or `irtrace check` reports a change between identical recordings."""
    from irtrace.lowering.machine_code import compile_source, plan_compile

    run = _run_of(recorded, *CASES[0])
    plan = plan_compile(run.target_detail, run.pass_configs)
    source = "namespace { __device__ float twice(float x) { return 2 * x; } }\n" + (
        'extern "C" __global__ void k(float* a) { a[threadIdx.x] = twice(a[0]); }\n'
    )
    first, second = (compile_source(plan, source, disassemble=False) for _ in range(2))
    internal = ",".join(str(byte) for byte in b"_INTERNAL_")  # the debug info spells names as .b8 bytes
    assert first.ptx is not None and internal in first.ptx, first.error
    assert first.ptx == second.ptx


def test_the_default_target_compiles_tilelangs_own_gemm_to_machine_code(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """TileLang's own GEMM example (eager ``@tilelang.jit``, warp-specialized on Hopper) recorded
    with no ``-t``: the default target is the one its code needs (wgmma, setmaxnreg), so nvcc
    compiles it and the run carries ptxas's figures. Plain ``sm_90`` fails there at stage ptx."""
    sizes = "M=1024, N=1024, K=1024, block_M=128, block_N=128, block_K=32"
    spec = f"{DATA / 'tilelang_example_gemm.py'}::matmul({sizes})"
    out = tmp_path / "gemm.jsonl"
    # in process (main): the command's answer is the point, not a process boundary
    code = main(["record", "--machine-code", spec, "-o", str(out)])
    done = capsys.readouterr()
    assert code == 0, done.out + done.err
    (run,) = load_trace(out).runs
    assert run.target == DEFAULT_TARGET and run.status == STATUS_OK
    assert run.passes[-1].name == "sass" and run.resources and run.resources[0].registers > 0
