"""Run to run, target to target and pass to pass on real traces, checked against answers computed
independently from the traces' IR texts."""

from __future__ import annotations

import json

import pytest

from irtrace.base.errors import NotInTraceError
from irtrace.diff import (
    NormalizeRules,
    PassdiffError,
    align_passes,
    compare_targets,
    compare_traces,
    diff_pass,
    diff_span,
)
from irtrace.trace.model import KernelRun, Trace

RAW = NormalizeRules.none()
TARGETS_ONLY = NormalizeRules(mask_addresses=False, mask_metadata=False)


def _outputs(trace: Trace, run: KernelRun) -> dict[str, str]:
    """IR after each pass, by its ``name#N`` label."""
    return {label: trace.ir_after(p) for label, p in zip(run.occurrence_names(), run.passes, strict=True)}


def _first_differing(a: dict[str, str], b: dict[str, str], same=lambda x, y: x == y) -> str | None:
    """The first label of ``a``, in ``a``'s order, also in ``b`` whose text differs."""
    return next((label for label, text in a.items() if label in b and not same(text, b[label])), None)


def _without_target_json(text: str) -> str:
    """Drop the JSON argument of every ``T.target(...)``, parsed as JSON (not passdiff's scanner)."""
    decoder = json.JSONDecoder()
    out, position = [], 0
    while (start := text.find("T.target(", position)) >= 0:
        _, end = decoder.raw_decode(text, start + len("T.target("))
        out.append(text[position:start])
        position = end + 1
    return "".join(out) + text[position:]


def test_run_to_run_of_identical_traces_is_no_difference(gemm_trace: Trace) -> None:
    comparisons = compare_traces(gemm_trace, gemm_trace)
    assert [(c.kernel, c.target_a) for c in comparisons] == [(r.kernel, r.target) for r in gemm_trace.runs]
    for comparison in comparisons:
        assert not comparison.different
        assert comparison.first_difference is None
        assert all(row.status == "shared" for row in comparison.alignment)


def test_compare_traces_names_runs_only_in_one_trace(gemm_trace: Trace, gemm_no_ws_trace: Trace) -> None:
    comparisons = compare_traces(gemm_trace, gemm_no_ws_trace)
    presence = {(c.target_a or c.target_b): c.presence for c in comparisons}
    assert presence == {"cuda:sm_90": "both", "hip:gfx942": "only_a"}
    with pytest.raises(NotInTraceError, match="matmul on cuda:sm_90"):
        compare_traces(gemm_trace, gemm_no_ws_trace, target="metal")


def test_cross_target_finds_where_the_ir_first_parts(gemm_trace: Trace) -> None:
    cuda = gemm_trace.find_run("matmul", "cuda:sm_90")
    hip = gemm_trace.find_run("matmul", "hip:gfx942")
    outputs_cuda, outputs_hip = _outputs(gemm_trace, cuda), _outputs(gemm_trace, hip)

    # Raw texts: the passes before BindTarget are the same in both pipelines, and BindTarget writes
    # each target's JSON, so it is the first pass (of both) whose output differs.
    raw_expected = _first_differing(outputs_cuda, outputs_hip)
    assert raw_expected == "tirx.BindTarget#1"
    raw = compare_targets(gemm_trace, "matmul", "cuda:sm_90", "hip:gfx942", RAW)
    assert raw.first_difference is not None and raw.first_difference.label == raw_expected
    assert raw.first_difference.status == "shared" and not raw.input_differs

    # With the target JSON masked (the JSON parsed here, not by passdiff's scanner) the answer is
    # the first CUDA pass whose output HIP never produced at any point.
    hip_held = {_without_target_json(text) for text in outputs_hip.values()}
    hip_held.add(_without_target_json(gemm_trace.ir_before(hip.passes[0])))
    masked_expected = next(
        label for label, text in outputs_cuda.items() if _without_target_json(text) not in hip_held
    )
    masked = compare_targets(gemm_trace, "matmul", "cuda:sm_90", "hip:gfx942", TARGETS_ONLY)
    assert masked.first_difference is not None and masked.first_difference.label == masked_expected
    # A CUDA-only pass here (warp specialization), which HIP's pipeline does not run at all.
    assert masked.first_difference.status == "only_a"
    assert masked_expected.split("#")[0] not in {p.name for p in hip.passes}
    assert masked.first_difference.a is not None and raw.first_difference.a is not None
    assert masked.first_difference.a.index > raw.first_difference.a.index

    # The final kernel sources are diffed too: CUDA against HIP.
    assert masked.source_diff is not None and not masked.source_diff.is_empty
    assert "hip" in masked.source_diff.after.lower()
    assert any("WarpSpecializ" in label for label in masked.removed_passes)


def test_align_passes_pairs_passes_at_the_same_point_of_both_pipelines(gemm_trace: Trace) -> None:
    cuda = gemm_trace.find_run("matmul", "cuda:sm_90")
    hip = gemm_trace.find_run("matmul", "hip:gfx942")
    rows = align_passes(cuda, hip)
    # Every pass of each run is in exactly one row.
    assert sorted(r.a.index for r in rows if r.a) == [p.index for p in cuda.passes]
    assert sorted(r.b.index for r in rows if r.b) == [p.index for p in hip.passes]
    names = {p.index: p.name for p in cuda.passes}, {p.index: p.name for p in hip.passes}
    for row in rows:
        if row.status in ("shared", "moved"):
            assert row.a is not None and row.b is not None and row.a.name == row.b.name
        if row.status == "shared":
            assert row.a is not None and row.b is not None
            parent_a = names[0].get(row.a.parent) if row.a.parent is not None else None
            parent_b = names[1].get(row.b.parent) if row.b.parent is not None else None
            assert parent_a == parent_b, row.label
        if row.status == "only_a":
            assert row.a is not None and row.b is None
    shared = [r for r in rows if r.status == "shared"]
    assert [r.a.index for r in shared if r.a] == sorted(r.a.index for r in shared if r.a)
    assert [r.b.index for r in shared if r.b] == sorted(r.b.index for r in shared if r.b)
    # Labels are each run's own name#N.
    assert {r.label_a for r in rows if r.a} == set(cuda.occurrence_names())
    assert {r.label_b for r in rows if r.b} == set(hip.occurrence_names())
    # Passes neither backend shares are few; the lowering both do lines up.
    assert {"tl.LayoutInference", "tl.LowerTileOp", "tl.MakePackedAPI", "codegen"} <= {
        r.a.name for r in shared if r.a
    }


def test_pass_to_pass_and_nth_occurrence(gemm_trace: Trace) -> None:
    run = gemm_trace.find_run("matmul", "cuda:sm_90")
    layout = run.find_pass("tl.LayoutInference")
    diff = diff_pass(gemm_trace, run, "tl.LayoutInference", RAW)
    assert diff.before == gemm_trace.ir_before(layout) and diff.after == gemm_trace.ir_after(layout)
    assert not diff.is_empty and any("layout_map" in x.text for x in diff.lines if x.kind == "insert")

    simplifies = [p for p in run.passes if p.name == "tl.Simplify"]
    second = diff_pass(gemm_trace, run, "tl.Simplify#2", RAW)
    assert second.before == gemm_trace.ir_before(simplifies[1])

    span = diff_span(gemm_trace, run, "tl.LayoutInference", "tl.LowerTileOp", RAW)
    assert span.before == gemm_trace.ir_before(layout)
    assert span.after == gemm_trace.ir_after(run.find_pass("tl.LowerTileOp"))
    with pytest.raises(PassdiffError, match="runs before"):
        diff_span(gemm_trace, run, "tl.LowerTileOp", "tl.LayoutInference")
    with pytest.raises(NotInTraceError, match=r"did you mean tl\.LayoutInference"):
        diff_pass(gemm_trace, run, "tl.LayoutInferenc")
