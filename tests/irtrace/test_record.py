"""Recording real lowerings: every target, failures, the spec forms, cut-short and merged traces."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from irtrace.base.errors import InputError, KernelSourceError, NotInTraceError, TraceFormatError
from irtrace.lowering.api import RecordRequest, prepare_request, record_kernels, record_prepared
from irtrace.lowering.recorder import RecordedLowering
from irtrace.targets.specs import parse_spec
from irtrace.trace.model import (
    PHASE_CHECK,
    PHASE_CODEGEN,
    PHASE_FINALIZE,
    PHASE_LOWER,
    STATUS_FAILED,
    STATUS_INCOMPLETE,
    STATUS_OK,
    UNFINISHED,
    Trace,
    text_sha256,
)
from irtrace.trace.reader import load_trace
from irtrace.trace.writer import TraceWriter, merge_traces

from ..conftest import DATA, EXAMPLES, SMALL_GEMM, record_to_file


def _record(spec: str, targets: list[str], path: Path | None = None, **configs: object) -> Trace:
    with TraceWriter(path) as writer:
        recording = record_kernels([RecordRequest(parse_spec(spec), tuple(targets), dict(configs))], writer)
        if recording.errors:
            raise recording.errors[0]
        return writer.trace()


@pytest.mark.parametrize(
    ("target", "pipeline"),
    [
        ("cuda:sm_80", "cuda"),
        ("cuda:sm_90", "cuda"),
        ("cuda:sm_100a", "cuda"),
        ("hip:gfx942", "hip"),
        ("hip:gfx950", "hip"),
        ("metal", "metal"),
    ],
)
def test_portable_gemm_lowers_on_every_target(target: str, pipeline: str) -> None:
    trace = _record(SMALL_GEMM, [target])
    (run,) = trace.runs
    assert run.status == STATUS_OK and run.target == target
    names = [p.name for p in run.passes]
    top_level = [p for p in run.passes if p.depth == 0]
    assert "tl.LayoutInference" in names and top_level[-1].name == "codegen"
    assert {p.pipeline for p in run.passes if p.phase == PHASE_LOWER} == {pipeline}
    assert run.passes[0].phase == PHASE_CHECK
    assert all(p.phase == PHASE_CODEGEN for p in run.passes if p.index >= top_level[-1].index)
    assert any(p.phase == PHASE_FINALIZE and p.scope == "device" for p in run.passes)
    source = trace.kernel_source(run)
    assert source is not None and text_sha256(source) == run.source_sha256
    assert json.loads(run.target_detail)["kind"] == pipeline


@pytest.mark.parametrize(
    "spec", ["ascend_vector.py::add_silu()", "ascend_gemm_epilogue.py::matmul_bias_relu()"]
)
def test_ascend_kernels_lower_for_ascend(spec: str) -> None:
    trace = _record(f"{EXAMPLES / spec}", [])  # no target given: the Ascend dialect picks `ascend`
    assert len(trace.runs) == 1
    for run in trace.runs:
        assert run.target == "ascend"
        assert run.status == STATUS_OK, run.error
        assert any(p.name == "tl.AscendLayoutInference" for p in run.passes)
        assert {p.pipeline for p in run.passes if p.phase == PHASE_LOWER} == {"ascend"}


def test_pass_records_are_consistent(gemm_trace: Trace) -> None:
    for run in gemm_trace.runs:
        indexes = [p.index for p in run.passes]
        assert indexes == list(range(len(run.passes)))
        for record in run.passes:
            assert record.wall_s >= record.self_s >= 0
            assert record.changed == (record.ir_before != record.ir_after)
            if record.parent is not None:
                parent = run.passes[record.parent]
                assert parent.depth == record.depth - 1
                assert parent.start_s <= record.start_s
            if record.phase != PHASE_CODEGEN:
                assert gemm_trace.ir_after(record).startswith("# from tvm.script")
        # pass i's input is what the previous top-level pass produced, except across the split
        assert run.passes[0].ir_before == run.input_ir
        nested = [p for p in run.passes if p.depth > 0]
        assert nested, "TileLang nests passes (LowerTileOp runs Simplify); nesting is recorded"


def test_identical_modules_are_stored_once(gemm_trace: Trace) -> None:
    for run in gemm_trace.runs:
        referenced = {p.ir_after for p in run.passes if p.ir_after} | {p.ir_before for p in run.passes}
        changed = sum(p.changed for p in run.passes)
        assert len(referenced) <= changed + 2
    assert len(set(gemm_trace.texts.values())) == len(gemm_trace.texts)


def test_anonymous_passes_are_named_from_python() -> None:
    trace = _record(SMALL_GEMM, ["cuda:sm_90"])
    run = trace.runs[0]
    anonymous = [p for p in run.passes if p.raw_name == "pass_fn"]
    assert anonymous
    assert {p.name for p in anonymous} >= {"NestedLoopChecker", "FragmentLoopChecker"}
    assert all(p.name != "pass_fn" for p in anonymous)


def test_failing_pass_is_recorded_with_ir_before(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    trace = _record(f"{DATA / 'bad_layout.py'}::conflicting_layouts()", ["cuda:sm_90"], path)
    (run,) = trace.runs
    assert run.status == STATUS_FAILED
    failed = [p for p in run.passes if p.failed]
    assert [p.name for p in failed] == ["tl.LayoutInference"]
    assert failed[0].ir_after is None and failed[0].error and "Layout infer conflict" in failed[0].error
    assert "C_local" in trace.ir_before(failed[0])
    assert run.source_sha256 is None
    reloaded = load_trace(path)  # the file was written despite the failure
    assert reloaded.runs[0].status == STATUS_FAILED and not reloaded.truncated
    assert reloaded.runs[0].passes[-1].name == "tl.LayoutInference"


def test_factory_error_is_a_failed_run_and_others_continue() -> None:
    trace = _record(str(DATA / "jit_kernels.py") + "::eager_scale()", ["cuda:sm_90", "hip:gfx942"])
    assert [r.status for r in trace.runs] == [STATUS_FAILED, STATUS_FAILED]
    assert "constexpr variable `M`" in (trace.runs[0].error or "")


def test_jit_kernels_lazy_and_eager_with_their_pass_configs() -> None:
    lazy = _record(f"{DATA / 'jit_kernels.py'}::lazy_add(M=128)", ["cuda:sm_90"]).runs[0]
    assert lazy.status == STATUS_OK
    assert lazy.pass_configs == {"tl.disable_warp_specialized": True}
    eager = _record(f"{DATA / 'jit_kernels.py'}::eager_scale(M=64, N=256)", ["cuda:sm_90"]).runs[0]
    assert eager.status == STATUS_OK and eager.args == {"args": [], "kwargs": {"M": 64, "N": 256}}


def test_extra_pass_configs_apply() -> None:
    plain = _record(SMALL_GEMM, ["cuda:sm_90"]).runs[0]
    no_ws = _record(SMALL_GEMM, ["cuda:sm_90"], **{"tl.disable_warp_specialized": True}).runs[0]
    assert no_ws.pass_configs["tl.disable_warp_specialized"] is True
    assert plain.source_sha256 != no_ws.source_sha256


def test_module_level_primfuncs_and_sibling_imports() -> None:
    trace = _record(str(DATA / "sibling" / "fill_kernel.py"), ["cuda:sm_90"])
    assert [r.kernel for r in trace.runs] == ["fill_ones", "fill_twos"]
    assert all(r.status == STATUS_OK for r in trace.runs)


def test_package_relative_imports() -> None:
    trace = _record(f"{DATA / 'kernelpkg' / 'copy_kernel.py'}::tiled_copy(M=128, N=128)", ["hip:gfx942"])
    assert trace.runs[0].status == STATUS_OK


def test_main_block_does_not_run() -> None:
    # jit_kernels.py raises SystemExit in its __main__ block
    trace = _record(f"{DATA / 'jit_kernels.py'}::lazy_add()", ["cuda:sm_90"])
    assert trace.runs[0].status == STATUS_OK


@pytest.mark.parametrize(
    ("spec", "error", "fragment"),
    [
        ("tests/data/nope.py::k()", InputError, "does not exist"),
        (f"{DATA}::k()", InputError, "is a directory"),
        (f"{DATA / 'syntax_error.py'}::broken()", KernelSourceError, "syntax_error.py:7: syntax error"),
        (f"{DATA / 'import_error.py'}", KernelSourceError, "ModuleNotFoundError"),
        (f"{DATA / 'jit_kernels.py'}::T", InputError, "not a kernel"),
        (f"{DATA / 'jit_kernels.py'}::nothing_here", InputError, "lazy_add (jit)"),
        (f"{DATA / 'jit_kernels.py'}", InputError, "defines no module-level PrimFunc"),
    ],
)
def test_loading_errors(spec: str, error: type[Exception], fragment: str) -> None:
    with pytest.raises(error, match=fragment.replace("(", r"\(").replace(")", r"\)")):
        _record(spec, ["cuda:sm_90"])


def test_cut_short_trace_loads_up_to_last_complete_pass(tmp_path: Path) -> None:
    path = tmp_path / "full.jsonl"
    record_to_file(path, [SMALL_GEMM], ["cuda:sm_90"])
    lines = path.read_text().splitlines(keepends=True)
    pass_lines = [i for i, line in enumerate(lines) if line.startswith('{"record":"pass"')]
    cut = pass_lines[40]
    short = tmp_path / "short.jsonl"
    short.write_text("".join(lines[:cut]) + lines[cut][: len(lines[cut]) // 2])
    trace = load_trace(short)
    assert trace.truncated
    (run,) = trace.runs
    assert run.status == STATUS_INCOMPLETE
    finished = [p for p in run.passes if p.error != UNFINISHED]
    assert len(finished) == sum(1 for i in pass_lines if i < cut)
    assert trace.ir_after(finished[-1])
    # The pass whose record was cut was running: it is kept, failed, with the IR it received.
    running = [p for p in run.passes if p.error == UNFINISHED]
    assert [p.name for p in running] == [run.running] and trace.ir_before(running[0])


def test_merge_joins_runs_and_stores_texts_once(tmp_path: Path, gemm_trace: Trace) -> None:
    other = record_to_file(tmp_path / "fill.jsonl", [str(DATA / "sibling" / "fill_kernel.py")], ["metal"])
    assert gemm_trace.path is not None and other.path is not None
    merged = merge_traces([gemm_trace.path, other.path], tmp_path / "merged.jsonl")
    reloaded = load_trace(tmp_path / "merged.jsonl")
    assert [(r.kernel, r.target) for r in reloaded.runs] == [
        *[(r.kernel, r.target) for r in gemm_trace.runs],
        *[(r.kernel, r.target) for r in other.runs],
    ]
    assert len(merged.texts) <= len(gemm_trace.texts) + len(other.texts)
    for run in reloaded.runs:
        assert reloaded.kernel_source(run)


def test_find_pass_occurrences_and_errors(gemm_trace: Trace) -> None:
    run = gemm_trace.find_run("matmul", "cuda:sm_90")
    simplify = [p for p in run.passes if p.name == "tl.Simplify"]
    assert run.find_pass("tl.Simplify#2") == simplify[1]
    assert run.find_pass("LayoutInference").name == "tl.LayoutInference"
    with pytest.raises(NotInTraceError, match=r"did you mean tl\.LayoutInference"):
        run.find_pass("LayoutInferense")
    with pytest.raises(NotInTraceError, match=r"matmul on cuda:sm_90"):
        gemm_trace.find_run("matmul", "metal")


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        ("", "is empty"),
        ("hello\n", "not a trace record"),
        ('{"record":"header","format":"irtrace","schema":99}\n', "schema 99, newer"),
        ('{"record":"header","format":"other","schema":1}\n', "not an irtrace trace"),
        (
            '{"record":"header","format":"irtrace","schema":1}\n{"record":"pass","run":0}\n{}\n',
            "pass record without 'index'",
        ),
        (
            '{"record":"header","format":"irtrace","schema":1}\n{"record":"end","run":0,"status":"ok"}\n',
            "no run record before it",
        ),
    ],
)
def test_bad_trace_files(tmp_path: Path, content: str, fragment: str) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(content)
    with pytest.raises(TraceFormatError, match=fragment):
        load_trace(path)


def test_missing_trace_file(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="does not exist"):
        load_trace(tmp_path / "absent.jsonl")


def test_gzip_traces_round_trip(tmp_path: Path) -> None:
    trace = record_to_file(
        tmp_path / "t.jsonl.gz", [str(DATA / "sibling" / "fill_kernel.py")], ["cuda:sm_80"]
    )
    assert [r.status for r in trace.runs] == [STATUS_OK, STATUS_OK]


def test_stop_after_ends_the_pipeline_early() -> None:
    with TraceWriter() as writer:
        (prepared,) = prepare_request(RecordRequest(parse_spec(SMALL_GEMM), ("cuda:sm_90",)))
        result = record_prepared(prepared, writer, stop_after=["tl.LayoutInference"])
    assert isinstance(result, RecordedLowering)
    assert result.run.passes[-1].name == "tl.LayoutInference"
    assert result.run.status == STATUS_OK and result.run.source_sha256 is None
    assert "layout_map" in result.stopped_module.script()


def test_corrupt_ir_text_is_reported_when_read(tmp_path: Path) -> None:
    sha = "a" * 64
    path = tmp_path / "t.jsonl"
    path.write_text(
        '{"record":"header","format":"irtrace","schema":1}\n'
        f'{{"record":"ir","sha256":"{sha}","text":"\\q broken"}}\n'
    )
    trace = load_trace(path)  # IR texts are decoded lazily, when read
    with pytest.raises(TraceFormatError, match="corrupt"):
        trace.text(sha)
