"""Run to run, target to target and pass to pass on real traces, checked against answers computed
independently from the traces' IR texts."""

from __future__ import annotations

import json

import pytest

from irtrace.errors import NotInTraceError
from irtrace.trace import KernelRun, Trace
from passdiff import (
    NormalizeRules,
    PassdiffError,
    align_passes,
    compare_runs,
    compare_targets,
    compare_traces,
    diff_pass,
    diff_span,
)

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


def test_run_to_run_finds_the_first_pass_a_config_changes(gemm_trace: Trace, gemm_no_ws_trace: Trace) -> None:
    run_a = gemm_trace.find_run("matmul", "cuda:sm_90")
    run_b = gemm_no_ws_trace.find_run("matmul", "cuda:sm_90")
    assert run_b.pass_configs.get("tl.disable_warp_specialized") is True
    outputs_a, outputs_b = _outputs(gemm_trace, run_a), _outputs(gemm_no_ws_trace, run_b)
    expected = _first_differing(outputs_a, outputs_b)
    assert expected is not None

    for rules in (RAW, NormalizeRules()):
        comparison = compare_runs(gemm_trace, run_a, gemm_no_ws_trace, run_b, rules)
        assert comparison.first_difference is not None
        assert comparison.first_difference.label == expected
        assert comparison.different
    comparison = compare_runs(gemm_trace, run_a, gemm_no_ws_trace, run_b, RAW)
    assert comparison.diff is not None and not comparison.diff.is_empty
    assert comparison.diff.before == outputs_a[expected]
    assert comparison.diff.after == outputs_b[expected]
    # Passes only one run ran are named as such.
    assert set(comparison.removed_passes) == set(outputs_a) - set(outputs_b)
    assert set(comparison.added_passes) == set(outputs_b) - set(outputs_a)
    assert any("WarpSpecializ" in label for label in comparison.removed_passes)
    assert comparison.source_diff is not None and not comparison.source_diff.is_empty


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


def test_cross_target_finds_the_first_shared_pass_where_the_ir_differs(gemm_trace: Trace) -> None:
    cuda = gemm_trace.find_run("matmul", "cuda:sm_90")
    hip = gemm_trace.find_run("matmul", "hip:gfx942")
    outputs_cuda, outputs_hip = _outputs(gemm_trace, cuda), _outputs(gemm_trace, hip)

    raw_expected = _first_differing(outputs_cuda, outputs_hip)
    raw = compare_targets(gemm_trace, "matmul", "cuda:sm_90", "hip:gfx942", RAW)
    assert raw.first_difference is not None and raw.first_difference.label == raw_expected

    masked_expected = _first_differing(
        outputs_cuda, outputs_hip, lambda x, y: _without_target_json(x) == _without_target_json(y)
    )
    masked = compare_targets(gemm_trace, "matmul", "cuda:sm_90", "hip:gfx942", TARGETS_ONLY)
    assert masked.first_difference is not None and masked.first_difference.label == masked_expected
    # Masking the target JSON moves the answer past the pass that only binds the target.
    assert masked_expected != raw_expected
    assert masked.first_difference.a is not None and raw.first_difference.a is not None
    assert masked.first_difference.a.index > raw.first_difference.a.index

    # The final kernel sources are diffed too: CUDA against HIP.
    assert masked.source_diff is not None and not masked.source_diff.is_empty
    assert "hip" in masked.source_diff.after.lower()
    assert any("WarpSpecializ" in label for label in masked.removed_passes)


def test_align_passes_by_name_and_occurrence(gemm_trace: Trace) -> None:
    cuda = gemm_trace.find_run("matmul", "cuda:sm_90")
    hip = gemm_trace.find_run("matmul", "hip:gfx942")
    rows = align_passes(cuda, hip)
    labels_cuda, labels_hip = cuda.occurrence_names(), hip.occurrence_names()
    assert sorted(r.label for r in rows) == sorted(set(labels_cuda) | set(labels_hip))
    for row in rows:
        if row.status in ("shared", "moved"):
            assert row.a is not None and row.b is not None and row.a.name == row.b.name == row.key[0]
        assert (row.status == "only_a") == (row.label not in labels_hip)
        assert (row.status == "only_b") == (row.label not in labels_cuda)
    shared = [r.label for r in rows if r.status == "shared"]
    assert [x for x in labels_hip if x in shared] == shared  # shared passes keep their order in both
    assert [x for x in labels_cuda if x in shared] == shared


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
    with pytest.raises(NotInTraceError, match=r"tl\.LayoutInference"):
        diff_pass(gemm_trace, run, "tl.NoSuchPass")
