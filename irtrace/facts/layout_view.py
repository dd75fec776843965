"""Which recorded layouts ``irtrace layouts`` shows, why a run has none, and its JSON document
(``irtrace-layouts/1``, described in docs/layouts.md)."""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from math import prod
from typing import Any

import msgspec

from irtrace.base.errors import NotInTraceError
from irtrace.targets.backends import canonical_target_name
from irtrace.trace.model import Trace
from irtrace.trace.schema import BufferLayout, KernelRun, LayoutRecord, PassRecord

LAYOUTS_FORMAT = "irtrace-layouts/1"
"""The ``format`` of ``irtrace layouts --json``; a change that could break a reader bumps the number."""

_NON_EMPTY_LAYOUT_MAP = re.compile(r'"layout_map": \{[^}]*metadata\["tl\.(?:Layout|Fragment)"\]')
"""How TVM prints a block's non-empty ``layout_map`` in the IR the trace stores."""


@dataclass(frozen=True)
class ShownLayouts:
    """The layouts of one run after one pass."""

    after: str
    """the pass's label (``tl.LayoutInference``, ``NAME#N`` for a later occurrence)"""
    record: LayoutRecord


@dataclass(frozen=True)
class RunLayouts:
    """What ``irtrace layouts`` shows for one run: its chosen layout records, or why it has none."""

    run: KernelRun
    label: str
    """the run's kernel label (``kernel#N`` when the trace holds the pair more than once)"""
    shown: list[ShownLayouts]
    none_because: str | None
    """one sentence when the run shows no layout: why it holds none, or that ``--after`` names a pass
    it lacks or one before its first layouts"""


def elements_per_thread(layout: BufferLayout) -> int | None:
    """A fragment's elements per thread (its output shape's size); ``None`` for a shared layout or a
    symbolic shape."""
    if layout.kind != "fragment" or not all(isinstance(dim, int) for dim in layout.output_shape):
        return None
    return prod(int(dim) for dim in layout.output_shape)


def _unknown(what: str, word: str, where: str, choices: Iterable[str]) -> NotInTraceError:
    """``kernel 'matmull' is not in the trace; did you mean 'matmul'? It holds: ...``"""
    names = list(dict.fromkeys(choices))
    close = difflib.get_close_matches(word, names, n=1, cutoff=0.5)
    hint = f"; did you mean {close[0]!r}?" if close else "."
    return NotInTraceError(f"{what} {word!r} is not in {where}{hint} It holds: {', '.join(names) or 'none'}")


def select_runs(trace: Trace, kernel: str | None, target: str | None) -> list[tuple[str, KernelRun]]:
    """The runs of ``kernel`` on ``target`` (either ``None`` for all), with their labels; an unknown
    kernel or target is a ``NotInTraceError`` that suggests the closest name the trace holds."""
    kernels = [name for run in trace.runs for name in (run.kernel, run.kernel.split("::")[-1])]
    wanted = kernel.rpartition("#")[0] if kernel and kernel not in kernels and "#" in kernel else kernel
    if wanted is not None and wanted not in kernels:
        raise _unknown("kernel", kernel or "", "the trace", trace.kernels())
    if target is not None and canonical_target_name(target) not in trace.targets():
        raise _unknown("target", target, "the trace", trace.targets())
    labels = trace.run_labels()
    return [(labels[run.run_id], run) for run in trace.select(kernel, target)]


def pass_labels(run: KernelRun) -> dict[int, str]:
    """Pass index -> its label (``NAME`` for a first occurrence, ``NAME#N`` after)."""
    labels = run.occurrence_names()
    return {
        record.index: (record.name if label.endswith("#1") else label)
        for record, label in zip(run.passes, labels, strict=True)
    }


def _layout_pass(run: KernelRun) -> PassRecord | None:
    return next((p for p in run.passes if p.name.endswith("LayoutInference")), None)


def why_no_layouts(trace: Trace, run: KernelRun) -> str:
    """Why a run holds no layout record, in one sentence a user can act on."""
    layout_pass = _layout_pass(run)
    if layout_pass is None and run.status == "ok":
        return "its pipeline has no layout pass"
    if layout_pass is None:
        where = run.running or _last_failed(run)
        before = "lowered or stopped before tl.LayoutInference"
        return f"it has no layout pass ({before}; it {run.status} at {where})"
    if layout_pass.failed:
        first_line = (layout_pass.error or "").strip().splitlines()[:1]
        return f"{layout_pass.name} failed: {first_line[0] if first_line else 'no error recorded'}"
    if layout_pass.ir_after is None:
        return f"the trace holds no IR after {layout_pass.name}: recorded without IR, so without layouts"
    if _NON_EMPTY_LAYOUT_MAP.search(trace.text(layout_pass.ir_after)):
        return (
            f"the IR after {layout_pass.name} holds layouts but the trace has no layout record: "
            "it was written before irtrace recorded layouts; record it again"
        )
    return f"{layout_pass.name} inferred none: no block's layout_map holds a buffer"


def _last_failed(run: KernelRun) -> str:
    failed = [p.name for p in run.passes if p.failed]
    return failed[-1] if failed else "building the kernel"


def choose_layouts(run: KernelRun, after: str | None, every: bool) -> list[ShownLayouts]:
    """The run's layout records to show: the first (after the layout pass) by default, every one
    with ``every``, or the one in force after pass ``after`` (``NAME`` or ``NAME#N``)."""
    labels = pass_labels(run)
    records = [ShownLayouts(labels.get(r.after, f"pass {r.after}"), r) for r in run.layouts]
    if not records:
        return []
    if every:
        return records
    if after is None:
        return records[:1]
    try:
        asked = run.find_pass(after)
    except NotInTraceError:
        raise NotInTraceError(f"it ran no pass {after!r}") from None
    held = [shown for shown in records if shown.record.after <= asked.index]
    if not held:
        raise NotInTraceError(
            f"no layout yet after {after} (pass {asked.index}); "
            f"the first are after {records[0].after} (pass {records[0].record.after})"
        )
    return held[-1:]


def gather(
    trace: Trace, kernel: str | None, target: str | None, after: str | None = None, every: bool = False
) -> list[RunLayouts]:
    """For each selected run: its layouts to show, or why it has none."""
    found = []
    for label, run in select_runs(trace, kernel, target):
        if not run.layouts:
            found.append(RunLayouts(run, label, [], why_no_layouts(trace, run)))
            continue
        try:
            found.append(RunLayouts(run, label, choose_layouts(run, after, every), None))
        except NotInTraceError as error:  # --after a pass this run lacks or ran before its layouts
            found.append(RunLayouts(run, label, [], error.message))
    return found


def only_buffer(runs: Sequence[RunLayouts], buffer: str) -> list[RunLayouts]:
    """Each run's shown layouts cut down to ``buffer``; a name no shown record holds is a
    ``NotInTraceError`` that suggests the closest buffer."""
    names = [layout.buffer for run in runs for shown in run.shown for layout in shown.record.layouts]
    if buffer not in names:
        raise _unknown("buffer", buffer, "the layouts shown", names)
    return [
        RunLayouts(
            run.run,
            run.label,
            [
                ShownLayouts(
                    shown.after,
                    LayoutRecord(
                        run=shown.record.run,
                        after=shown.record.after,
                        layouts=[lay for lay in shown.record.layouts if lay.buffer == buffer],
                    ),
                )
                for shown in run.shown
                if any(lay.buffer == buffer for lay in shown.record.layouts)
            ],
            run.none_because,
        )
        for run in runs
    ]


def buffer_document(layout: BufferLayout) -> dict[str, Any]:
    """One buffer as the JSON document holds it: every ``BufferLayout`` field (``null`` where it does
    not apply) and ``elements_per_thread``."""
    document = msgspec.structs.asdict(layout)
    document["elements_per_thread"] = elements_per_thread(layout)
    return document


def layouts_document(runs: Sequence[RunLayouts]) -> dict[str, Any]:
    """The ``irtrace-layouts/1`` document (docs/layouts.md)."""
    return {
        "format": LAYOUTS_FORMAT,
        "runs": [
            {
                "kernel": run.label,
                "target": run.run.target,
                "run": run.run.run_id,
                "status": run.run.status,
                "layouts": [
                    {
                        "after": shown.after,
                        "after_index": shown.record.after,
                        "buffers": [buffer_document(layout) for layout in shown.record.layouts],
                    }
                    for shown in run.shown
                ],
                "none_because": run.none_because,
            }
            for run in runs
        ],
    }
