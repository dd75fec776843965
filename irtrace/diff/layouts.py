"""Inferred layouts compared between two runs (two targets, two configs, two versions), from traces only.

Each run's layouts are those its trace recorded right after the layout pass (the first ``layout``
record): what layout inference picked. Buffers are paired by name; for each pair the summary
properties are compared (kind, shapes, threads, elements per thread, replication, thread range,
swizzle), and then the element-to-(thread, local index) or element-to-address mapping itself, by
evaluating both runs' recorded expressions (``irtrace.facts.layout_eval``) on every element, or on
an even sample when that would cost more than ``EVALUATION_BUDGET``. Two layouts whose expressions
are the same text map alike without any evaluation.
"""

from __future__ import annotations

import ast
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from irtrace.facts.layout_eval import LayoutExpressionError, forward_index, forward_thread
from irtrace.trace.model import KernelRun
from irtrace.trace.schema import BufferLayout

__all__ = [
    "EVALUATION_BUDGET",
    "MAX_REPLICATE",
    "TOTAL_BUDGET",
    "BufferLayoutDiff",
    "LayoutComparison",
    "MappingCheck",
    "PropertyChange",
    "buffer_document",
    "compare_layouts",
    "compare_mapping",
    "layout_document",
]

EVALUATION_BUDGET = 4_000_000
"""Expression nodes one buffer's mapping comparison may evaluate (both runs together), about 1.5 s
(0.4 us a node): a 128 x 128 GEMM accumulator needs about half; a larger layout is compared on an
even sample. Only layouts whose expressions differ in text are evaluated at all."""
MAPPING_DEADLINE_S = 5.0
"""Seconds one buffer's mapping comparison may take, whatever its node count says (a loaded
machine, or expressions costlier than their nodes): past it the buffer is not compared."""
TOTAL_BUDGET = 10 * EVALUATION_BUDGET
"""Expression nodes one two-run comparison may evaluate over all its buffers; buffers past it are
not compared (a trace with thousands of buffers cannot make a diff take minutes)."""
MAX_REPLICATE = 4096
"""More replicas per element than this is no layout TileLang makes: the mapping is not compared."""

MappingStatus = Literal["same", "differs", "not_compared"]
SAME: MappingStatus = "same"
DIFFERS: MappingStatus = "differs"
NOT_COMPARED: MappingStatus = "not_compared"
BOTH = "both"
ONLY_A = "only_a"
ONLY_B = "only_b"

Coordinates = tuple[int, ...]
Placement = tuple[tuple[int, int], ...]
"""Where one element lives: ``(thread, local index)`` per replica, sorted (``thread`` is -1 for a
shared-memory layout, whose local index is the flattened address)."""


@dataclass(frozen=True)
class PropertyChange:
    """One summary property that differs: its name and its value in each run, as words."""

    name: str
    a: str
    b: str


@dataclass(frozen=True)
class MappingCheck:
    """The element-to-(thread, local index) mapping of two layouts, compared element by element."""

    status: MappingStatus
    total: int = 0
    """Elements in the layout's input shape."""
    compared: int = 0
    """Elements the comparison covers: all of them, or an even sample's size (``sampled``); a
    comparison stops at the first difference."""
    sampled: bool = False
    element: Coordinates | None = None
    """The first compared element where the runs differ."""
    placement_a: Placement = ()
    placement_b: Placement = ()
    reason: str | None = None
    """Why the mapping was not compared."""

    def words(self, where_a: str, where_b: str, fragment: bool) -> str:
        """The check in a sentence; ``where_a`` is run ``a``'s label with its preposition."""
        label_a, label_b = where_a, where_b
        if self.status == NOT_COMPARED:
            return f"mapping not compared: {self.reason}"
        scope = (
            f"an even sample of {self.compared} of {self.total} elements"
            if self.sampled
            else f"all {self.total} elements"
        )
        if self.status == SAME:
            return f"same mapping on {scope}"
        assert self.element is not None
        element = f"[{', '.join(map(str, self.element))}]"
        return (
            f"mapping differs at element {element}: {_placement_words(self.placement_a, fragment)} "
            f"{label_a}, {_placement_words(self.placement_b, fragment)} {label_b} (the first "
            f"difference, row-major, in {scope})"
        )


def _placement_words(placement: Placement, fragment: bool) -> str:
    if not fragment:
        return f"address {placement[0][1]}" if placement else "nowhere"
    # Threads count from the start of the fragment's thread range (its offset is a property).
    parts = [f"thread {thread} local {index}" for thread, index in placement]
    return " and ".join(parts) if parts else "no thread"


@dataclass(frozen=True)
class BufferLayoutDiff:
    """One buffer's layout in two runs."""

    buffer: str
    presence: str
    """``both``, or ``only_a`` / ``only_b``."""
    a: BufferLayout | None
    b: BufferLayout | None
    changes: tuple[PropertyChange, ...] = ()
    mapping: MappingCheck | None = None

    @property
    def different(self) -> bool:
        return (
            self.presence != BOTH
            or bool(self.changes)
            or (self.mapping is not None and self.mapping.status == DIFFERS)
        )

    def sentence(self, label_a: str, label_b: str) -> str:
        """``C_local: 128 threads x 128 elems on cuda:sm_90 vs 256 threads x 64 elems on hip:gfx942``,
        the labels with their preposition (``on cuda:sm_90``, ``in the baseline``)."""
        if self.presence == ONLY_A:
            assert self.a is not None
            return f"{self.buffer}: only {label_a} ({_short(self.a)})"
        if self.presence == ONLY_B:
            assert self.b is not None
            return f"{self.buffer}: only {label_b} ({_short(self.b)})"
        assert self.a is not None
        fragment = self.a.kind == "fragment"
        parts = []
        if self.changes:
            side_a = ", ".join(_change_words(change, change.a) for change in self.changes)
            side_b = ", ".join(_change_words(change, change.b) for change in self.changes)
            parts.append(f"{side_a} {label_a} vs {side_b} {label_b}")
        else:
            parts.append(f"same {_short(self.a)}")
        if self.mapping is not None and (self.changes or self.mapping.status != SAME):
            parts.append(self.mapping.words(label_a, label_b, fragment))
        return f"{self.buffer}: " + "; ".join(parts)


def _change_words(change: PropertyChange, value: str) -> str:
    if change.name == "threads x elems":
        threads, _, elems = value.partition(" x ")
        return f"{threads} threads x {elems} elems"
    if change.name in ("kind", "swizzle"):
        return value
    return f"{change.name} {value}"


def _short(layout: BufferLayout) -> str:
    return f"{layout.kind} {layout.summary}"


@dataclass(frozen=True)
class LayoutComparison:
    """Every buffer's inferred layout in two runs."""

    label_a: str
    """Run ``a``'s name in sentences: its target, or which trace (``baseline``)."""
    label_b: str
    preposition: str = "on"
    """``on`` a target, ``in`` a trace."""
    buffers: tuple[BufferLayoutDiff, ...] = ()
    """Every buffer either run holds a layout for, in run ``a``'s order, then ``b``'s."""
    note: str | None = None
    """Why nothing was compared (a run recorded no layouts)."""

    @property
    def different(self) -> bool:
        return any(buffer.different for buffer in self.buffers)

    @property
    def changed(self) -> tuple[BufferLayoutDiff, ...]:
        return tuple(buffer for buffer in self.buffers if buffer.different)

    def lines(self) -> list[str]:
        """One sentence per buffer whose layout differs (or the note)."""
        if self.note is not None:
            return [self.note]
        return [buffer.sentence(*self.where) for buffer in self.changed]

    @property
    def where(self) -> tuple[str, str]:
        """The labels with their preposition: ``on cuda:sm_90``."""
        return f"{self.preposition} {self.label_a}", f"{self.preposition} {self.label_b}"


def inferred_layouts(run: KernelRun) -> list[BufferLayout] | None:
    """The layouts right after the layout pass; ``None`` when the run recorded none."""
    return list(run.layouts[0].layouts) if run.layouts else None


def compare_layouts(
    run_a: KernelRun,
    run_b: KernelRun,
    label_a: str,
    label_b: str,
    *,
    preposition: str = "on",
    budget: int = EVALUATION_BUDGET,
    total_budget: int = TOTAL_BUDGET,
) -> LayoutComparison:
    """Compare the layouts layout inference picked in two runs, buffer by buffer; the labels name
    the runs in sentences, after ``preposition`` (``on cuda:sm_90``, ``in baseline``)."""
    layouts_a, layouts_b = inferred_layouts(run_a), inferred_layouts(run_b)
    if layouts_a is None or layouts_b is None:
        missing = [label for label, got in ((label_a, layouts_a), (label_b, layouts_b)) if got is None]
        if len(missing) == 2:
            return LayoutComparison(label_a, label_b, preposition, note="no layouts recorded in either run")
        return LayoutComparison(
            label_a,
            label_b,
            preposition,
            note=f"layouts not compared: the run {preposition} {missing[0]} recorded none (no layout pass "
            "ran, or the trace was recorded without IR or before layout records)",
        )
    keyed_a, keyed_b = _keyed(layouts_a), _keyed(layouts_b)
    buffers = []
    remaining = total_budget
    for key, layout in keyed_a.items():
        other = keyed_b.get(key)
        if other is None:
            buffers.append(BufferLayoutDiff(key, ONLY_A, layout, None))
            continue
        mapping, cost = _mapping(layout, other, min(budget, remaining))
        remaining -= cost
        buffers.append(_compare_buffer(key, layout, other, mapping))
    buffers += [
        BufferLayoutDiff(key, ONLY_B, None, layout) for key, layout in keyed_b.items() if key not in keyed_a
    ]
    return LayoutComparison(label_a, label_b, preposition, tuple(buffers))


def _keyed(layouts: Sequence[BufferLayout]) -> dict[str, BufferLayout]:
    """By buffer name; a name two blocks both use is told apart by ``#N`` in block order."""
    keyed: dict[str, BufferLayout] = {}
    for layout in layouts:
        key, n = layout.buffer, 1
        while key in keyed:
            n += 1
            key = f"{layout.buffer}#{n}"
        keyed[key] = layout
    return keyed


def _dims(shape: Sequence[int | str]) -> str:
    return "[" + ", ".join(map(str, shape)) + "]"


def _product(shape: Sequence[int | str]) -> int | None:
    """Elements in ``shape``; ``None`` when a dimension is symbolic."""
    dims = [dim for dim in shape if isinstance(dim, int)]
    return math.prod(dims) if len(dims) == len(shape) else None


def _properties(layout: BufferLayout) -> dict[str, str]:
    """The summary properties of a layout, as words, in the order sentences list them."""
    properties = {"kind": layout.kind, "shape": _dims(layout.input_shape)}
    if layout.kind == "fragment":
        per_thread = _product(layout.output_shape)
        elems = str(per_thread) if per_thread is not None else _dims(layout.output_shape)
        properties["threads x elems"] = f"{layout.threads} x {elems}"
        properties["replication"] = str(layout.replicate or 1)
        if layout.threads is not None and layout.thread_offset is not None:
            first = layout.thread_offset
            properties["thread range"] = f"{first}..{first + layout.threads - 1}"
    else:
        properties["output shape"] = _dims(layout.output_shape)
        properties["swizzle"] = layout.swizzle or "none"
    return properties


def _compare_buffer(key: str, a: BufferLayout, b: BufferLayout, mapping: MappingCheck) -> BufferLayoutDiff:
    props_a, props_b = _properties(a), _properties(b)
    changes = tuple(
        PropertyChange(name, props_a.get(name, "-"), props_b.get(name, "-"))
        for name in dict.fromkeys([*props_a, *props_b])
        if props_a.get(name) != props_b.get(name)
    )
    return BufferLayoutDiff(key, BOTH, a, b, changes, mapping)


def _same_expressions(a: BufferLayout, b: BufferLayout) -> bool:
    return (
        a.forward_vars == b.forward_vars
        and a.forward_index == b.forward_index
        and a.forward_thread == b.forward_thread
        and a.replicate_var == b.replicate_var
        and (a.replicate or 1) == (b.replicate or 1)
        and a.output_shape == b.output_shape
    )


def _node_count(layout: BufferLayout) -> int:
    """Expression nodes evaluated per element and replica (the budget's unit)."""
    texts = [*layout.forward_index, *([layout.forward_thread] if layout.forward_thread else [])]
    count = 0
    for text in texts:
        try:
            count += sum(1 for _ in ast.walk(ast.parse(text.strip(), mode="eval")))
        except (SyntaxError, RecursionError, MemoryError, ValueError):
            count += len(text)  # the evaluator will refuse it; the cost estimate only needs a bound
    return max(count, 1)


def compare_mapping(a: BufferLayout, b: BufferLayout, budget: int = EVALUATION_BUDGET) -> MappingCheck:
    """Where each element goes in ``a`` and in ``b``: the first element that differs, if any."""
    return _mapping(a, b, budget)[0]


def _mapping(a: BufferLayout, b: BufferLayout, budget: int) -> tuple[MappingCheck, int]:
    """The check and the expression nodes it evaluated."""
    if a.kind != b.kind:
        return MappingCheck(NOT_COMPARED, reason="one is a fragment, the other a shared-memory layout"), 0
    if a.input_shape != b.input_shape:
        return MappingCheck(NOT_COMPARED, reason="the layouts map different shapes"), 0
    total = _product(a.input_shape)
    if total is None:
        return MappingCheck(NOT_COMPARED, reason=f"symbolic shape {_dims(a.input_shape)}"), 0
    if _same_expressions(a, b):
        return MappingCheck(SAME, total, total), 0
    replicas = max(a.replicate or 1, b.replicate or 1)
    if replicas > MAX_REPLICATE:
        reason = f"replication {replicas} (at most {MAX_REPLICATE})"
        return MappingCheck(NOT_COMPARED, total, reason=reason), 0
    per_element = (_node_count(a) * (a.replicate or 1)) + (_node_count(b) * (b.replicate or 1))
    limit = budget // per_element
    if limit < 1:
        return MappingCheck(NOT_COMPARED, total, reason="the comparison's evaluation budget is spent"), 0
    sampled = total > limit
    count = min(total, limit)
    ordinal = 0
    deadline = time.monotonic() + MAPPING_DEADLINE_S
    try:
        for ordinal in range(count):
            if ordinal % 256 == 255 and time.monotonic() > deadline:
                reason = f"the comparison took longer than {MAPPING_DEADLINE_S:g} s"
                return MappingCheck(NOT_COMPARED, total, reason=reason), (ordinal + 1) * per_element
            element = _unravel(ordinal * total // count if sampled else ordinal, a.input_shape)  # type: ignore[arg-type]
            place_a, place_b = _placement(a, element), _placement(b, element)
            if place_a != place_b:
                found = MappingCheck(DIFFERS, total, count, sampled, element, place_a, place_b)
                return found, (ordinal + 1) * per_element
    except (LayoutExpressionError, RecursionError, MemoryError, OverflowError) as error:
        message = str(error) or type(error).__name__
        reason = f"an expression cannot be evaluated: {message[:200]}"
        return MappingCheck(NOT_COMPARED, total, reason=reason), (ordinal + 1) * per_element
    return MappingCheck(SAME, total, count, sampled), count * per_element


def _unravel(ordinal: int, shape: Sequence[int]) -> Coordinates:
    """The row-major coordinates of element number ``ordinal``."""
    coords = []
    for dim in reversed(shape):
        ordinal, rest = divmod(ordinal, dim)
        coords.append(rest)
    return tuple(reversed(coords))


def _placement(layout: BufferLayout, element: Coordinates) -> Placement:
    """Where ``element`` lives: ``(thread, flattened local index)`` per replica, or the address."""
    places = set()
    for replica in range(layout.replicate or 1):
        index = _flatten(forward_index(layout, element, replica), layout.output_shape)
        thread = forward_thread(layout, element, replica) if layout.kind == "fragment" else -1
        places.add((thread, index))
    return tuple(sorted(places))


def _flatten(index: Sequence[int], shape: Sequence[int | str]) -> int:
    """Row-major offset of ``index`` in ``shape``, so ``[0, 3, 5]`` in ``[1, 16, 256]`` equals
    ``[3, 5]`` in ``[16, 256]``: the same address whatever the output's rank."""
    if len(index) != len(shape) or not all(isinstance(dim, int) for dim in shape):
        raise LayoutExpressionError(f"{len(index)} output coordinates for an output shape {_dims(shape)}")
    offset = 0
    for value, dim in zip(index, shape, strict=True):
        offset = offset * int(dim) + value
    return offset


def layout_document(comparison: LayoutComparison) -> dict[str, object]:
    """The comparison as JSON (``docs/passdiff.md``)."""
    return {
        "label_a": comparison.label_a,
        "label_b": comparison.label_b,
        "different": comparison.different,
        "note": comparison.note,
        "buffers": [buffer_document(buffer, *comparison.where) for buffer in comparison.buffers],
    }


def buffer_document(buffer: BufferLayoutDiff, where_a: str, where_b: str) -> dict[str, object]:
    """One buffer's comparison as JSON; ``where_a`` names run ``a`` in its sentence (``on sm_90``)."""
    mapping = buffer.mapping
    return {
        "buffer": buffer.buffer,
        "presence": buffer.presence,
        "different": buffer.different,
        "summary_a": buffer.a.summary if buffer.a else None,
        "summary_b": buffer.b.summary if buffer.b else None,
        "changes": [{"property": c.name, "a": c.a, "b": c.b} for c in buffer.changes],
        "mapping": None
        if mapping is None
        else {
            "status": mapping.status,
            "total": mapping.total,
            "compared": mapping.compared,
            "sampled": mapping.sampled,
            "element": list(mapping.element) if mapping.element is not None else None,
            "a": [list(place) for place in mapping.placement_a],
            "b": [list(place) for place in mapping.placement_b],
            "reason": mapping.reason,
        },
        "sentence": buffer.sentence(where_a, where_b),
    }
