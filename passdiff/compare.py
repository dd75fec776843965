"""The three comparisons: what a pass did, how two runs of a kernel differ, where two targets part.

Passes are aligned by ``(name, occurrence)``: the third ``tl.Simplify`` of one run faces the
third ``tl.Simplify`` of the other. Everything here returns plain records; rendering lives in
``passdiff.render``.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field, replace

from irtrace.trace import KernelRun, PassRecord, Trace, occurrences, pass_label
from passdiff.errors import PassdiffError
from passdiff.normalize import NormalizeRules, normalize_ir
from passdiff.textdiff import TextDiff, diff_texts

SHARED = "shared"
ONLY_A = "only_a"
ONLY_B = "only_b"
MOVED = "moved"

BOTH = "both"
"""``RunComparison.presence`` when both traces hold the (kernel, target)."""


PassKey = tuple[str, int]
"""``(pass name, occurrence)``; occurrence counts from 1."""


def key_label(key: PassKey) -> str:
    """``name#N``, as ``--pass`` accepts it."""
    return pass_label(*key)


@dataclass(frozen=True)
class PassAlignment:
    """One pass key and the records that hold it in each run."""

    key: PassKey
    a: PassRecord | None
    b: PassRecord | None
    status: str
    """``shared`` (both, same relative order), ``only_a``, ``only_b``, or ``moved`` (both, reordered)."""

    @property
    def label(self) -> str:
        return key_label(self.key)


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
    first_difference: PassAlignment | None = None
    """The first pass present in both runs whose output differs (after normalization)."""
    diff: TextDiff | None = None
    """The diff of the two outputs of ``first_difference``."""
    input_differs: bool = False
    """``first_difference`` already received different IR: the cause lies before it (an added or
    removed pass, or a different input module), not in the pass itself."""
    input_diff: TextDiff | None = None
    """Diff of the modules handed to the two pipelines."""
    removed_passes: tuple[str, ...] = ()
    """``name#N`` labels only run ``a`` ran."""
    added_passes: tuple[str, ...] = ()
    """``name#N`` labels only run ``b`` ran."""
    moved_passes: tuple[str, ...] = ()
    """``name#N`` labels both ran, in another order."""
    source_diff: TextDiff | None = None
    """Diff of the final kernel sources; ``None`` when either run has none."""
    notes: tuple[str, ...] = field(default=())
    """Facts worth showing: a run that failed, a missing kernel source."""

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
            or (self.source_diff is not None and not self.source_diff.is_empty)
            or (self.input_diff is not None and not self.input_diff.is_empty)
            or self.run_a.status != self.run_b.status
        )

    @property
    def title(self) -> str:
        if self.target_a == self.target_b or None in (self.target_a, self.target_b):
            return f"{self.kernel} on {self.target_a or self.target_b}"
        return f"{self.kernel} on {self.target_a} vs {self.target_b}"


# ----------------------------------------------------------------------------- pass to pass


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
    first = run.find_pass(from_query)
    last = run.find_pass(to_query)
    if last.index < first.index:
        raise PassdiffError(
            f"pass {to_query!r} (#{last.index}) runs before {from_query!r} (#{first.index}); "
            "give the earlier pass first"
        )
    return diff_texts(trace.ir_before(first), trace.ir_after(last), rules)


# ----------------------------------------------------------------------------- alignment


def pass_keys(run: KernelRun) -> list[PassKey]:
    """``(name, occurrence)`` of every pass of ``run``, in order."""
    names = [record.name for record in run.passes]
    return list(zip(names, occurrences(names), strict=True))


def align_passes(run_a: KernelRun, run_b: KernelRun) -> list[PassAlignment]:
    """Pair the passes of two runs by ``(name, occurrence)``, in ``a``'s order with ``b``'s extra
    passes where ``b`` ran them. Keys in both runs but out of order are ``moved`` (shown at
    ``a``'s position)."""
    keys_a, keys_b = pass_keys(run_a), pass_keys(run_b)
    by_key_a = dict(zip(keys_a, run_a.passes, strict=True))
    by_key_b = dict(zip(keys_b, run_b.passes, strict=True))
    rows: list[PassAlignment] = []
    matcher = difflib.SequenceMatcher(None, keys_a, keys_b, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            rows.extend(PassAlignment(k, by_key_a[k], by_key_b[k], SHARED) for k in keys_a[i1:i2])
            continue
        for key in keys_a[i1:i2]:
            if key in by_key_b:
                rows.append(PassAlignment(key, by_key_a[key], by_key_b[key], MOVED))
            else:
                rows.append(PassAlignment(key, by_key_a[key], None, ONLY_A))
        rows.extend(PassAlignment(k, None, by_key_b[k], ONLY_B) for k in keys_b[j1:j2] if k not in by_key_a)
    return rows


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


def _output_sha(record: PassRecord) -> str | None:
    return record.ir_after if record.ir_after is not None else record.ir_before


def compare_runs(
    trace_a: Trace,
    run_a: KernelRun,
    trace_b: Trace,
    run_b: KernelRun,
    rules: NormalizeRules = NormalizeRules(),  # noqa: B008
) -> RunComparison:
    """Align the passes of two runs and find the first pass present in both whose output differs.

    Returns that pass with the diff of its two outputs, the passes only one run ran or that
    moved, the diff of the input modules and of the final kernel sources.
    """
    texts = _Texts(rules)
    alignment = align_passes(run_a, run_b)
    first: PassAlignment | None = None
    for row in alignment:
        if row.a is None or row.b is None:
            continue
        if row.a.status != row.b.status or _differ(
            texts, trace_a, _output_sha(row.a), trace_b, _output_sha(row.b)
        ):
            first = row
            break
    diff = None
    input_differs = False
    if first is not None and first.a is not None and first.b is not None:
        diff = diff_texts(
            texts.get(trace_a, _output_sha(first.a)), texts.get(trace_b, _output_sha(first.b)), NO_RULES
        )
        diff = _with_rules(diff, rules)
        input_differs = _differ(texts, trace_a, first.a.ir_before, trace_b, first.b.ir_before)
    input_diff = None
    if run_a.input_ir and run_b.input_ir:
        input_diff = _with_rules(
            diff_texts(texts.get(trace_a, run_a.input_ir), texts.get(trace_b, run_b.input_ir), NO_RULES),
            rules,
        )
    source_a, source_b = trace_a.kernel_source(run_a), trace_b.kernel_source(run_b)
    source_diff = None
    notes = []
    if source_a is not None and source_b is not None:
        source_diff = diff_texts(source_a, source_b, rules)
    for side, run, source in (("a", run_a, source_a), ("b", run_b, source_b)):
        if run.status != "ok":
            failed = next((p for p in run.passes if p.failed), None)
            where = f" in {failed.name}" if failed else ""
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
        first_difference=first,
        diff=diff,
        input_differs=input_differs,
        input_diff=input_diff,
        removed_passes=tuple(row.label for row in alignment if row.status == ONLY_A),
        added_passes=tuple(row.label for row in alignment if row.status == ONLY_B),
        moved_passes=tuple(row.label for row in alignment if row.status == MOVED),
        source_diff=source_diff,
        notes=tuple(notes),
    )


NO_RULES = NormalizeRules.none()


def _with_rules(diff: TextDiff, rules: NormalizeRules) -> TextDiff:
    """A diff of already-normalized texts, labelled with the rules that normalized them."""
    return replace(diff, rules=rules)


def _differ(texts: _Texts, trace_a: Trace, sha_a: str | None, trace_b: Trace, sha_b: str | None) -> bool:
    if sha_a == sha_b:
        return False
    if not texts.rules.any:
        return True
    return texts.get(trace_a, sha_a) != texts.get(trace_b, sha_b)


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
) -> list[RunComparison]:
    """Compare every (kernel, target) of two traces; one only in a trace is reported as such.

    ``kernel`` and ``target`` narrow the comparison; naming one that neither trace holds
    raises ``NotInTraceError`` listing what the traces hold.
    """
    runs_a = _select(trace_a, kernel, target)
    runs_b = _select(trace_b, kernel, target)
    if (kernel or target) and not runs_a and not runs_b:
        trace_a.find_run(kernel, target)  # raises, listing the trace's runs
    by_key_b = {run.key: run for run in runs_b}
    keys_a = {run.key for run in runs_a}
    results = []
    for run in runs_a:
        other = by_key_b.get(run.key)
        if other is None:
            results.append(RunComparison(run.kernel, run.target, None, run, None, rules, presence=ONLY_A))
        else:
            results.append(compare_runs(trace_a, run, trace_b, other, rules))
    for run in runs_b:
        if run.key not in keys_a:
            results.append(RunComparison(run.kernel, None, run.target, None, run, rules, presence=ONLY_B))
    return results


def _select(trace: Trace, kernel: str | None, target: str | None) -> list[KernelRun]:
    """The last run per (kernel, target) matching the filters, in trace order."""
    chosen: dict[tuple[str, str], KernelRun] = {}
    for run in trace.runs:
        if kernel is not None and kernel not in (run.kernel, run.kernel.split("::")[-1]):
            continue
        if target is not None and run.target != target:
            continue
        chosen[run.key] = run
    return list(chosen.values())


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
