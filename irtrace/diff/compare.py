"""The three comparisons: what a pass did, how two runs of a kernel differ, where two targets part.

Passes are aligned by the pipeline's structure (``irtrace.diff.align``): the passes nested in a pass
face those nested in its counterpart, and a pass one config adds shifts nothing after it. The first
difference is the first point, in the order passes finished, where the two runs' IR parts: a pass
both ran whose outputs differ, or a pass only one ran that changed the IR. Everything here
returns plain records; rendering lives in ``passdiff.render``.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace

from irtrace.base.errors import NotInTraceError
from irtrace.diff.align import (
    DEFAULT_LIMITS,
    MOVED,
    NOT_REACHED,
    ONLY_A,
    ONLY_B,
    SHARED,
    PassAlignment,
    PassKey,
    align_passes,
    end_order,
)
from irtrace.diff.errors import PassdiffError
from irtrace.diff.layouts import LayoutComparison, compare_layouts
from irtrace.diff.normalize import NormalizeRules, normalize_ir
from irtrace.diff.origins import NOT_RECORDED, DiffOrigins, state_origins
from irtrace.diff.textdiff import TextDiff, diff_texts, whitespace_key
from irtrace.trace.model import (
    PHASE_CODEGEN,
    PHASE_MACHINE,
    KernelRun,
    PassRecord,
    Trace,
    headers_of,
    occurrence_labels,
    occurrences,
    pass_label,
)

__all__ = [
    "BOTH",
    "MOVED",
    "NOT_REACHED",
    "ONLY_A",
    "ONLY_B",
    "SHARED",
    "PassAlignment",
    "PassKey",
    "RunComparison",
    "align_passes",
    "compare_runs",
    "compare_targets",
    "compare_traces",
    "diff_pass",
    "diff_span",
    "iter_comparisons",
    "key_label",
    "label_in_run",
    "pass_keys",
    "resolve_pass",
]

APPROXIMATE_NOTE = (
    f"passes aligned greedily by name: the runs differ in more than {DEFAULT_LIMITS.max_edits} passes "
    "at one level of the pipeline, so some shared passes may show as added and removed"
)
"""The note ``passdiff runs`` and ``irtrace check`` print when an alignment degraded."""
BOTH = "both"
"""``RunComparison.presence`` when both traces hold the (kernel, target)."""


def key_label(key: PassKey) -> str:
    """``name#N``, as ``--pass`` accepts it."""
    return pass_label(*key)


def label_in_run(run: KernelRun, record: PassRecord) -> str:
    """``name#N`` of one pass of ``run``."""
    labels = occurrence_labels(p.name for p in run.passes)
    return next(label for label, p in zip(labels, run.passes, strict=True) if p.index == record.index)


def pass_keys(run: KernelRun) -> list[PassKey]:
    """``(name, occurrence)`` of every pass of ``run``, in order."""
    names = [record.name for record in run.passes]
    return list(zip(names, occurrences(names), strict=True))


@dataclass(frozen=True)
class RunComparison:
    """Two runs of a kernel (two traces, or two targets) compared pass by pass."""

    kernel: str
    target_a: str | None
    """Target of run ``a``; ``None`` when only run ``b`` exists."""
    target_b: str | None
    run_a: KernelRun | None
    run_b: KernelRun | None
    rules: NormalizeRules
    presence: str = BOTH
    """``both``, or ``only_a`` / ``only_b`` when one trace lacks this (kernel, target)."""
    alignment: tuple[PassAlignment, ...] = ()
    approximate_alignment: bool = False
    """The runs differ in so many passes at one level that they were paired greedily by name
    (``irtrace.diff.align.AlignLimits``): added and removed passes may be over-counted."""
    first_difference: PassAlignment | None = None
    """Where the runs' IR first parts: a pass both ran whose outputs differ (or whose status
    differs), or a pass only one ran that changed the IR or failed."""
    diff: TextDiff | None = None
    """The two runs' IR right after ``first_difference`` (for a pass only one run ran, against
    the other run's IR at that point, after ``compared_with``)."""
    compared_with: PassRecord | None = None
    """For a ``first_difference`` only one run ran: the other run's pass whose output the diff
    shows (``None`` when the other run had run no pass yet, or for a shared pass)."""
    input_differs: bool = False
    """``first_difference`` (a shared pass) already received different IR: the cause lies before
    it, in the input modules, not in the pass itself."""
    input_diff: TextDiff | None = None
    """Diff of the modules handed to the two pipelines."""
    host_wrapper: tuple[str, tuple[str, ...]] | None = None
    """``("a" or "b", labels)``: the passes that compiled one run's host wrapper (a program's own
    compile, ``irtrace run``), where the other run was lowered to its device kernel only
    (``irtrace record``). Kept out of ``removed_passes`` and ``added_passes``: not the pipeline's."""
    removed_passes: tuple[str, ...] = ()
    """``name#N`` labels only run ``a`` ran."""
    added_passes: tuple[str, ...] = ()
    """``name#N`` labels only run ``b`` ran."""
    moved_passes: tuple[str, ...] = ()
    """``name#N`` labels both ran, at different points."""
    unreached_passes: tuple[str, ...] = ()
    """``name#N`` labels one run ran after the other failed or was cut short."""
    source_diff: TextDiff | None = None
    """Diff of the final kernel sources; ``None`` when either run has none."""
    machine_diffs: tuple[tuple[str, TextDiff], ...] = ()
    """Diffs of the machine-code stages both runs have (``ptx``, ``sass``: ``irtrace record
    --machine-code``), by stage name, in pipeline order."""
    notes: tuple[str, ...] = field(default=())
    """Facts worth showing: a run that failed, a missing kernel source."""
    layouts: LayoutComparison | None = None
    """The layouts layout inference picked in each run, buffer by buffer (``irtrace.diff.layouts``)."""
    origins: DiffOrigins = NOT_RECORDED
    """Which Python lines of the kernel the lines of ``diff`` come from (``irtrace.diff.origins``)."""

    @property
    def different(self) -> bool:
        """Anything differs: presence, passes, IR, kernel source or run status."""
        if self.presence != BOTH:
            return True
        assert self.run_a is not None and self.run_b is not None
        return bool(
            self.first_difference is not None
            or self.removed_passes
            or self.added_passes
            or self.moved_passes
            or self.unreached_passes
            or (self.source_diff is not None and not self.source_diff.is_empty)
            or any(not diff.is_empty for _, diff in self.machine_diffs)
            or (self.input_diff is not None and not self.input_diff.is_empty)
            or self.run_a.status != self.run_b.status
            or (self.layouts is not None and self.layouts.different)
        )

    @property
    def compared_with_label(self) -> str | None:
        """``name#N`` of ``compared_with`` in its run."""
        if self.compared_with is None or self.first_difference is None:
            return None
        run = self.run_b if self.first_difference.b is None else self.run_a
        return label_in_run(run, self.compared_with) if run is not None else None

    @property
    def title(self) -> str:
        if self.target_a == self.target_b or None in (self.target_a, self.target_b):
            return f"{self.kernel} on {self.target_a or self.target_b}"
        return f"{self.kernel} on {self.target_a} vs {self.target_b}"


# ----------------------------------------------------------------------------- pass to pass


def resolve_pass(run: KernelRun, query: str) -> PassRecord:
    """The pass ``NAME`` or ``NAME#N`` of ``run``; a short name two namespaces share is an error.

    ``Simplify`` would match both ``tl.Simplify`` and ``tirx.Simplify``: rather than merge their
    occurrences, the error lists the full names to choose from.
    """
    name = query.partition("#")[0]
    if "." not in name and not any(p.name == name or p.raw_name == name for p in run.passes):
        full = list(dict.fromkeys(p.name for p in run.passes if p.name.split(".")[-1] == name))
        if len(full) > 1:
            raise NotInTraceError(
                f"pass {query!r} is ambiguous in {run.kernel} on {run.target}: it names "
                f"{' and '.join(full)}; write the full name"
            )
    return run.find_pass(query)


def diff_pass(
    trace: Trace,
    run: KernelRun,
    pass_query: str,
    rules: NormalizeRules = NormalizeRules(),  # noqa: B008
) -> TextDiff:
    """What one pass (``NAME`` or ``NAME#N``) did: its input IR against its output IR."""
    return diff_span(trace, run, pass_query, pass_query, rules)


def diff_span(
    trace: Trace,
    run: KernelRun,
    from_query: str,
    to_query: str,
    rules: NormalizeRules = NormalizeRules(),  # noqa: B008
) -> TextDiff:
    """What the passes from ``from_query`` through ``to_query`` did together (both included)."""
    first = resolve_pass(run, from_query)
    last = resolve_pass(run, to_query)
    if last.index < first.index:
        raise PassdiffError(
            f"pass {to_query!r} (#{last.index}) runs before {from_query!r} (#{first.index}); "
            "give the earlier pass first"
        )
    return diff_texts(trace.ir_before(first), trace.ir_after(last), rules)


# ----------------------------------------------------------------------------- runs and targets


class _Texts:
    """Normalized texts by (trace, SHA-256), so each distinct IR is normalized once."""

    def __init__(self, rules: NormalizeRules) -> None:
        self.rules = rules
        self._cache: dict[tuple[int, str | None], str] = {}

    def get(self, trace: Trace, sha: str | None) -> str:
        key = (id(trace), sha)
        text = self._cache.get(key)
        if text is None:
            text = normalize_ir(trace.text(sha), self.rules) if self.rules.any else trace.text(sha)
            self._cache[key] = text
        return text

    def differ(self, trace_a: Trace, sha_a: str | None, trace_b: Trace, sha_b: str | None) -> bool:
        if sha_a == sha_b:
            return False
        if not self.rules.any:
            return True
        text_a, text_b = self.get(trace_a, sha_a), self.get(trace_b, sha_b)
        if self.rules.ignore_whitespace:
            return whitespace_key(text_a) != whitespace_key(text_b)
        return text_a != text_b


def _output_sha(record: PassRecord) -> str | None:
    return record.ir_after if record.ir_after is not None else record.ir_before


def _start_sha(run: KernelRun) -> str | None:
    return run.passes[0].ir_before if run.passes else run.input_ir


@dataclass(frozen=True)
class _FirstDifference:
    row: PassAlignment
    sha_a: str | None
    sha_b: str | None
    compared_with: PassRecord | None


def _first_difference(
    texts: _Texts,
    trace_a: Trace,
    run_a: KernelRun,
    trace_b: Trace,
    run_b: KernelRun,
    rows: list[PassAlignment],
    wrappers: tuple[set[int], set[int]] = (set(), set()),
) -> _FirstDifference | None:
    """Walk the rows in the order passes finished, keeping each run's current IR. The passes of
    a host wrapper only one run compiled (``wrappers``) are their own stage, not a difference."""
    state_a, state_b = _start_sha(run_a), _start_sha(run_b)
    last_a: PassRecord | None = None
    last_b: PassRecord | None = None
    for row in end_order(rows):
        if row.status == NOT_REACHED:
            continue
        if _only_in_wrapper(row.a, wrappers[0]) or _only_in_wrapper(row.b, wrappers[1]):
            continue
        if row.a is not None:
            state_a, last_a = _output_sha(row.a), row.a
        if row.b is not None:
            state_b, last_b = _output_sha(row.b), row.b
        if row.a is not None and row.b is not None:
            if row.a.status != row.b.status or texts.differ(trace_a, state_a, trace_b, state_b):
                return _FirstDifference(row, state_a, state_b, None)
            continue
        record = row.a or row.b
        if (record is not None and record.failed) or texts.differ(trace_a, state_a, trace_b, state_b):
            return _FirstDifference(row, state_a, state_b, last_b if row.b is None else last_a)
    return None


def host_wrapper_passes(run: KernelRun) -> set[int]:
    """Indices of the passes that compiled the program's host wrapper: host-side passes after the
    device kernel's ``codegen``. A program's own compile runs them (``irtrace run``, ``IRTRACE=``);
    ``irtrace record`` lowers to the device kernel only."""
    codegen = next((p.index for p in run.passes if p.phase == PHASE_CODEGEN and p.scope != "host"), None)
    if codegen is None:
        return set()
    return {p.index for p in run.passes if p.index > codegen and p.scope == "host"}


def _only_in_wrapper(record: PassRecord | None, wrapper: set[int]) -> bool:
    return record is not None and record.index in wrapper


def compare_runs(
    trace_a: Trace,
    run_a: KernelRun,
    trace_b: Trace,
    run_b: KernelRun,
    rules: NormalizeRules = NormalizeRules(),  # noqa: B008
    labels: tuple[str, str] | None = None,
    preposition: str = "on",
) -> RunComparison:
    """Align the passes of two runs and find where their IR first parts.

    Returns that pass with the diff of the two runs' IR right after it, the passes only one run
    ran, moved or never reached, the diff of the input modules and of the final kernel sources,
    and the layouts compared. ``labels`` name the runs in layout sentences, after ``preposition``
    (default: ``on`` their targets when they differ, else ``in run a`` and ``in run b``).
    """
    texts = _Texts(rules)
    alignment = align_passes(run_a, run_b)
    wrapper_a, wrapper_b = host_wrapper_passes(run_a), host_wrapper_passes(run_b)
    if wrapper_a and wrapper_b:  # both compiled their host wrappers: those passes compare as any
        wrapper_a, wrapper_b = set(), set()
    host_wrapper = None
    for side, wrapper, status in (("a", wrapper_a, ONLY_A), ("b", wrapper_b, ONLY_B)):
        wrapper_labels = tuple(
            row.label
            for row in alignment
            if row.status == status and _only_in_wrapper(row.a if side == "a" else row.b, wrapper)
        )
        host_wrapper = (side, wrapper_labels) if wrapper_labels else host_wrapper
    found = _first_difference(texts, trace_a, run_a, trace_b, run_b, alignment, (wrapper_a, wrapper_b))
    diff = None
    input_differs = False
    origins = NOT_RECORDED
    if found is not None:
        diff = _with_rules(
            diff_texts(texts.get(trace_a, found.sha_a), texts.get(trace_b, found.sha_b), _layout_only(rules)),
            rules,
        )
        row = found.row
        if row.a is not None and row.b is not None:
            input_differs = texts.differ(trace_a, row.a.ir_before, trace_b, row.b.ir_before)
        # the pass after which each run's IR is shown: its own, or the other run's latest
        origins = state_origins(
            trace_a,
            run_a,
            row.a if row.a is not None else found.compared_with,
            trace_b,
            run_b,
            row.b if row.b is not None else found.compared_with,
        )
    input_diff = None
    if run_a.input_ir and run_b.input_ir:
        input_diff = _with_rules(
            diff_texts(
                texts.get(trace_a, run_a.input_ir), texts.get(trace_b, run_b.input_ir), _layout_only(rules)
            ),
            rules,
        )
    source_a, source_b = trace_a.kernel_source(run_a), trace_b.kernel_source(run_b)
    source_diff = None
    notes = [APPROXIMATE_NOTE] if alignment.approximate else []
    if source_a is not None and source_b is not None:
        source_diff = diff_texts(source_a, source_b, rules)
    machine_diffs = []
    for stage in _machine_stages(run_a):
        text_a, text_b = _stage_text(trace_a, run_a, stage), _stage_text(trace_b, run_b, stage)
        if text_a is not None and text_b is not None:
            machine_diffs.append((stage, diff_texts(text_a, text_b, rules)))
    for side, run, source in (("a", run_a, source_a), ("b", run_b, source_b)):
        if run.status != "ok":
            failed = next((p for p in run.passes if p.failed), None)
            where = f" in {failed.name}" if failed else (" before its first pass" if not run.passes else "")
            notes.append(f"run {side} ({run.target}) {run.status}{where}: {_first_line(run.error)}")
        elif source is None:
            notes.append(f"run {side} ({run.target}) holds no kernel source")
    return RunComparison(
        kernel=run_a.kernel,
        target_a=run_a.target,
        target_b=run_b.target,
        run_a=run_a,
        run_b=run_b,
        rules=rules,
        alignment=tuple(alignment),
        approximate_alignment=alignment.approximate,
        first_difference=found.row if found else None,
        diff=diff,
        compared_with=found.compared_with if found else None,
        input_differs=input_differs,
        input_diff=input_diff,
        host_wrapper=host_wrapper,
        removed_passes=tuple(
            row.label for row in alignment if row.status == ONLY_A and not _only_in_wrapper(row.a, wrapper_a)
        ),
        added_passes=tuple(
            row.label for row in alignment if row.status == ONLY_B and not _only_in_wrapper(row.b, wrapper_b)
        ),
        moved_passes=tuple(row.label for row in alignment if row.status == MOVED),
        unreached_passes=tuple(row.label for row in alignment if row.status == NOT_REACHED),
        source_diff=source_diff,
        machine_diffs=tuple(machine_diffs),
        notes=tuple(notes),
        layouts=_layouts(run_a, run_b, labels, preposition),
        origins=origins,
    )


def _layouts(
    run_a: KernelRun, run_b: KernelRun, labels: tuple[str, str] | None, preposition: str
) -> LayoutComparison:
    if labels is None:
        if run_a.target != run_b.target:
            labels, preposition = (run_a.target, run_b.target), "on"
        else:
            labels, preposition = ("run a", "run b"), "in"
    return compare_layouts(run_a, run_b, *labels, preposition=preposition)


def _machine_stages(run: KernelRun) -> list[str]:
    return [record.name for record in run.passes if record.phase == PHASE_MACHINE]


def _stage_text(trace: Trace, run: KernelRun, stage: str) -> str | None:
    """The text after a machine-code stage (PTX, SASS), if the run has it and it did not fail."""
    for record in run.passes:
        if record.phase == PHASE_MACHINE and record.name == stage and record.ir_after is not None:
            return trace.text(record.ir_after)
    return None


NO_RULES = NormalizeRules.none()


def _layout_only(rules: NormalizeRules) -> NormalizeRules:
    """For texts normalized already: only the rules about how lines are compared."""
    return replace(NO_RULES, ignore_whitespace=rules.ignore_whitespace)


def _with_rules(diff: TextDiff, rules: NormalizeRules) -> TextDiff:
    """A diff of already-normalized texts, labelled with the rules that normalized them."""
    return replace(diff, rules=rules)


def _first_line(text: str | None) -> str:
    lines = [line for line in (text or "").splitlines() if line.strip()]
    return lines[0][:200] if lines else ""


def compare_traces(
    trace_a: Trace,
    trace_b: Trace,
    rules: NormalizeRules = NormalizeRules(),  # noqa: B008
    *,
    kernel: str | None = None,
    target: str | None = None,
    labels: tuple[str, str] = ("old", "new"),
) -> list[RunComparison]:
    """Compare every (kernel, target) of two traces; one only in a trace is reported as such.

    ``kernel`` and ``target`` narrow the comparison; naming one that neither trace holds
    raises ``NotInTraceError`` listing what the traces hold. ``labels`` name the two traces in
    layout sentences.
    """
    return list(iter_comparisons(trace_a, trace_b, rules, kernel=kernel, target=target, labels=labels))


def iter_comparisons(
    trace_a: Trace,
    trace_b: Trace,
    rules: NormalizeRules = NormalizeRules(),  # noqa: B008
    *,
    kernel: str | None = None,
    target: str | None = None,
    labels: tuple[str, str] = ("old", "new"),
) -> Iterator[RunComparison]:
    """``compare_traces`` one (kernel, target) at a time: a caller that keeps only what it needs
    of each comparison (``irtrace check``) holds one run's diffs at a time, not a corpus's."""
    runs_a = _select(trace_a, kernel, target)
    runs_b = _select(trace_b, kernel, target)
    if (kernel or target) and not runs_a and not runs_b:
        trace_a.find_run(kernel, target)  # raises, listing the trace's runs
    # Paired by key, each run read when its turn comes: one pair of runs in memory at a time.
    keys_b = {run.key: index for index, run in enumerate(headers_of(runs_b))}
    keys_a = set()
    for index, key in enumerate(headers_of(runs_a)):
        keys_a.add(key.key)
        run = runs_a[index]
        other = keys_b.get(key.key)
        if other is None:
            yield RunComparison(run.kernel, run.target, None, run, None, rules, presence=ONLY_A)
        else:
            yield compare_runs(trace_a, run, trace_b, runs_b[other], rules, labels, "in")
    for index, key in enumerate(headers_of(runs_b)):
        if key.key not in keys_a:
            run = runs_b[index]
            yield RunComparison(run.kernel, None, run.target, None, run, rules, presence=ONLY_B)


def _select(trace: Trace, kernel: str | None, target: str | None) -> Sequence[KernelRun]:
    """The last run per (kernel, target) matching the filters, in trace order (of a streamed
    trace, read one at a time when iterated)."""
    chosen: dict[tuple[str, str], int] = {}
    for run in trace.headers():
        if kernel is not None and kernel not in (run.kernel, run.kernel.split("::")[-1]):
            continue
        if target is not None and run.target != target:
            continue
        chosen[run.key] = run.run_id
    return trace.runs_by_id(list(chosen.values()))


def compare_targets(
    trace: Trace,
    kernel: str | None,
    target_a: str,
    target_b: str,
    rules: NormalizeRules = NormalizeRules(),  # noqa: B008
) -> RunComparison:
    """Where the lowering of ``kernel`` for ``target_b`` parts ways with the one for ``target_a``:
    the first pass they share whose output differs, and the diff of their kernel sources."""
    run_a = trace.find_run(kernel, target_a)
    run_b = trace.find_run(kernel, target_b)
    return compare_runs(trace, run_a, trace, run_b, rules)
