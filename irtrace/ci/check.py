"""``irtrace check``: a new trace against a baseline, kernel by kernel and target by target.

For every kernel x target it finds what a kernel library's CI cares about: pairs added, removed
or now failing to lower; passes added, removed or reordered and the first pass whose normalized
IR changed (passes aligned by the pipeline's tree, ``irtrace.diff.compare``); whether the kernel
source changed; lowering time against the baseline's, in total and per pass; the kernel's
metrics (``irtrace.perf.metrics``); and its latency and resources (``irtrace.ci.perf_gates``).
A ``Policy`` says which findings fail the check. Rendering lives in ``irtrace.ci.check_report``.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from irtrace.ci.coverage import error_headline, failing_pass
from irtrace.ci.perf_gates import PerfCheck, perf_check, perf_findings
from irtrace.ci.policy import (
    ADDED,
    FAILURE_CHANGED,
    FIXED,
    IR,
    LAYOUT,
    METRIC,
    NEWLY_FAILING,
    PASS_LIST,
    PASS_TIME,
    REMOVED,
    SOURCE,
    TOTAL_TIME,
    Policy,
)
from irtrace.diff.compare import (
    APPROXIMATE_NOTE,
    BOTH,
    ONLY_A,
    ONLY_B,
    SHARED,
    PassAlignment,
    RunComparison,
    iter_comparisons,
    label_in_run,
)
from irtrace.diff.layouts import BufferLayoutDiff
from irtrace.perf.metrics import METRIC_NAMES, METRIC_TITLES, KernelMetrics, run_metrics
from irtrace.trace.model import STATUS_OK, KernelRun, Trace

UNCHANGED = "unchanged"
CHANGED = "changed"
FAILING = "failing"
"""Fails to lower in both traces."""
OUTCOMES = (UNCHANGED, CHANGED, ADDED, REMOVED, NEWLY_FAILING, FIXED, FAILING)
"""What happened to one kernel x target, in the order reports list them."""

SLOWEST_PASSES = 5
"""Passes per run whose time changed most that a report keeps."""
LAYOUT_LABELS = ("the baseline", "the new trace")
"""How layout sentences name the two traces (``in the baseline``)."""
LAYOUT_WHERE = tuple(f"in {label}" for label in LAYOUT_LABELS)
LAYOUT_FINDINGS = 8
"""Buffers per run whose layout change is a finding of its own; the rest are counted in one more."""


@dataclass(frozen=True)
class Finding:
    """One change found in one kernel x target."""

    kind: str
    """``irtrace.ci.policy`` change kind (``newly_failing``, ``ir``, ``total_time``, ``metric`` ...)."""
    message: str
    """One line saying what changed."""
    gated: bool
    """The policy makes this change fail the check."""


@dataclass(frozen=True)
class TimeChange:
    """A time in the baseline and in the new trace: a run's total or one pass's self time."""

    label: str
    """``total`` or the pass's ``name#N`` label in the new run."""
    baseline_s: float
    new_s: float

    @property
    def ratio(self) -> float:
        """New over baseline; infinite when the baseline took no measurable time."""
        return self.new_s / self.baseline_s if self.baseline_s > 0 else math.inf


@dataclass(frozen=True)
class MetricChange:
    """One metric in both traces (``None`` where a trace does not say)."""

    name: str
    baseline: int | None
    new: int | None

    @property
    def growth(self) -> float | None:
        """``(new - baseline) / baseline``; infinite for growth from 0; ``None`` if either is unknown."""
        if self.baseline is None or self.new is None:
            return None
        if self.baseline == 0:
            return 0.0 if self.new == 0 else math.inf
        return (self.new - self.baseline) / self.baseline


@dataclass(frozen=True)
class RunFacts:
    """What a check keeps of a checked run once its comparison is done (the run itself is
    dropped: a corpus's runs never all in memory)."""

    status: str
    total_s: float | None

    @classmethod
    def of(cls, run: KernelRun | None) -> RunFacts | None:
        return None if run is None else cls(run.status, run.total_s)


@dataclass(frozen=True)
class RunCheck:
    """One kernel x target checked against the baseline."""

    kernel: str
    target: str
    outcome: str
    """One of ``OUTCOMES``."""
    baseline: RunFacts | None
    new: RunFacts | None
    findings: tuple[Finding, ...] = ()
    first_changed_pass: str | None = None
    """``name#N`` of the first pass whose normalized IR differs (in the new run when it ran it)."""
    first_change: str | None = None
    """How it differs: ``output differs``, ``input differs``, ``added pass`` or ``removed pass``."""
    source_changed: bool | None = None
    """The final kernel source differs; ``None`` when either run has none."""
    source_lines: tuple[int, int] | None = None
    """Lines added and removed in the kernel source."""
    passes_added: tuple[str, ...] = ()
    passes_removed: tuple[str, ...] = ()
    passes_moved: tuple[str, ...] = ()
    total: TimeChange | None = None
    pass_times: tuple[TimeChange, ...] = ()
    """The passes whose self time grew most (at most ``SLOWEST_PASSES``), worst first."""
    metrics: tuple[MetricChange, ...] = ()
    """Every metric either trace knows."""
    failure: str | None = None
    """For a run failing now: ``PASS: error headline``."""
    layouts: tuple[BufferLayoutDiff, ...] = ()
    """Buffers whose layout after layout inference differs (``irtrace.diff.layouts``)."""
    layout_note: str | None = None
    """Why layouts were not compared (a run recorded none)."""
    perf: PerfCheck | None = None
    """Latency and resources in both traces (``--bench``, ``--machine-code``), when either has them."""

    @property
    def gated(self) -> bool:
        return any(finding.gated for finding in self.findings)

    @property
    def title(self) -> str:
        return f"{self.kernel} on {self.target}"


@dataclass(frozen=True)
class CheckReport:
    """Every kernel x target of both traces, checked."""

    baseline_path: str
    new_path: str
    policy: Policy
    runs: tuple[RunCheck, ...]
    notes: tuple[str, ...] = ()
    """What a reader should know: traces cut short, other tilelang versions or machines."""

    @property
    def gated(self) -> bool:
        return any(run.gated for run in self.runs)

    def counts(self) -> dict[str, int]:
        """Runs per outcome, in ``OUTCOMES`` order, outcomes with none left out."""
        counted = Counter(run.outcome for run in self.runs)
        return {outcome: counted[outcome] for outcome in OUTCOMES if counted[outcome]}


def check_traces(new: Trace, baseline: Trace, policy: Policy = Policy()) -> CheckReport:  # noqa: B008
    """Check ``new`` against ``baseline`` under ``policy``."""
    runs = []
    approximate = []
    # One (kernel, target) at a time: only what the report needs of each comparison is kept.
    for comparison in iter_comparisons(baseline, new, labels=LAYOUT_LABELS):
        runs.append(_check_pair(comparison, baseline, new, policy))
        if comparison.approximate_alignment:
            approximate.append(f"{comparison.kernel} on {comparison.target_b}: {APPROXIMATE_NOTE}")
    return CheckReport(
        baseline_path=baseline.path or "<baseline>",
        new_path=new.path or "<new>",
        policy=policy,
        runs=tuple(runs),
        notes=(*_notes(baseline, new), *approximate),
    )


def _notes(baseline: Trace, new: Trace) -> list[str]:
    notes = []
    for name, trace in (("the baseline", baseline), ("the new trace", new)):
        if trace.truncated:
            notes.append(f"{name} was cut short; runs it lacks count as removed or added")
    versions = [sorted({run.tilelang_version for run in trace.headers()}) for trace in (baseline, new)]
    if versions[0] != versions[1]:
        notes.append(
            f"tilelang versions differ: baseline {', '.join(versions[0]) or '-'}, "
            f"new {', '.join(versions[1]) or '-'}"
        )
    hosts = [sorted({run.hostname for run in trace.headers()}) for trace in (baseline, new)]
    if hosts[0] != hosts[1]:
        notes.append("the traces were recorded on different machines: compare times with care")
    return notes


def _check_pair(comparison: RunComparison, baseline: Trace, new: Trace, policy: Policy) -> RunCheck:
    kernel = comparison.kernel
    if comparison.presence == ONLY_A:
        assert comparison.run_a is not None
        run = comparison.run_a
        finding = Finding(REMOVED, "not in the new trace", policy.fails(REMOVED))
        return RunCheck(kernel, run.target, REMOVED, RunFacts.of(run), None, (finding,))
    if comparison.presence == ONLY_B:
        assert comparison.run_b is not None
        run = comparison.run_b
        findings = [Finding(ADDED, "not in the baseline", policy.fails(ADDED))]
        if run.status != STATUS_OK:
            findings.append(Finding(NEWLY_FAILING, f"fails: {_failure(run)}", policy.fails(NEWLY_FAILING)))
        metrics = _metric_changes(None, run_metrics(new, run))
        failure = _failure(run) if run.status != STATUS_OK else None
        return RunCheck(
            kernel,
            run.target,
            ADDED,
            None,
            RunFacts.of(run),
            tuple(findings),
            metrics=metrics,
            failure=failure,
        )
    assert comparison.presence == BOTH and comparison.run_a is not None and comparison.run_b is not None
    old, now = comparison.run_a, comparison.run_b
    facts = (RunFacts.of(old), RunFacts.of(now))
    old_ok, now_ok = old.status == STATUS_OK, now.status == STATUS_OK
    metrics = _metric_changes(run_metrics(baseline, old), run_metrics(new, now))
    total = _total_time(old, now)
    if old_ok and not now_ok:
        finding = Finding(NEWLY_FAILING, f"fails now: {_failure(now)}", policy.fails(NEWLY_FAILING))
        return RunCheck(
            kernel, now.target, NEWLY_FAILING, *facts, (finding,), metrics=metrics, failure=_failure(now)
        )
    if not old_ok and not now_ok:
        findings = []
        if _failure(old) != _failure(now):
            findings.append(
                Finding(
                    FAILURE_CHANGED,
                    f"failed with {_failure(old)}; now {_failure(now)}",
                    policy.fails(FAILURE_CHANGED),
                )
            )
        return RunCheck(kernel, now.target, FAILING, *facts, tuple(findings), failure=_failure(now))
    findings = []
    if not old_ok:
        findings.append(Finding(FIXED, f"lowers now; failed with {_failure(old)}", False))
    row = comparison.first_difference
    first_label = first_change = None
    if row is not None:
        first_label = row.label_b or row.label_a
        if comparison.input_differs:
            first_change = _input_differs(comparison, row)
        else:
            first_change = {SHARED: "output differs", ONLY_B: "added pass", ONLY_A: "removed pass"}.get(
                row.status, "output differs"
            )
        findings.append(
            Finding(IR, f"IR first differs after {first_label} ({first_change})", policy.fails(IR))
        )
    moved = comparison.moved_passes
    if comparison.added_passes or comparison.removed_passes or moved:
        parts = [
            f"{title} {_listing(labels)}"
            for title, labels in (
                ("added", comparison.added_passes),
                ("removed", comparison.removed_passes),
                ("reordered", moved),
            )
            if labels
        ]
        findings.append(Finding(PASS_LIST, "passes " + "; ".join(parts), policy.fails(PASS_LIST)))
    source_changed = None
    source_lines = None
    if old.source_sha256 is not None and now.source_sha256 is not None:
        source_changed = old.source_sha256 != now.source_sha256
        if source_changed:
            diff = comparison.source_diff
            source_lines = (diff.added, diff.removed) if diff is not None else None
            counted = f" (+{source_lines[0]} -{source_lines[1]} lines)" if source_lines else ""
            findings.append(Finding(SOURCE, f"kernel source changed{counted}", policy.fails(SOURCE)))
    layouts = comparison.layouts.changed if comparison.layouts is not None else ()
    findings.extend(_layout_findings(comparison, layouts, policy))
    if total is not None:
        findings.extend(_time_findings([total], TOTAL_TIME, policy.total_ratio, policy))
    pass_times = _pass_times(comparison, policy)
    findings.extend(_time_findings(pass_times, PASS_TIME, policy.pass_ratio, policy))
    findings.extend(_metric_findings(metrics, policy))
    perf = perf_check(baseline, old, new, now)
    if perf is not None:
        findings.extend(Finding(*found) for found in perf_findings(perf, policy))
    outcome = FIXED if not old_ok else (CHANGED if findings else UNCHANGED)
    return RunCheck(
        kernel,
        now.target,
        outcome,
        *facts,
        tuple(findings),
        first_changed_pass=first_label,
        first_change=first_change,
        source_changed=source_changed,
        source_lines=source_lines,
        passes_added=comparison.added_passes,
        passes_removed=comparison.removed_passes,
        passes_moved=moved,
        total=total,
        pass_times=pass_times,
        metrics=metrics,
        layouts=layouts,
        layout_note=comparison.layouts.note if comparison.layouts is not None else None,
        perf=perf,
    )


def _layout_findings(
    comparison: RunComparison, layouts: Sequence[BufferLayoutDiff], policy: Policy
) -> list[Finding]:
    """One finding per buffer whose layout differs (the first ``LAYOUT_FINDINGS``, then a count)."""
    if comparison.layouts is None or not layouts:
        return []
    where = comparison.layouts.where
    gated = policy.fails(LAYOUT)
    findings = [Finding(LAYOUT, buffer.sentence(*where), gated) for buffer in layouts[:LAYOUT_FINDINGS]]
    if len(layouts) > LAYOUT_FINDINGS:
        rest = ", ".join(buffer.buffer for buffer in layouts[LAYOUT_FINDINGS:])
        findings.append(Finding(LAYOUT, f"{len(layouts) - LAYOUT_FINDINGS} more buffers: {rest}", gated))
    return findings


def _input_differs(comparison: RunComparison, row: PassAlignment) -> str:
    """Where a first differing pass's input came from: its enclosing pass, or the pipeline input."""
    record, run = (row.b, comparison.run_b) if row.b is not None else (row.a, comparison.run_a)
    assert record is not None and run is not None
    parent = next((p for p in run.passes if p.index == record.parent), None)
    if parent is not None:
        return f"input differs: changed inside {label_in_run(run, parent)} before it ran"
    return "input differs: the pipelines received different modules"


def _failure(run: KernelRun) -> str:
    """``PASS: headline`` of a run that failed (``build`` when it failed before any pass)."""
    failed = failing_pass(run)
    where = failed.name if failed is not None else (run.running or "build")
    error = (failed.error if failed is not None else None) or run.error
    return f"{where}: {error_headline(error)}"


def _listing(labels: Sequence[str], limit: int = 6) -> str:
    shown = ", ".join(labels[:limit])
    return shown + (f" and {len(labels) - limit} more" if len(labels) > limit else "")


def _total_time(old: KernelRun, now: KernelRun) -> TimeChange | None:
    if old.total_s is None or now.total_s is None:
        return None
    return TimeChange("total", old.total_s, now.total_s)


def _pass_times(comparison: RunComparison, policy: Policy) -> tuple[TimeChange, ...]:
    """Self time of every pass both runs ran at the same point, the most slowed down first."""
    changes = [
        TimeChange(row.label_b or row.label, row.a.self_s, row.b.self_s)
        for row in comparison.alignment
        if row.status == SHARED
        and row.a is not None
        and row.b is not None
        and max(row.a.self_s, row.b.self_s) >= policy.min_seconds
        and row.b.self_s > row.a.self_s
    ]
    changes.sort(key=lambda change: (change.ratio, change.new_s - change.baseline_s), reverse=True)
    return tuple(changes[:SLOWEST_PASSES])


def _time_findings(changes: Sequence[TimeChange], kind: str, limit: float, policy: Policy) -> list[Finding]:
    """Times over ``limit`` x the baseline (times under ``min_seconds`` in both are noise)."""
    if limit <= 0:
        return []
    over = [
        change
        for change in changes
        if max(change.baseline_s, change.new_s) >= policy.min_seconds and change.ratio > limit
    ]
    return [
        Finding(
            kind,
            f"{'lowering' if change.label == 'total' else change.label} took {_ratio_text(change.ratio)} "
            f"the baseline's time ({change.baseline_s * 1000:.1f} -> {change.new_s * 1000:.1f} ms; "
            f"limit {limit:g}x)",
            True,
        )
        for change in over
    ]


def _ratio_text(ratio: float) -> str:
    return "inf x" if math.isinf(ratio) else f"{ratio:.2f}x"


def _metric_changes(old: KernelMetrics | None, now: KernelMetrics) -> tuple[MetricChange, ...]:
    before = old.as_dict() if old is not None else {}
    after = now.as_dict()
    return tuple(
        MetricChange(name, before.get(name), after.get(name))
        for name in METRIC_NAMES
        if before.get(name) is not None or after.get(name) is not None
    )


def _metric_findings(metrics: Sequence[MetricChange], policy: Policy) -> list[Finding]:
    findings = []
    for change in metrics:
        if change.baseline is None or change.new is None or change.baseline == change.new:
            continue
        limit = policy.metric_limits.get(change.name)
        growth = change.growth
        gated = limit is not None and growth is not None and growth > limit
        title = METRIC_TITLES[change.name]
        limit_text = f" (limit +{limit:.0%})" if gated and limit is not None else ""
        findings.append(Finding(METRIC, f"{title}: {change.baseline} -> {change.new}{limit_text}", gated))
    return findings
