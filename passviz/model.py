"""What the browser, the drawing and the report show about a run, as plain data.

Nothing here imports Textual or Graphviz: the three front ends share these rows, filters and the
pass alignment between runs, and tests can check them without a screen.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace

from msgspec.structs import replace as replace_struct

from irtrace.base.safe_text import terminal_safe
from irtrace.trace.model import (
    PHASE_CHECK,
    PHASE_CODEGEN,
    PHASE_FINALIZE,
    PHASE_LOWER,
    PHASE_MACHINE,
    KernelRun,
    PassRecord,
    Trace,
    occurrence_labels,
    occurrences,
)
from irtrace.trace.summary import line_changes

PHASES = (PHASE_CHECK, PHASE_LOWER, PHASE_FINALIZE, PHASE_CODEGEN, PHASE_MACHINE)

BAR_BLOCKS = " ▏▎▍▌▋▊▉█"


@dataclass(frozen=True)
class PassEntry:
    """One pass of a run as every passviz view lists it."""

    record: PassRecord
    key: tuple[str, int]
    """(name, occurrence): how a pass is matched across targets and runs."""
    label: str
    """``name#N`` when the name occurs more than once in the run, else the name."""
    share: float
    """Self time as a share of the run's total self time."""

    @property
    def index(self) -> int:
        return self.record.index


def pass_entries(run: KernelRun) -> list[PassEntry]:
    """The run's passes in order, labelled and with their share of the time."""
    total = sum(p.self_s for p in run.passes) or 1.0
    names = [p.name for p in run.passes]
    labels = occurrence_labels(names, bare_when_unique=True)
    return [
        PassEntry(record, (record.name, number), label, record.self_s / total)
        for record, number, label in zip(run.passes, occurrences(names), labels, strict=True)
    ]


LineCounts = dict[int, tuple[int, int] | None]
"""Lines added and removed, per pass index; ``None`` for a new stage (``is_new_stage``)."""


def line_counts(
    trace: Trace, run: KernelRun, cache: dict[tuple[str, str], tuple[int, int]] | None = None
) -> LineCounts:
    """Lines added and removed per pass index: the counts of the diff the browser shows.

    passdiff's real line diff (with its default normalization), so a line that moved counts as
    one added and one removed, as in ``passdiff pass`` and ``irtrace show``. ``cache`` (one per
    trace) keeps counts by the pair of texts, which repeat across the runs of one kernel.
    """
    from irtrace.diff import count_line_changes

    cache = {} if cache is None else cache
    return {record.index: line_changes(trace, record, count_line_changes, cache) for record in run.passes}


def run_text_size(trace: Trace, run: KernelRun) -> int:
    """Characters of distinct IR the run refers to: decides whether counting lines can wait."""
    shas = {sha for p in run.passes for sha in (p.ir_before, p.ir_after) if sha}
    return sum(trace.text_size(sha) for sha in shas)


@dataclass(frozen=True)
class PassFilter:
    """Which passes a list shows. Failed passes are always shown: they are what one looks for."""

    changed_only: bool = False
    name: str = ""
    """Case-insensitive substring of the pass name."""
    phase: str = ""
    """One of ``PHASES``, or '' for all."""

    @property
    def active(self) -> bool:
        return self.changed_only or bool(self.name) or bool(self.phase)

    def admits(self, record: PassRecord) -> bool:
        if self.phase and record.phase != self.phase:
            return False
        if self.name and self.name.lower() not in record.name.lower():
            return False
        return not self.changed_only or record.changed or record.failed


def aligned_pass(run_from: KernelRun, record: PassRecord, run_to: KernelRun) -> PassRecord | None:
    """The pass of ``run_to`` at the pipeline point of ``record``, through passdiff's alignment
    (structural: a top-level ``tl.Simplify`` faces the top-level one, whatever its ``#N``).

    When ``run_to`` has no such pass (the backends part ways there, or it stopped before), the
    nearest pass of ``run_to`` before that point is taken, so switching never jumps back to the
    start.
    """
    from irtrace.diff import align_passes

    if not run_to.passes:
        return None
    previous: PassRecord | None = None
    for alignment in align_passes(run_from, run_to):
        if alignment.a is not None and alignment.a.index == record.index:
            return alignment.b or previous or run_to.passes[0]
        if alignment.b is not None:
            previous = alignment.b
    return previous or run_to.passes[0]


def next_matching(
    entries: Sequence[PassEntry], current: int | None, forward: bool, wanted: str
) -> PassEntry | None:
    """The next (or previous) entry after ``current`` that is ``changed`` or ``failed``; wraps around."""
    if not entries:
        return None
    indices = [e.index for e in entries]
    start = indices.index(current) if current in indices else (-1 if forward else len(entries))
    order = list(range(start + 1, len(entries))) + list(range(0, start + 1))
    if not forward:
        order = list(range(start - 1, -1, -1)) + list(range(len(entries) - 1, start - 1, -1))
    for position in order:
        record = entries[position].record
        if (wanted == "changed" and record.changed) or (wanted == "failed" and record.failed):
            return entries[position]
    return None


def time_bar(share: float, width: int) -> str:
    """A bar of ``width`` cells filled in eighths for ``share`` in [0, 1]."""
    eighths = round(max(0.0, min(1.0, share)) * width * 8)
    full, rest = divmod(eighths, 8)
    bar = "█" * full + (BAR_BLOCKS[rest] if rest else "")
    return bar.ljust(width)


def format_ms(seconds: float) -> str:
    ms = seconds * 1000
    return f"{ms:.0f} ms" if ms >= 100 else f"{ms:.1f} ms" if ms >= 1 else f"{ms:.2f} ms"


def ir_language(record: PassRecord | None) -> str:
    """Pygments lexer for the text after a pass: TVMScript is Python, kernel sources are C-like,
    the ``machine`` stages (``irtrace record --machine-code``) PTX and SASS assembly."""
    if record is not None and record.phase == PHASE_MACHINE:
        return "ptx" if record.name == "ptx" else "gas"
    return "cpp" if record is not None and record.phase == PHASE_CODEGEN else "python"


def run_label(run: KernelRun) -> str:
    mark = {"ok": "", "failed": " ✗", "incomplete": " …"}.get(run.status, "")
    return f"{run.target}{mark}"


class _SafeTexts(Mapping[str, str]):
    """A trace's texts as the terminal may show them (control characters escaped when read)."""

    def __init__(self, texts: Mapping[str, str]) -> None:
        self._texts = texts

    def __getitem__(self, sha: str) -> str:
        return terminal_safe(self._texts[sha])

    def __iter__(self) -> Iterator[str]:
        return iter(self._texts)

    def __len__(self) -> int:
        return len(self._texts)

    def size(self, sha: str) -> int:
        size = getattr(self._texts, "size", None)
        return int(size(sha)) if size is not None else len(self._texts.get(sha, ""))


def terminal_view(trace: Trace) -> Trace:
    """The trace with every text the browser shows made terminal-safe: names, errors and IR.

    Textual writes widget text to the terminal as it is; a kernel name holding an escape
    sequence must reach it escaped, like every other tool's output.
    """

    def safe(text: str | None) -> str | None:
        return None if text is None else terminal_safe(text)

    runs = tuple(
        replace_struct(
            run,
            kernel=terminal_safe(run.kernel),
            spec=terminal_safe(run.spec),
            target=terminal_safe(run.target),
            target_detail=terminal_safe(run.target_detail),
            tilelang_version=terminal_safe(run.tilelang_version),
            error=safe(run.error),
            running=safe(run.running),
            passes=tuple(
                replace_struct(
                    p, name=terminal_safe(p.name), raw_name=terminal_safe(p.raw_name), error=safe(p.error)
                )
                for p in run.passes
            ),
        )
        for run in trace.runs
    )
    return replace(trace, runs=runs, texts=_SafeTexts(trace.texts))
