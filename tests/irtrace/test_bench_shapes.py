"""``--bench`` on a kernel with a symbolic dimension (the example ``token_matmul``, ``T.dynamic("tokens")``):
its size bound from ``--bench-shape``, the manifest or a captured call, and the inputs described up to
the launch (no GPU needed). The oracle for the inputs is TileLang's own: its profiler's substitution
of the sizes into ``KernelParam``s of the PrimFunc ``JITImpl.get_tir`` makes for the same call.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
from msgspec.structs import replace as struct_replace

from irtrace.base.errors import ExitCode, UsageError
from irtrace.cli.main import main
from irtrace.lowering.api import PreparedLowering, record_kernels
from irtrace.lowering.bench import BenchPlan, bench_run, parse_gpu_query, plan_inputs, symbolic_dims
from irtrace.lowering.jit_calls import tensor_arg
from irtrace.lowering.manifest import load_manifest
from irtrace.perf.bench_shapes import (
    NO_SHAPES,
    BenchSettings,
    MissingShapeError,
    median_ms,
    parse_bench_shapes,
    resolve_shape,
)
from irtrace.trace.model import KernelRun
from irtrace.trace.resources import BenchResult
from irtrace.trace.schema import Instance
from irtrace.trace.writer import TraceWriter

from ..conftest import DATA, EXAMPLES

SPEC = "token_matmul(N=4096, K=1024)"


@dataclass
class Lowered:
    """token_matmul recorded from a manifest with ``bench_shape``, and what ``--bench`` gets after it."""

    run: KernelRun
    prepared: PreparedLowering
    """As the ``after_run`` hook of ``irtrace record --bench`` receives it: lowered already."""
    oracle_func: Any
    """The PrimFunc TileLang's ``JITImpl.get_tir`` makes for the same sizes."""


@pytest.fixture(scope="module")
def lowered(tmp_path_factory: pytest.TempPathFactory) -> Lowered:
    folder = tmp_path_factory.mktemp("bench")
    manifest = folder / "irtrace.toml"
    manifest.write_text(
        f'[[kernel]]\nspec = "{(EXAMPLES / "eager_gemm.py").as_posix()}::{SPEC}"\n'
        'targets = ["cuda:sm_90a"]\nbench_shape = { tokens = 512 }\n'
    )
    seen: list[tuple[KernelRun, PreparedLowering | None]] = []
    with TraceWriter(folder / "t.jsonl") as writer:
        record_kernels(load_manifest(manifest), writer, after_run=lambda run, p: seen.append((run, p)))
    ((run, prepared),) = seen
    assert run.status == "ok" and prepared is not None and prepared.built is not None, run.error
    spec = importlib.util.spec_from_file_location("eager_gemm_oracle", EXAMPLES / "eager_gemm.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return Lowered(run, prepared, module.token_matmul.get_tir(N=4096, K=1024))


def tilelang_inputs(func: Any, sizes: dict[str, int]) -> list[tuple[str, list[int], str]]:
    """What TileLang's profiler makes for ``func`` with ``dynamic_symbolic_constraints=sizes``."""
    import tilelang
    from tilelang.engine.param import KernelParam
    from tilelang.profiler import Profiler

    params = [KernelParam.from_buffer(func.buffer_map[p]) for p in func.params]
    profiler = Profiler(params, [], tilelang.TensorSupplyType.Randn)
    made = [profiler._substitute_dynamic_symbols(param, sizes) for param in params]
    return [
        (str(p.name), [int(d) for d in m.shape], str(m.dtype)) for p, m in zip(func.params, made, strict=True)
    ]


def plan_inputs_of(plan: BenchPlan) -> list[tuple[str, list[int], str]]:
    return [(item.name, list(item.shape), item.dtype) for item in plan.inputs]


def test_sizes_from_the_command_line_win_and_a_kernel_name_wins_over_all(lowered: Lowered) -> None:
    func, name = lowered.prepared.built.func, lowered.run.kernel  # type: ignore[union-attr]
    assert symbolic_dims(lowered.oracle_func) == symbolic_dims(func) == ["tokens"]
    for options, size in (
        (["tokens=4096"], 4096),
        (["tokens=4096", f"{name}:tokens=2048", "other_kernel:tokens=7"], 2048),
    ):
        plan = plan_inputs(
            func, name, command_line=parse_bench_shapes(options), manifest=lowered.prepared.bench_shape
        )
        assert (plan.shape, plan.shape_from) == ({"tokens": size}, "--bench-shape")
        assert plan_inputs_of(plan) == tilelang_inputs(lowered.oracle_func, {"tokens": size})
        assert plan_inputs_of(plan)[0] == ("X", [size, 1024], "bfloat16")


def test_sizes_from_the_manifest(lowered: Lowered) -> None:
    assert lowered.prepared.bench_shape == {"tokens": 512}  # through the request to the built kernel
    plan = plan_inputs(
        lowered.prepared.built.func,  # type: ignore[union-attr]
        lowered.run.kernel,
        command_line=NO_SHAPES,
        manifest=lowered.prepared.bench_shape,
    )
    assert (plan.shape, plan.shape_from) == ({"tokens": 512}, "manifest")
    assert plan_inputs_of(plan) == tilelang_inputs(lowered.oracle_func, {"tokens": 512})


def test_sizes_from_a_captured_calls_tensors(lowered: Lowered) -> None:
    """The call's tensors as ``irtrace run`` describes them: ``tokens`` is read from X's first dimension
    when the instance holds no ``T.dynamic`` value, and the instance's value is used when it does."""
    import torch

    tensors = {
        name: tensor_arg(torch.empty(*shape, dtype=torch.bfloat16))
        for name, shape in (("X", (300, 1024)), ("W", (4096, 1024)), ("Y", (300, 4096)))
    }
    instance = Instance(process="pid 1", pid=1, tensors={k: v for k, v in tensors.items() if v is not None})
    func = lowered.prepared.built.func  # type: ignore[union-attr]
    plan = plan_inputs(func, lowered.run.kernel, command_line=NO_SHAPES, instance=instance)
    assert (plan.shape, plan.shape_from) == ({"tokens": 300}, "captured")
    assert plan_inputs_of(plan) == tilelang_inputs(lowered.oracle_func, {"tokens": 300})
    dynamic = struct_replace(instance, dynamic={"tokens": 96})
    assert plan_inputs(func, "k", command_line=NO_SHAPES, instance=dynamic).shape == {"tokens": 96}
    overridden = plan_inputs(func, "k", command_line=parse_bench_shapes(["tokens=64"]), instance=dynamic)
    assert (overridden.shape, overridden.shape_from) == ({"tokens": 64}, "--bench-shape")


def test_a_missing_size_fails_that_bench_only_and_names_the_option(lowered: Lowered) -> None:
    no_manifest = replace(lowered.prepared, bench_shape={})
    result = bench_run(no_manifest, "NVIDIA H200", BenchSettings(parse_bench_shapes(["other:tokens=9"])))
    assert result.latency_ms is None and result.samples_ms == ()
    assert result.error is not None
    assert "--bench-shape token_matmul:tokens=SIZE" in result.error
    assert "bench_shape = {tokens = SIZE}" in result.error
    with pytest.raises(MissingShapeError, match="symbolic dimension"):
        plan_inputs(no_manifest.built.func, "token_matmul", command_line=NO_SHAPES)  # type: ignore[union-attr]


def test_resolve_shape_takes_each_dimension_from_the_first_source_that_has_it() -> None:
    shape, source = resolve_shape(
        "k", ["m", "n"], command_line={"m": 8}, manifest={"m": 1, "n": 16}, captured={"n": 2}
    )
    assert (shape, source) == ({"m": 8, "n": 16}, "--bench-shape+manifest")
    assert resolve_shape("k", [], command_line={}, manifest={}, captured={}) == ({}, "")
    with pytest.raises(MissingShapeError, match="m, n with no size"):
        resolve_shape("k", ["m", "n"], command_line={}, manifest={}, captured={})


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--bench-shape", "tokens=abc"], "--bench-shape 'tokens=abc': the size 'abc' is not a whole number"),
        (["--bench-shape", "tokens=0"], "the size '0' is not a whole number from 1 up"),
        (["--bench-shape", "tokens"], "--bench-shape 'tokens': write [KERNEL:]NAME=SIZE"),
        (["--bench-shape", "tokens=1", "--bench-shape", "tokens=2"], "tokens is given twice, as 1 and 2"),
        (["--bench-repeat", "0"], "--bench-repeat 0: give a number from 1 to 1000"),
    ],
)
def test_bad_bench_options_exit_2_before_anything_runs(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, options: list[str], message: str
) -> None:
    out = tmp_path / "t.jsonl"
    spec = f"{EXAMPLES / 'eager_gemm.py'}::{SPEC}"
    for command in (
        ["record", "--bench", *options, spec, "-t", "cuda:sm_90a", "-o", str(out)],
        ["run", "--bench", *options, "-o", str(out), "--", "python", str(DATA / "capture_script.py")],
    ):
        code = main(command)
        err = capsys.readouterr().err
        assert code == ExitCode.USAGE, err
        assert err.startswith("irtrace: error: ") and message in err and len(err.strip().splitlines()) == 1
        assert not out.exists()


def test_bench_options_without_bench_are_refused(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code = main(
        ["record", "--bench-shape", "tokens=8", f"{EXAMPLES / 'gemm.py'}::matmul", "-o", str(tmp_path / "t")]
    )
    assert code == ExitCode.USAGE
    assert "--bench-shape and --bench-repeat only apply with --bench" in capsys.readouterr().err


def test_a_bad_manifest_bench_shape_names_the_key(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    manifest = tmp_path / "irtrace.toml"
    manifest.write_text('[[kernel]]\nspec = "k.py::f()"\nbench_shape = { tokens = 0 }\n')
    with pytest.raises(UsageError) as raised:
        load_manifest(manifest)
    assert raised.value.message.endswith(
        "[[kernel]] #1 bench_shape: expected a table of symbolic dimension sizes (whole numbers from 1 up) "
        "for --bench, e.g. { tokens = 4096 }, not {'tokens': 0}"
    )


def test_median_and_spread_of_the_samples() -> None:
    assert median_ms([0.30, 0.10, 0.20]) == pytest.approx(0.20)
    assert median_ms([1.0, 2.0, 3.0, 10.0]) == pytest.approx(2.5)  # a slow outlier moves it little
    result = BenchResult(latency_ms=median_ms([0.4, 0.36, 0.37]), device="d", samples_ms=(0.4, 0.36, 0.37))
    assert result.spread_ms == (0.36, 0.4)
    assert BenchResult(latency_ms=0.4, device="d", samples_ms=(0.4,)).spread_ms is None
    with pytest.raises(ValueError):
        median_ms([])


def test_gpu_facts_from_nvidia_smi_lines() -> None:
    text = "GPU-aaaa, 570.86.15, 1980, 3201, 1980\nGPU-bbbb, 570.86.15, 345, 3201, 1980\n"
    assert parse_gpu_query(text, "bbbb") == ("570.86.15", {"sm": 345, "memory": 3201, "sm_max": 1980})
    assert parse_gpu_query(text, "") == ("", {})  # two GPUs, none known: no guess
    assert parse_gpu_query("GPU-a, 550.1, [N/A], 1593, 1980\n", "") == (
        "550.1",
        {"memory": 1593, "sm_max": 1980},
    )
    assert parse_gpu_query("", "x") == ("", {})


@pytest.mark.sweep
def test_prepare_bench_compiles_with_the_bound_sizes(lowered: Lowered) -> None:
    """All of ``--bench`` up to the launch (``tilelang.compile``, nvcc): the compiled kernel's own
    parameters, with TileLang's substitution, are the inputs planned; on a GPU, the launch too."""
    import tilelang
    from tilelang.profiler import Profiler

    from irtrace.lowering.bench import cuda_device, launch_bench, prepare_bench

    bench = prepare_bench(lowered.prepared, parse_bench_shapes(["tokens=1024"]))
    assert bench.source_sha256 == lowered.run.source_sha256
    profiler = Profiler(bench.kernel.params, [], tilelang.TensorSupplyType.Randn)
    made = [profiler._substitute_dynamic_symbols(p, {"tokens": 1024}) for p in bench.kernel.params]
    assert [item.shape for item in bench.plan.inputs] == [tuple(int(d) for d in m.shape) for m in made]
    device = cuda_device()
    if device is None:
        return
    result = launch_bench(bench, device, repeat=3)
    assert len(result.samples_ms) == 3 and result.latency_ms == median_ms(result.samples_ms)
    assert (result.shape, result.shape_from) == ({"tokens": 1024}, "--bench-shape")


@pytest.mark.sweep
def test_bench_gives_a_kernel_that_returns_its_output_only_its_inputs() -> None:
    """A kernel that allocates and returns a tensor (``T.empty``, or ``out_idx``) takes fewer
    arguments than its PrimFunc has parameters: ``--bench`` passes what TileLang's own profiler
    makes for it (``Profiler._get_inputs``, which leaves out ``result_idx``). On an H200 a captured
    GEMM compiled with ``out_idx=[2]`` failed with "Kernel expected 2 inputs, but 3 are provided"."""
    import importlib

    import tilelang

    from irtrace.lowering.bench import compile_for_bench, kernel_inputs
    from irtrace.lowering.tvm_targets import make_tvm_target
    from irtrace.perf.bench_shapes import NO_SHAPES
    from irtrace.targets.backends import first_target

    example = importlib.import_module("tests.data.tilelang_example_gemm")
    func = example.matmul.get_tir(M=256, N=256, K=256, block_M=64, block_N=64, block_K=32)
    plan = plan_inputs(func, "matmul", command_line=NO_SHAPES)
    bench = compile_for_bench(func, make_tvm_target(first_target(["cuda:sm_80"])), {}, plan)
    planned = kernel_inputs(bench.kernel, [item.param for item in plan.inputs])
    theirs = bench.kernel.get_profiler(tensor_supply_type=tilelang.TensorSupplyType.Randn)
    expected = [param for index, param in enumerate(theirs.params) if index not in theirs.result_idx]
    assert len(plan.inputs) == 3 and len(planned) == 2
    assert [tuple(p.shape) for p in planned] == [tuple(int(d) for d in p.shape) for p in expected]
