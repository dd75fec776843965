"""Alignment by the pipeline's structure, on two real pipelines that differ in one pass config.

The GEMM on ``cuda:sm_90`` runs warp specialization by default; ``tl.disable_warp_specialized``
drops ``tl.ProducerConsumerWarpSpecialized`` and its helpers, and ``tl.LowerTileOp`` then runs
two more ``tl.Simplify`` inside itself, so every later top-level ``tl.Simplify`` has another
``name#N`` in each run. The truth is taken from the oracle (``oracle.py``): both pipelines
lowered again by ``tilelang.lower`` under a synchronous-print instrument.
"""

from __future__ import annotations

from collections import Counter

import pytest

from irtrace.diff import MOVED, NOT_REACHED, ONLY_A, SHARED, NormalizeRules, compare_runs
from irtrace.trace.model import PHASE_CODEGEN, KernelRun, PassRecord, Trace

from ..conftest import EXAMPLES
from .oracle import OraclePass, load_kernel_module, oracle_passes

RAW = NormalizeRules.none()
NO_WS = {"tl.disable_warp_specialized": True}


def _gemm() -> object:
    return load_kernel_module(EXAMPLES / "gemm.py").matmul(256, 256, 256)


@pytest.fixture(scope="module")
def oracle_ws() -> list[OraclePass]:
    return oracle_passes(_gemm(), "cuda:sm_90")


@pytest.fixture(scope="module")
def oracle_no_ws() -> list[OraclePass]:
    return oracle_passes(_gemm(), "cuda:sm_90", NO_WS)


def matched(run: KernelRun, oracle: list[OraclePass]) -> dict[int, OraclePass]:
    """Each recorded pass's oracle pass (same position; the recorder's codegen step has none)."""
    records = [p for p in run.passes if not (p.phase == PHASE_CODEGEN and p.name == "codegen")]
    assert [p.raw_name for p in records] == [p.name for p in oracle[: len(records)]]
    return {record.index: truth for record, truth in zip(records, oracle, strict=False)}


def top_level_after(oracle: list[OraclePass], name: str, previous: str) -> int:
    """Position of the top-level pass ``name`` that follows the top-level pass ``previous``."""
    top = [(k, p.name) for k, p in enumerate(oracle) if p.parent is None]
    return next(
        k for (k, n), (_, before) in zip(top[1:], top, strict=False) if n == name and before == previous
    )


def runs(gemm_trace: Trace, gemm_no_ws_trace: Trace) -> tuple[KernelRun, KernelRun]:
    run_a = gemm_trace.find_run("matmul", "cuda:sm_90")
    run_b = gemm_no_ws_trace.find_run("matmul", "cuda:sm_90")
    assert run_b.pass_configs.get("tl.disable_warp_specialized") is True
    return run_a, run_b


def test_first_difference_is_the_pass_the_config_removes(
    gemm_trace: Trace, gemm_no_ws_trace: Trace, oracle_ws: list[OraclePass], oracle_no_ws: list[OraclePass]
) -> None:
    run_a, run_b = runs(gemm_trace, gemm_no_ws_trace)
    truth_a = matched(run_a, oracle_ws)
    matched(run_b, oracle_no_ws)
    # Oracle: the first pass of the warp-specialized pipeline whose module the other pipeline
    # never held, before or after any of its passes.
    held_b = {p.before for p in oracle_no_ws} | {p.after for p in oracle_no_ws}
    expected = next(r for r in run_a.passes if r.index in truth_a and truth_a[r.index].after not in held_b)
    assert expected.name == "tl.ProducerConsumerWarpSpecialized"
    assert expected.name not in {p.name for p in oracle_no_ws}

    for rules in (RAW, NormalizeRules()):
        comparison = compare_runs(gemm_trace, run_a, gemm_no_ws_trace, run_b, rules)
        first = comparison.first_difference
        assert first is not None and first.a == expected and first.b is None and first.status == ONLY_A
    raw = compare_runs(gemm_trace, run_a, gemm_no_ws_trace, run_b, RAW)
    assert raw.diff is not None and not raw.diff.is_empty
    assert raw.diff.before == truth_a[expected.index].after
    # ... against the other run's module at that point: what it held before its next pass.
    assert raw.compared_with is not None and raw.compared_with_label == "tl.VerifyBufferInit#1"
    assert raw.diff.after == gemm_no_ws_trace.ir_after(raw.compared_with) and raw.diff.after in held_b


def test_passes_only_one_config_runs_are_removed_or_added_and_nothing_moved(
    gemm_trace: Trace, gemm_no_ws_trace: Trace, oracle_ws: list[OraclePass], oracle_no_ws: list[OraclePass]
) -> None:
    run_a, run_b = runs(gemm_trace, gemm_no_ws_trace)
    comparison = compare_runs(gemm_trace, run_a, gemm_no_ws_trace, run_b)

    def where(pipeline: list[OraclePass]) -> Counter[tuple[str | None, str]]:
        return Counter((p.parent, p.name) for p in pipeline)

    def parent_name(run: KernelRun, record: PassRecord) -> str | None:
        return next((p.raw_name for p in run.passes if p.index == record.parent), None)

    removed = Counter(
        (parent_name(run_a, row.a), row.a.raw_name)
        for row in comparison.alignment
        if row.status == ONLY_A and row.a is not None
    )
    added = Counter(
        (parent_name(run_b, row.b), row.b.raw_name)
        for row in comparison.alignment
        if row.status == "only_b" and row.b is not None
    )
    assert removed == where(oracle_ws) - where(oracle_no_ws)
    assert added == where(oracle_no_ws) - where(oracle_ws)
    assert {name for _, name in removed} >= {
        "tl.ProducerConsumerWarpSpecialized",
        "tl.AutoWarpSpecialization",
    }
    # The extra tl.Simplify runs are nested in tl.LowerTileOp: added there, none "reordered".
    assert added[("tl.LowerTileOp", "tl.Simplify")] == 2
    assert not comparison.moved_passes and not any(row.status == MOVED for row in comparison.alignment)
    assert not comparison.unreached_passes


def test_each_pass_faces_the_pass_at_the_same_point_of_the_other_pipeline(
    gemm_trace: Trace, gemm_no_ws_trace: Trace, oracle_ws: list[OraclePass], oracle_no_ws: list[OraclePass]
) -> None:
    run_a, run_b = runs(gemm_trace, gemm_no_ws_trace)
    truth_a, truth_b = matched(run_a, oracle_ws), matched(run_b, oracle_no_ws)
    rows = compare_runs(gemm_trace, run_a, gemm_no_ws_trace, run_b).alignment
    shared = [row for row in rows if row.status == SHARED]
    assert len(shared) == len(run_b.passes) - sum(row.status == "only_b" for row in rows)
    for row in shared:
        assert row.a is not None and row.b is not None
        assert row.a.name == row.b.name
        if row.a.index in truth_a and row.b.index in truth_b:
            assert truth_a[row.a.index].parent == truth_b[row.b.index].parent, row.label
    # Shared passes keep their order in both runs.
    assert [r.a.index for r in shared if r.a] == sorted(r.a.index for r in shared if r.a)
    assert [r.b.index for r in shared if r.b] == sorted(r.b.index for r in shared if r.b)

    # The case of the issue: the top-level tl.Simplify after tl.LowerAccessPtr is tl.Simplify#5 in
    # one run and tl.Simplify#7 in the other; name and occurrence would pair it with a nested one.
    at_a = top_level_after(oracle_ws, "tl.Simplify", "tl.LowerAccessPtr")
    at_b = top_level_after(oracle_no_ws, "tl.Simplify", "tl.LowerAccessPtr")
    simplify_a = next(r for r in run_a.passes if r.index in truth_a and truth_a[r.index] is oracle_ws[at_a])
    simplify_b = next(
        r for r in run_b.passes if r.index in truth_b and truth_b[r.index] is oracle_no_ws[at_b]
    )
    row = next(row for row in rows if row.a == simplify_a)
    assert row.b == simplify_b and row.status == SHARED
    assert row.label_a != row.label_b and row.label_b is not None and row.label_b in row.both_labels


def test_a_failed_run_stops_the_alignment_it_does_not_remove_what_follows(
    gemm_trace: Trace, gemm_sm80_ascend_trace: Trace
) -> None:
    cuda = gemm_trace.find_run("matmul", "cuda:sm_90")
    ascend = gemm_sm80_ascend_trace.find_run("matmul", "ascend")
    assert ascend.status == "failed"
    oracle_cuda = oracle_passes(_gemm(), "cuda:sm_90")
    oracle_ascend = oracle_passes(_gemm(), "ascend")
    assert oracle_ascend[-1].after is None  # the Ascend pipeline raised in its last pass
    truth_cuda = matched(cuda, oracle_cuda)

    # The last pass of the Ascend pipeline that both pipelines run exactly once: after it the
    # Ascend pipeline ran only its own passes, then failed. (``pass_fn`` is the name TVM reports
    # for every one of TileLang's anonymous checkers, so it names no particular pass.)
    count_cuda = Counter(p.name for p in oracle_cuda)
    count_ascend = Counter(p.name for p in oracle_ascend)
    anchor = next(p.name for p in reversed(oracle_ascend) if count_cuda[p.name] == count_ascend[p.name] == 1)
    at_cuda = next(k for k, p in enumerate(oracle_cuda) if p.name == anchor)
    at_ascend = next(k for k, p in enumerate(oracle_ascend) if p.name == anchor)
    later_ascend = {p.name for p in oracle_ascend[at_ascend + 1 :]} - {"pass_fn"}
    assert later_ascend and not later_ascend & set(count_cuda)

    comparison = compare_runs(gemm_trace, cuda, gemm_sm80_ascend_trace, ascend)
    position = {id(p): k for k, p in enumerate(oracle_cuda)}
    by_position = {position[id(truth_cuda[r.index])]: r for r in cuda.passes if r.index in truth_cuda}
    unreached = {row.a.index for row in comparison.alignment if row.status == NOT_REACHED and row.a}
    after_anchor = {r.index for k, r in by_position.items() if k > at_cuda} | {
        p.index for p in cuda.passes if p.index not in truth_cuda
    }
    assert unreached == after_anchor
    removed = Counter(row.a.raw_name for row in comparison.alignment if row.status == ONLY_A and row.a)
    expected_removed = Counter(p.name for p in oracle_cuda[:at_cuda]) - Counter(
        p.name for p in oracle_ascend[:at_ascend]
    )
    assert removed == expected_removed
    assert len(comparison.removed_passes) < 15 and len(comparison.unreached_passes) > 50
    assert any("failed in VFChecker" in note for note in comparison.notes)
