"""Every kernel form real TileLang code uses, recorded through the real pipelines.

Each test instantiates the kernel the way TileLang itself does (``JITImpl.get_tir``,
``AutoTuneImpl.jit_impl``, the factory called in the target's context), lowers it untraced with
``tilelang.lower`` and checks the recorded run against that: same kernel source, and the
argument's value visible in the recorded IR.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import re
import subprocess
import sys
import types
from pathlib import Path
from typing import Any

import pytest

from irtrace.base.errors import ExitCode, InputError, KernelSourceError, UsageError
from irtrace.cli.main import main
from irtrace.lowering.api import RecordRequest, record_kernels
from irtrace.lowering.kernel_kinds import KernelKind
from irtrace.lowering.loader import find_kernels, load_kernel_module, parse_pass_config
from irtrace.lowering.manifest import load_manifest
from irtrace.targets.specs import Expression, parse_spec
from irtrace.trace.model import STATUS_FAILED, STATUS_OK, KernelRun, Trace
from irtrace.trace.reader import load_trace
from irtrace.trace.writer import TraceWriter

from ..conftest import DATA, ROOT, SMALL_GEMM

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

FORMS = DATA / "forms"
EXAMPLES = ROOT / "examples"
EAGER_GEMM = EXAMPLES / "eager_gemm.py"
TVM_TARGETS: dict[str, Any] = {
    "cuda:sm_90": {"kind": "cuda", "arch": "sm_90"},
    "hip:gfx942": {"kind": "hip", "mcpu": "gfx942"},
}


def _record(spec: str, targets: list[str], base_dir: Path | None = None, **configs: object) -> Trace:
    request = RecordRequest(parse_spec(spec), tuple(targets), dict(configs), base_dir=base_dir)
    with TraceWriter() as writer:
        recording = record_kernels([request], writer)
        if recording.errors:
            raise recording.errors[0]
        return writer.trace()


def _ok_run(trace: Trace, target: str) -> KernelRun:
    (run,) = [r for r in trace.runs if r.target == target]
    assert run.status == STATUS_OK, run.error
    return run


def _import_file(path: Path) -> types.ModuleType:
    """The test's own import of a kernel file, under a name the loader does not use."""
    spec = importlib.util.spec_from_file_location(f"forms_oracle_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _target(name: str) -> Any:
    from tilelang.backend.target import determine_target

    return determine_target(TVM_TARGETS[name], return_object=True)


def _untraced_source(func: Any, target: Any, configs: dict[str, Any] | None = None) -> str:
    import tilelang
    import tvm

    with tvm.transform.PassContext(opt_level=3, config=configs or {}), target:
        return str(tilelang.lower(func, target=target).kernel_source)


def _shape(func: Any, param: int) -> tuple[Any, ...]:
    buffer = func.buffer_map[func.params[param]]
    return tuple(int(d) if hasattr(d, "value") else str(d) for d in buffer.shape)


def _first_ir(trace: Trace, run: KernelRun) -> str:
    return trace.ir_after(run.passes[0]) or ""


def _allocations(trace: Trace, run: KernelRun) -> dict[str, tuple[int, ...]]:
    """Shapes of the buffers the kernel allocates, as the first recorded IR shows them."""
    found = re.findall(r"(\w+) = T\.sblock_alloc_buffer\(\(([\d, ]+)\)", _first_ir(trace, run))
    return {name: tuple(int(d) for d in dims.split(",") if d.strip()) for name, dims in found}


def _kernel_signature(source: str) -> str:
    return next(line for line in source.splitlines() if "__global__" in line)


# ----------------------------------------------------------------------------- kernel kinds


@pytest.mark.parametrize(
    ("file", "name", "call"),
    [
        (DATA / "jit_kernels.py", "lazy_add", {"M": 64}),
        (DATA / "jit_kernels.py", "eager_scale", {"M": 64, "N": 256}),
        (EAGER_GEMM, "token_matmul", {"N": 256, "K": 256}),
        (FORMS / "dynamic.py", "dynamic_rows_add", {"N": 1024}),
    ],
)
def test_a_jit_kernel_is_eager_exactly_when_tilelang_builds_it_eagerly(
    file: Path, name: str, call: dict[str, int]
) -> None:
    """The loader tells eager from lazy without calling the kernel; the oracle is TileLang's own
    ``JITImpl`` settling its ``mode`` while it builds the kernel from the real call."""
    loaded = load_kernel_module(file)
    (kernel,) = [k for k in find_kernels(loaded) if k.name == name]
    jit = getattr(_import_file(file), name)
    with _target("cuda:sm_90"):
        jit.get_tir(**call)
    assert jit.mode in ("eager", "lazy")
    assert kernel.kind == (KernelKind.EAGER_JIT if jit.mode == "eager" else KernelKind.JIT)


def _possible_kinds(value: Any) -> set[KernelKind]:
    """The kinds a global can be, by the object TileLang made of it."""
    from tilelang.autotuner.tuner import AutoTuneImpl
    from tilelang.jit import JITImpl
    from tvm.tirx import PrimFunc

    if isinstance(value, PrimFunc):
        return {KernelKind.PRIM_FUNC}
    if isinstance(value, AutoTuneImpl):
        return {KernelKind.AUTOTUNE}
    if isinstance(value, JITImpl):
        return {KernelKind.JIT, KernelKind.EAGER_JIT}
    return {KernelKind.FACTORY}


def test_each_form_is_found_as_its_kind_and_the_kind_says_how_it_is_called() -> None:
    files = [*FORMS.glob("*.py"), DATA / "jit_kernels.py", DATA / "sibling" / "fill_kernel.py"]
    seen = set()
    for file in files:
        loaded = load_kernel_module(file)
        for kernel in find_kernels(loaded):
            assert kernel.kind in _possible_kinds(getattr(loaded.module, kernel.name)), kernel
            assert kernel.kind.takes_arguments == (kernel.kind is not KernelKind.PRIM_FUNC)
            seen.add(kernel.kind)
    assert seen == set(KernelKind) - {KernelKind.CAPTURED}


# ----------------------------------------------------------------------------- @autotune


GEMM_CONFIGS = [
    {
        "block_M": 64,
        "block_N": 32,
        "block_K": 32,
        "num_stages": 2,
        "threads": 128,
        "pass_configs": {"tl.disable_warp_specialized": True},
    },
    {"block_M": 128, "block_N": 128, "block_K": 64, "num_stages": 3, "threads": 256},
]
EXAMPLE_AUTOTUNE = "@tilelang.autotune(configs=gemm_configs, warmup=10, rep=20)"


@pytest.fixture
def listed_configs(tmp_path: Path) -> Path:
    """The example's autotuned GEMM under a config list whose first config carries pass configs:
    ``examples/autotune_gemm.py`` with only its decorator's configs replaced."""
    source = (EXAMPLES / "autotune_gemm.py").read_text()
    assert source.count(EXAMPLE_AUTOTUNE) == 1, "the example's @autotune line changed: update this test"
    listed = (
        f"GEMM_CONFIGS = {GEMM_CONFIGS!r}\n\n\n@tilelang.autotune(configs=GEMM_CONFIGS, warmup=5, rep=10)"
    )
    file = tmp_path / "autotune_gemm_listed.py"
    file.write_text(source.replace(EXAMPLE_AUTOTUNE, listed))
    return file


def test_autotune_traces_the_first_config_with_its_pass_configs(listed_configs: Path) -> None:
    module = _import_file(listed_configs)
    first = dict(module.GEMM_CONFIGS[0])
    config_pass_configs = first.pop("pass_configs")
    target = _target("cuda:sm_90")
    jit = module.matmul_relu.jit_impl
    with target:
        func = jit.get_tir(256, 256, 256, **first)
    expected = _untraced_source(func, target, {**(jit.pass_configs or {}), **config_pass_configs})

    trace = _record(f"{listed_configs}::matmul_relu(256, 256, 256)", ["cuda:sm_90"])
    run = _ok_run(trace, "cuda:sm_90")
    assert run.args == {"args": [256, 256, 256], "kwargs": {}, "autotune_defaults": first}
    assert run.pass_configs["tl.disable_warp_specialized"] is True
    assert trace.kernel_source(run) == expected
    assert _allocations(trace, run)["A_shared"] == (first["block_M"], first["block_K"]) == (64, 32)


def test_autotune_takes_nothing_from_configs_when_the_spec_gives_every_tunable(listed_configs: Path) -> None:
    spec = "matmul_relu(256, 256, 256, block_M=128, block_N=128, block_K=64, num_stages=3, threads=256)"
    trace = _record(f"{listed_configs}::{spec}", ["hip:gfx942"])
    run = _ok_run(trace, "hip:gfx942")
    assert "autotune_defaults" not in run.args
    assert "tl.disable_warp_specialized" not in run.pass_configs
    assert run.args["kwargs"]["block_M"] == 128


def test_autotune_configs_function_is_called_with_the_spec_arguments() -> None:
    module = _import_file(FORMS / "autotuned.py")
    first = module.row_sum_configs(64, 1024)[0]
    targets = ["cuda:sm_90", "hip:gfx942"]
    trace = _record(f"{FORMS / 'autotuned.py'}::tuned_row_sum(64, 1024)", targets)
    for name in targets:
        target = _target(name)
        with target:
            func = module.tuned_row_sum.jit_impl.get_tir(64, 1024, **first)
        run = _ok_run(trace, name)
        assert run.args["autotune_defaults"] == first == {"block_N": 256, "threads": 128}
        assert trace.kernel_source(run) == _untraced_source(func, target)


# ----------------------------------------------------------------------------- expressions


def test_spec_keeps_expression_text_and_checks_syntax_only() -> None:
    spec = parse_spec("k.py::quantize(ROWS, 1 << 20, out_dtype=determine_fp8_type(), d=torch.float16)")
    assert spec.args == (Expression("ROWS"), Expression("1 << 20"))
    assert spec.kwargs["out_dtype"] == Expression("determine_fp8_type()")
    assert spec.text == "k.py::quantize(ROWS, 1 << 20, out_dtype=determine_fp8_type(), d=torch.float16)"
    assert parse_spec("k.py::f(1, T.float8_e4m3fn)").args == (
        1,
        parse_spec("k.py::f(T.float8_e4m3fn)").args[0],
    )
    with pytest.raises(UsageError, match="given twice"):
        parse_spec("k.py::f(x=1, x=2)")


def test_shift_expression_becomes_the_buffer_size() -> None:
    module = _import_file(FORMS / "expressions.py")
    target = _target("cuda:sm_90")
    with target:
        func = module.vec_add.get_tir(1 << 20)
    trace = _record(f"{FORMS / 'expressions.py'}::vec_add(1 << 20)", ["cuda:sm_90"])
    run = _ok_run(trace, "cuda:sm_90")
    assert run.spec.endswith("::vec_add(1 << 20)")
    assert run.args == {"args": [1 << 20], "kwargs": {}}
    assert _shape(func, 0) == (1 << 20,)
    assert "match_buffer(A_handle, (1048576,)" in _first_ir(trace, run)
    assert trace.kernel_source(run) == _untraced_source(func, target)


def test_module_helper_is_evaluated_per_target_in_its_context() -> None:
    module = _import_file(FORMS / "expressions.py")
    spec = f"{FORMS / 'expressions.py'}::quantize(ROWS, 256, out_dtype=determine_fp8_type())"
    trace = _record(spec, ["cuda:sm_90", "hip:gfx942"])
    for name in ("cuda:sm_90", "hip:gfx942"):
        target = _target(name)
        with target:
            dtype = module.determine_fp8_type()
            func = module.quantize(module.ROWS, 256, out_dtype=dtype)
        run = _ok_run(trace, name)
        assert run.args == {"args": [48, 256], "kwargs": {"out_dtype": f"T.{dtype}"}}
        assert f'match_buffer(Q_handle, (48, 256), "{dtype}"' in _first_ir(trace, run)
        assert trace.kernel_source(run) == _untraced_source(func, target)
    hip = _ok_run(trace, "hip:gfx942")
    assert hip.args["kwargs"]["out_dtype"] == "T.float8_e4m3fnuz"
    assert _ok_run(trace, "cuda:sm_90").args["kwargs"]["out_dtype"] == "T.float8_e4m3fn"


def test_module_constant_and_torch_dtype() -> None:
    import torch

    module = _import_file(FORMS / "expressions.py")
    target = _target("hip:gfx942")
    with target:
        func = module.scale_rows(64, module.BLOCK, dtype=torch.float16)
    trace = _record(f"{FORMS / 'expressions.py'}::scale_rows(64, BLOCK, dtype=torch.float16)", ["hip:gfx942"])
    run = _ok_run(trace, "hip:gfx942")
    assert run.args == {"args": [64, 256], "kwargs": {"dtype": "torch.float16"}}
    assert 'match_buffer(X_handle, (64, 256), "float16"' in _first_ir(trace, run)
    assert trace.kernel_source(run) == _untraced_source(func, target)


@pytest.mark.parametrize(
    ("call", "error", "fragments"),
    [
        ("vec_add(BLOK)", UsageError, ["argument 'BLOK' of vec_add(BLOK)", "name 'BLOK' is not defined"]),
        (
            "quantize(64, 256, out_dtype=failing_helper())",
            KernelSourceError,
            ["argument 'failing_helper()'", "ValueError: no FP8 on this platform (at expressions.py:"],
        ),
    ],
)
def test_expression_errors_name_the_argument(call: str, error: type[Exception], fragments: list[str]) -> None:
    with pytest.raises(error) as caught:
        _record(f"{FORMS / 'expressions.py'}::{call}", ["cuda:sm_90"])
    for fragment in fragments:
        assert fragment in str(caught.value)


def test_cli_errors_are_one_line_with_their_exit_codes(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    out = str(tmp_path / "t.jsonl")
    cases = [
        # import_error.py fails to import (exit 4): exit 2 shows the spec was refused first
        (f"{DATA / 'import_error.py'}::k(1 <<)", ExitCode.USAGE, "cannot parse the call"),
        (f"{FORMS / 'expressions.py'}::vec_add(BLOK)", ExitCode.USAGE, "name 'BLOK' is not defined"),
        (
            f"{FORMS / 'expressions.py'}::quantize(1, 2, out_dtype=failing_helper())",
            ExitCode.KERNEL_SOURCE,
            "raised",
        ),
        ("tilepkg.nothing_here::relu(1)", ExitCode.INPUT, "neither a file nor a module"),
    ]
    for spec, code, fragment in cases:
        assert main(["record", spec, "-t", "cuda:sm_90", "-o", out, "-q"]) == code
        err = capsys.readouterr().err
        assert err.startswith("irtrace: error:") and fragment in err and len(err.strip().splitlines()) == 1


# ----------------------------------------------------------------------------- packages


def test_relative_import_in_a_regular_package() -> None:
    trace = _record(f"{FORMS / 'tilepkg' / 'elementwise.py'}::relu(64, 96)", ["cuda:sm_90"])
    run = _ok_run(trace, "cuda:sm_90")
    # ROW_TILE == 32 and pick_block(96) == 32 come from tilepkg/common.py
    assert _allocations(trace, run) == {"tile": (32, 32)}


def test_relative_import_through_a_folder_without_init(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(FORMS))
    module = importlib.import_module("tilepkg.ops.scale")  # as python -m tilepkg.ops.scale would
    target = _target("hip:gfx942")
    with target:
        func = module.scale.get_tir(64, 192)
    trace = _record(f"{FORMS / 'tilepkg' / 'ops' / 'scale.py'}::scale(64, 192)", ["hip:gfx942", "cuda:sm_90"])
    run = _ok_run(trace, "hip:gfx942")
    assert _ok_run(trace, "cuda:sm_90")
    assert _allocations(trace, run) == {"tile": (32, 64)}  # pick_block(192, widest=128) == 64
    assert trace.kernel_source(run) == _untraced_source(func, target)


def test_namespace_packages_all_the_way_up() -> None:
    assert not (FORMS / "nsroot" / "__init__.py").exists()
    trace = _record(f"{FORMS / 'nsroot' / 'kernels' / 'fill.py'}::fill(16, 128)", ["cuda:sm_90"])
    run = _ok_run(trace, "cuda:sm_90")
    assert 'T.thread_binding(2, thread="blockIdx.x")' in _first_ir(trace, run)  # 128 / TILE (64)


def test_dotted_module_spec_from_a_manifest_folder(tmp_path: Path) -> None:
    manifest = tmp_path / "irtrace.toml"
    manifest.write_text(
        '[[kernel]]\nspec = "tilepkg.ops.scale::scale(32, 256)"\ntargets = ["cuda:sm_90"]\n'
        "[kernel.pass_configs]\ntl.disable_warp_specialized = true\n"
    )
    (request,) = load_manifest(manifest)
    assert request.pass_configs == {"tl.disable_warp_specialized": True}
    with TraceWriter() as writer:
        recording = record_kernels(
            [RecordRequest(request.spec, request.targets, request.pass_configs, base_dir=FORMS)], writer
        )
        assert not recording.errors
        trace = writer.trace()
    run = _ok_run(trace, "cuda:sm_90")
    assert run.spec == "tilepkg.ops.scale::scale(32, 256)"
    assert _allocations(trace, run) == {"tile": (32, 128)}


def test_dotted_module_spec_from_the_current_folder(tmp_path: Path) -> None:
    out = tmp_path / "t.jsonl"
    script = "import sys; del sys.path[0]; from irtrace.cli.main import main; raise SystemExit(main())"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            script,
            "record",
            "tilepkg.elementwise::relu(64, 512)",
            "-t",
            "cuda:sm_90",
            "-o",
            str(out),
        ],
        cwd=FORMS,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == ExitCode.OK, done.stderr
    trace = load_trace(out)
    run = _ok_run(trace, "cuda:sm_90")
    assert _allocations(trace, run) == {"tile": (32, 256)}


# ----------------------------------------------------------------------------- eager jit and dynamic shapes


def test_eager_jit_with_compile_keyword_sizes() -> None:
    """The example's eager GEMM: ``T.const`` sizes given by keyword, as ``.compile(N=..., K=...)``
    takes them; the tensors need no value and the ``T.dynamic`` token count stays symbolic."""
    module = _import_file(EAGER_GEMM)
    call = {"N": 512, "K": 256, "block_M": 128}
    trace = _record(f"{EAGER_GEMM}::token_matmul(N=512, K=256, block_M=128)", ["cuda:sm_90"])
    target = _target("cuda:sm_90")
    with target:
        func = module.token_matmul.get_tir(**call)
    run = _ok_run(trace, "cuda:sm_90")
    assert run.args == {"args": [], "kwargs": call}
    assert [_shape(func, i) for i in range(3)] == [("tokens", 256), (512, 256), ("tokens", 512)]
    assert "= T.match_buffer(W, (512, 256)" in _first_ir(trace, run)
    assert _allocations(trace, run)["X_shared"] == (128, 32)
    assert trace.kernel_source(run) == _untraced_source(func, target)


def test_eager_jit_missing_size_says_how_to_give_it() -> None:
    trace = _record(f"{EAGER_GEMM}::token_matmul(block_M=128)", ["cuda:sm_90"])
    (run,) = trace.runs
    assert run.status == STATUS_FAILED
    assert "give it by name: token_matmul(N=...)" in (run.error or "")


@pytest.mark.parametrize(
    ("spec", "target", "symbol"),
    [
        (f"{EAGER_GEMM}::token_matmul(N=512, K=256)", "cuda:sm_90", "tokens"),
        (f"{FORMS / 'dynamic.py'}::dynamic_copy()", "hip:gfx942", "m"),
        (f"{FORMS / 'dynamic.py'}::dynamic_rows_add(N=1024)", "cuda:sm_90", "m"),
    ],
)
def test_dynamic_sizes_stay_symbolic(spec: str, target: str, symbol: str) -> None:
    trace = _record(f"{FORMS / spec}", [target])
    run = _ok_run(trace, target)
    # the size stays a runtime parameter of the kernel instead of a constant
    assert f", int {symbol})" in _kernel_signature(trace.kernel_source(run) or "")


# ----------------------------------------------------------------------------- pass configs


@pytest.mark.parametrize(
    "text", ["true", "false", "16", "0x10", "1_000", "-3", "2.5", "1e-3", "inf", "-inf", '"text"', "[1, 2]"]
)
def test_pass_config_values_are_typed_as_toml_types_them(text: str) -> None:
    assert parse_pass_config(f"tl.some_option={text}") == (
        "tl.some_option",
        tomllib.loads(f"v = {text}")["v"],
    )


def test_pass_config_words() -> None:
    assert parse_pass_config("tl.a=TRUE") == ("tl.a", True)
    assert parse_pass_config("tl.a=False") == ("tl.a", False)
    assert parse_pass_config("tl.a=None") == ("tl.a", None)
    assert parse_pass_config("tl.a=-O3 --use_fast_math") == ("tl.a", "-O3 --use_fast_math")
    with pytest.raises(UsageError, match="no value"):
        parse_pass_config("tl.a=")


def test_cli_pass_config_true_reaches_tvm_as_a_boolean(tmp_path: Path) -> None:
    out = tmp_path / "t.jsonl"
    args = ["record", SMALL_GEMM, "-t", "cuda:sm_90", "-o", str(out), "-q"]
    assert main([*args, "-c", "tl.disable_warp_specialized=true"]) == ExitCode.OK
    run = load_trace(out).runs[0]
    assert run.pass_configs["tl.disable_warp_specialized"] is True

    gemm = _import_file(ROOT / "examples" / "gemm.py")
    target = _target("cuda:sm_90")
    with target:
        func = gemm.matmul(256, 256, 256)
    without_ws = _untraced_source(func, target, {"tl.disable_warp_specialized": True})
    assert load_trace(out).kernel_source(run) == without_ws
    assert without_ws != _untraced_source(func, target)


def test_dotted_module_that_is_not_there() -> None:
    with pytest.raises(InputError, match="neither a file nor a module"):
        _record("no_such_package_here.kernels::k()", ["cuda:sm_90"], base_dir=FORMS)
