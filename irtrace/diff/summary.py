"""A passdiff result as one record (``DiffReport``) and as the documented JSON summary.

The CLI builds a report, then renders it; ``report_document`` is what ``--format json`` prints
(``docs/passdiff.md`` documents it). No terminal code here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from irtrace.diff.compare import BOTH, PassAlignment, RunComparison, diff_span, resolve_pass
from irtrace.diff.layouts import layout_document
from irtrace.diff.normalize import NormalizeRules
from irtrace.diff.origins import NOT_RECORDED, DiffOrigins, pass_origins
from irtrace.diff.textdiff import Opcode, TextDiff, grouped_opcodes
from irtrace.trace.model import KernelRun, Trace
from irtrace.trace.summary import is_new_stage

JSON_SCHEMA = 1
"""Version of the JSON summary; bumped when a field changes meaning or goes away."""

MODE_PASS = "pass"
MODE_RUNS = "runs"
MODE_TARGETS = "targets"


@dataclass(frozen=True)
class PassDiff:
    """What one pass, or a span of passes, did in one run."""

    kernel: str
    target: str
    from_pass: str
    """``name#N`` of the pass (or the first pass of the span)."""
    to_pass: str
    """``name#N`` of the last pass of the span; equal to ``from_pass`` for one pass."""
    diff: TextDiff
    failed_pass: str | None = None
    """``name#N`` of the pass of the span that failed (it produced no IR; the diff ends at the
    IR it received)."""
    error: str | None = None
    """The failed pass's error message."""
    new_stage: bool = False
    """The span holds a stage whose output is another language (``irtrace.trace.summary.is_new_stage``):
    its texts are not diffed and no lines are counted."""
    origins: DiffOrigins = NOT_RECORDED
    """Which Python lines of the kernel the diff's lines come from (``irtrace.diff.origins``)."""


def pass_diff(
    trace: Trace,
    run: KernelRun,
    from_query: str,
    to_query: str,
    rules: NormalizeRules = NormalizeRules(),  # noqa: B008
) -> PassDiff:
    """What ``passdiff pass`` reports for the passes ``from_query`` through ``to_query`` of ``run``."""
    first = resolve_pass(run, from_query)
    last = resolve_pass(run, to_query)
    diff = diff_span(trace, run, from_query, to_query, rules)
    labels = dict(zip((p.index for p in run.passes), run.occurrence_names(), strict=True))
    span = [p for p in run.passes if first.index <= p.index <= last.index]
    failed = next((p for p in span if p.failed), None)
    return PassDiff(
        run.kernel,
        run.target,
        labels[first.index],
        labels[last.index],
        diff,
        failed_pass=labels[failed.index] if failed else None,
        error=failed.error if failed else None,
        new_stage=any(is_new_stage(p) for p in span),
        origins=pass_origins(trace, run, first, last),
    )


@dataclass(frozen=True)
class DiffReport:
    """Everything one ``passdiff`` invocation found."""

    mode: str
    """``pass``, ``runs`` or ``targets``."""
    rules: NormalizeRules
    pass_diffs: tuple[PassDiff, ...] = ()
    """Filled in ``pass`` mode."""
    comparisons: tuple[RunComparison, ...] = ()
    """Filled in ``runs`` and ``targets`` modes."""
    sources: tuple[str, ...] = ()
    """The trace files compared, for headers."""

    @property
    def different(self) -> bool:
        return any(item.new_stage or not item.diff.is_empty for item in self.pass_diffs) or any(
            comparison.different for comparison in self.comparisons
        )

    @property
    def failed(self) -> bool:
        """A pass asked about (``pass`` mode) failed."""
        return any(item.failed_pass is not None for item in self.pass_diffs)


def diff_names(comparison: RunComparison, what: str) -> tuple[str, str]:
    """``from``/``to`` file names for a unified diff of ``what`` (a pass label or ``source``)."""
    return (
        f"a/{comparison.kernel}/{comparison.target_a}/{what}",
        f"b/{comparison.kernel}/{comparison.target_b}/{what}",
    )


def report_document(report: DiffReport, *, context: int = 3) -> dict[str, Any]:
    """The JSON summary (schema in ``docs/passdiff.md``)."""
    return {
        "format": "passdiff",
        "schema": JSON_SCHEMA,
        "mode": report.mode,
        "traces": list(report.sources),
        "rules": report.rules.enabled(),
        "different": report.different,
        "pass_diffs": [_pass_diff_document(item, context) for item in report.pass_diffs],
        "comparisons": [_comparison_document(item, context) for item in report.comparisons],
    }


def _diff_document(
    diff: TextDiff, from_name: str, to_name: str, context: int, origins: DiffOrigins | None = None
) -> dict[str, Any]:
    document: dict[str, Any] = {
        "equal": diff.is_empty,
        "added": diff.added,
        "removed": diff.removed,
        "reindented": diff.reindented,
        "unified": diff.unified(from_name, to_name, context, hunk_note(origins)),
    }
    if origins is not None:
        document["source_lines"] = origins_document(diff, origins, context)
    return document


def hunk_note(origins: DiffOrigins | None) -> Callable[[list[Opcode]], str] | None:
    """What a unified diff says after each hunk's ``@@``: the Python lines it comes from."""
    if origins is None or not origins.mapped:
        return None
    return lambda group: origins.label(origins.of_opcodes(group))


def origins_document(diff: TextDiff, origins: DiffOrigins, context: int) -> dict[str, Any] | None:
    """Per hunk of the unified diff, the Python lines of its changed lines on each side; ``null``
    when the runs hold no source maps."""
    if not origins.recorded:
        return None
    hunks = []
    for group in grouped_opcodes(diff.opcodes(), context):
        hunk = origins.of_opcodes(group)
        hunks.append(
            {
                "old_start": group[0][1] + 1,
                "new_start": group[0][3] + 1,
                "a": None if hunk.old is None else list(hunk.old),
                "b": None if hunk.new is None else list(hunk.new),
                "a_carried": list(hunk.old_carried),
                "b_carried": list(hunk.new_carried),
                "used_by": {str(line): list(users) for line, users in sorted(hunk.used_by.items())},
            }
        )
    shown = origins.after or origins.before
    return {"file": shown.file if shown else None, "same_file": origins.same_source, "hunks": hunks}


def _pass_diff_document(item: PassDiff, context: int) -> dict[str, Any]:
    base = f"{item.kernel}/{item.target}"
    return {
        "kernel": item.kernel,
        "target": item.target,
        "from_pass": item.from_pass,
        "to_pass": item.to_pass,
        "failed_pass": item.failed_pass,
        "error": item.error,
        "new_stage": item.new_stage,
        **(
            {"equal": False, "added": None, "removed": None, "reindented": None, "unified": ""}
            if item.new_stage
            else _diff_document(
                item.diff,
                f"a/{base}/before-{item.from_pass}",
                f"b/{base}/after-{item.to_pass}",
                context,
                item.origins,
            )
        ),
    }


def _alignment_document(row: PassAlignment) -> dict[str, Any]:
    return {
        "pass": row.key[0],
        "occurrence": row.key[1],
        "label": row.label,
        "label_a": row.label_a,
        "label_b": row.label_b,
        "status": row.status,
        "index_a": row.a.index if row.a else None,
        "index_b": row.b.index if row.b else None,
    }


def _comparison_document(item: RunComparison, context: int) -> dict[str, Any]:
    first = None
    if item.first_difference is not None and item.diff is not None:
        first = {
            **_alignment_document(item.first_difference),
            "input_differs": item.input_differs,
            "compared_with": item.compared_with_label,
            **_diff_document(
                item.diff, *diff_names(item, item.first_difference.label), context, item.origins
            ),
        }
    return {
        "kernel": item.kernel,
        "target_a": item.target_a,
        "target_b": item.target_b,
        "presence": item.presence,
        "different": item.different,
        "status_a": item.run_a.status if item.run_a else None,
        "status_b": item.run_b.status if item.run_b else None,
        "passes_a": len(item.run_a.passes) if item.run_a else None,
        "passes_b": len(item.run_b.passes) if item.run_b else None,
        "first_difference": first,
        "removed_passes": list(item.removed_passes),
        "added_passes": list(item.added_passes),
        "moved_passes": list(item.moved_passes),
        "unreached_passes": list(item.unreached_passes),
        "host_wrapper": None
        if item.host_wrapper is None
        else {"run": item.host_wrapper[0], "passes": list(item.host_wrapper[1])},
        "input": None
        if item.input_diff is None
        else {
            "equal": item.input_diff.is_empty,
            "added": item.input_diff.added,
            "removed": item.input_diff.removed,
        },
        "source": None
        if item.source_diff is None
        else _diff_document(item.source_diff, *diff_names(item, "source"), context),
        "machine": {
            stage: _diff_document(diff, *diff_names(item, stage), context)
            for stage, diff in item.machine_diffs
        },
        "notes": list(item.notes),
        "layouts": None if item.layouts is None else layout_document(item.layouts),
    }


__all__ = ["BOTH", "JSON_SCHEMA", "DiffReport", "PassDiff", "diff_names", "report_document"]
