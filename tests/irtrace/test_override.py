"""``--override KERNEL=path``: the file's text is what TileLang compiles and what the run records.

Oracles: TileLang's own ``tilelang.lower`` without irtrace gives the source the override replaced;
the file's bytes give the SHA-256; nvcc's PTX of the run (sweep) holds the override's constant;
``tilelang.compile`` (TileLang's nvcc route, sweep) returns the file as its kernel source.
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

import pytest

from irtrace.base.errors import ExitCode
from irtrace.cli.main import main
from irtrace.trace.model import PHASE_CODEGEN, Trace
from irtrace.trace.reader import load_trace

from ..conftest import DATA

KERNEL_FILE = DATA / "override_marker.py"
OVERRIDE = DATA / "override_marker.cu"
MARKER_PTX = str(0x42280000)  # 42.0f as the PTX immediate; TileLang's 1.0f is 1065353216
SPECS = [f"{KERNEL_FILE}::fill", f"{KERNEL_FILE}::untouched"]


def untraced_source(factory: str) -> str:
    """The kernel source TileLang generates with no irtrace and no override in force."""
    import tilelang
    from tilelang.backend.target import determine_target

    sys.path.insert(0, str(DATA))
    try:
        import override_marker
    finally:
        sys.path.remove(str(DATA))
    target = determine_target({"kind": "cuda", "arch": "sm_90"}, return_object=True)
    with target:
        return str(tilelang.lower(getattr(override_marker, factory)(), target=target).kernel_source)


@pytest.fixture(scope="module")
def overridden(tmp_path_factory: pytest.TempPathFactory) -> Trace:
    path = tmp_path_factory.mktemp("override") / "trace.jsonl"
    code = main(
        ["record", *SPECS, "-t", "cuda:sm_90", "-o", str(path), "-q", "--override", f"fill={OVERRIDE}"]
    )
    assert code == ExitCode.OK
    return load_trace(path)


def test_the_override_is_the_recorded_source(overridden: Trace) -> None:
    run = overridden.find_run("fill", "cuda:sm_90")
    assert overridden.kernel_source(run) == OVERRIDE.read_text()
    assert run.source_sha256 == hashlib.sha256(OVERRIDE.read_bytes()).hexdigest()
    (stage,) = [p for p in run.passes if p.name == "override"]
    codegen = next(p for p in run.passes if p.name == "codegen")
    assert (stage.phase, stage.parent, stage.depth) == (PHASE_CODEGEN, codegen.index, 1)
    assert codegen.ir_after == stage.ir_after == run.source_sha256
    generated = untraced_source("fill")
    assert overridden.text(stage.ir_before) == generated
    assert "0x1p+0f" in generated and "0x1p+0f" not in OVERRIDE.read_text()


def test_other_kernels_keep_tilelangs_source_and_the_hook_is_removed(overridden: Trace) -> None:
    import tvm_ffi

    run = overridden.find_run("untouched", "cuda:sm_90")
    assert not [p for p in run.passes if p.name == "override"]
    assert overridden.kernel_source(run) == untraced_source("untouched")
    assert tvm_ffi.get_global_func("tilelang_callback_cuda_postproc", allow_missing=True) is None


def test_bad_overrides_are_one_line_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    output = tmp_path / "t.jsonl"
    base = ["record", SPECS[0], "-t", "cuda:sm_90", "-o", str(output), "-q"]
    assert main([*base, "--override", f"fill={tmp_path / 'missing.cu'}"]) == ExitCode.INPUT
    assert main([*base, "--override", "fill"]) == ExitCode.USAGE
    assert main([*base, "--override", f"fill={OVERRIDE}", "--jobs", "2"]) == ExitCode.USAGE
    assert not output.exists()
    capsys.readouterr()
    assert main([*base, "--override", f"gemm={OVERRIDE}"]) == ExitCode.NOT_FOUND
    err = capsys.readouterr().err
    assert "--override gemm: no CUDA or HIP kernel of that name" in err and "fill" in err
    trace = load_trace(output)  # written, with TileLang's own source
    assert trace.kernel_source(trace.find_run("fill", "cuda:sm_90")) == untraced_source("fill")


@pytest.mark.sweep
def test_nvcc_compiles_the_override(tmp_path: Path) -> None:
    """--machine-code: the PTX holds the override's 42.0f; TileLang's own compile returns the file."""
    import tilelang

    from irtrace.lowering.override import overriding, parse_overrides

    path = tmp_path / "mc.jsonl"
    argv = ["record", SPECS[0], "-t", "cuda:sm_90", "-o", str(path), "-q", "--machine-code"]
    assert main([*argv, "--override", f"fill={OVERRIDE}"]) == ExitCode.OK
    trace = load_trace(path)
    ptx = trace.ir_after(next(p for p in trace.find_run("fill", "cuda:sm_90").passes if p.name == "ptx"))
    assert MARKER_PTX in ptx and "1065353216" not in ptx

    sys.path.insert(0, str(DATA))
    import override_marker

    sys.path.remove(str(DATA))
    # --bench's route: TileLang compiles a kernel irtrace recorded with an override; the generated
    # text it replaced then is replaced again
    with overriding(parse_overrides([f"fill={OVERRIDE}"])):
        main(["record", SPECS[0], "-t", "cuda:sm_90", "-o", str(tmp_path / "again.jsonl"), "-q"])
        compiled = tilelang.compile(override_marker.fill(), target={"kind": "cuda", "arch": "sm_90"})
    assert str(compiled.get_kernel_source()) == OVERRIDE.read_text()
