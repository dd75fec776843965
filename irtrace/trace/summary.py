"""Summaries of a trace as plain data: per-run pass tables, per-pass-name totals, the JSON document.

The CLI renders these with rich; ``--json`` prints ``trace_document`` as is
(documented in ``docs/trace-format.md``). ``line_changes`` is the one place every tool counts a
pass's lines added and removed, with a counting function the caller passes (passdiff's line
diff, which the core cannot import), so every tool shows the counts of the diff ``passdiff pass``
shows; a stage whose output is another language (``is_new_stage``) has no counts.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import msgspec

from irtrace.trace.model import (
    PHASE_CODEGEN,
    PHASE_MACHINE,
    SCHEMA_VERSION,
    KernelRun,
    PassRecord,
    Trace,
    occurrence_labels,
)
from irtrace.trace.resources import resources_to_json

LineCounter = Callable[[str, str], tuple[int, int]]
"""Lines added and removed between two texts (``irtrace.diff.count_line_changes``)."""


@dataclass(frozen=True)
class PassRow:
    """One pass as shown by ``irtrace show``."""

    record: PassRecord
    label: str
    """``name#N`` when the name occurs more than once in the run."""
    added: int
    removed: int
    share: float
    """Self time as a share of the run's total pass time."""
    new_stage: bool = False
    """The pass turned its input into another language (``is_new_stage``): no line counts."""


NEW_STAGE = "new stage"
"""How every tool shows a stage whose output is another language, in place of ``+/-``."""


def is_new_stage(record: PassRecord) -> bool:
    """Whether the pass's input and output are different languages, so a line diff between them
    counts nothing real: codegen and host codegen (TIR in, CUDA/HIP/Metal/C source out) and the
    machine-code stages (source to PTX, PTX to SASS). Passes nested inside codegen work on TIR."""
    return record.phase == PHASE_MACHINE or (record.phase == PHASE_CODEGEN and record.depth == 0)


def line_changes(
    trace: Trace,
    record: PassRecord,
    count: LineCounter,
    cache: dict[tuple[str, str], tuple[int, int]] | None = None,
) -> tuple[int, int] | None:
    """Lines the pass added and removed, (0, 0) when it changed nothing, ``None`` for a new stage
    (``is_new_stage``). ``cache`` keeps counts by the pair of texts, which repeat across the runs
    of one kernel."""
    if is_new_stage(record):
        return None
    if not record.changed or record.ir_after is None or record.ir_after == record.ir_before:
        return (0, 0)
    key = (record.ir_before or "", record.ir_after)
    found = cache.get(key) if cache is not None else None
    if found is None:
        found = count(trace.text(record.ir_before), trace.text(record.ir_after))
        if cache is not None:
            cache[key] = found
    return found


def pass_rows(trace: Trace, run: KernelRun, count: LineCounter) -> list[PassRow]:
    """The run's passes with their labels, line counts (by ``count``) and share of the time."""
    total = sum(p.self_s for p in run.passes) or 1.0
    labels = occurrence_labels((p.name for p in run.passes), bare_when_unique=True)
    cache: dict[tuple[str, str], tuple[int, int]] = {}
    rows = []
    for record, label in zip(run.passes, labels, strict=True):
        counts = line_changes(trace, record, count, cache)
        added, removed = counts or (0, 0)
        rows.append(PassRow(record, label, added, removed, record.self_s / total, new_stage=counts is None))
    return rows


@dataclass(frozen=True)
class PassTotal:
    """Time spent in one pass name across runs (``irtrace show --by-pass``)."""

    name: str
    count: int
    total_s: float
    share: float
    changed: int
    """How many of its invocations changed the module."""


def totals_by_pass(runs: Sequence[KernelRun]) -> list[PassTotal]:
    """Self time per pass name, largest first; ``Simplify`` running six times counts once."""
    totals: dict[str, list[float]] = {}
    for run in runs:
        for record in run.passes:
            entry = totals.setdefault(record.name, [0, 0.0, 0])
            entry[0] += 1
            entry[1] += record.self_s
            entry[2] += int(record.changed)
    grand = sum(entry[1] for entry in totals.values()) or 1.0
    rows = [
        PassTotal(name, int(count), total, total / grand, int(changed))
        for name, (count, total, changed) in totals.items()
    ]
    return sorted(rows, key=lambda row: row.total_s, reverse=True)


def trace_document(trace: Trace, runs: Sequence[KernelRun], count: LineCounter) -> dict[str, Any]:
    """The ``irtrace show --json`` document; ``count`` counts each pass's lines."""
    return {
        "schema": SCHEMA_VERSION,
        "trace": trace.path,
        "created": trace.created,
        "truncated": trace.truncated,
        "runs": [_run_document(trace, run, count) for run in runs],
    }


def _run_document(trace: Trace, run: KernelRun, count: LineCounter) -> dict[str, Any]:
    return {
        "kernel": run.kernel,
        "target": run.target,
        "status": run.status,
        "error": run.error,
        "warnings": list(run.warnings),
        "spec": run.spec,
        "args": run.args,
        "target_detail": run.target_detail,
        "pass_configs": run.pass_configs,
        "tilelang_version": run.tilelang_version,
        "host": run.host,
        "total_s": run.total_s,
        "pass_count": len(run.passes),
        "changed_count": sum(p.changed for p in run.passes),
        "source_sha256": run.source_sha256,
        "resources": resources_to_json(run.resources),
        "bench": run.bench.to_json() if run.bench is not None else None,
        "launches": msgspec.to_builtins(list(run.launches)),
        "instance": msgspec.to_builtins(run.instance) if run.instance is not None else None,
        "passes": [
            {
                "index": row.record.index,
                "name": row.record.name,
                "label": row.label,
                "raw_name": row.record.raw_name,
                "phase": row.record.phase,
                "pipeline": row.record.pipeline,
                "scope": row.record.scope,
                "depth": row.record.depth,
                "parent": row.record.parent,
                "wall_s": row.record.wall_s,
                "self_s": row.record.self_s,
                "changed": row.record.changed,
                "new_stage": row.new_stage,
                "lines_added": None if row.new_stage else row.added,
                "lines_removed": None if row.new_stage else row.removed,
                "status": row.record.status,
                "error": row.record.error,
            }
            for row in pass_rows(trace, run, count)
        ],
    }
