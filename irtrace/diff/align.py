"""Which pass of one run faces which pass of another: alignment by the pipeline's structure.

Pipelines nest passes (``tl.LowerTileOp`` runs ``tl.Simplify`` inside itself), and a config can
add or remove passes at any level. Matching by ``(name, occurrence)`` over the flat list pairs
every later occurrence wrongly as soon as one run has an extra ``tl.Simplify`` somewhere, so the
passes are aligned as a tree instead: the top-level passes of both runs are aligned as sequences
(a weighted longest common subsequence on name and scope, ties broken towards passes that saw or
made the same IR), then the children of each matched pair, and so on. Labels stay each run's own
``name#N`` (``irtrace.trace.model.occurrence_labels``).

A run that failed, or was cut short, stops somewhere: the passes the other run ran after that
point are ``not_reached``, not "removed".
"""

from __future__ import annotations

from bisect import bisect_left
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from irtrace.trace.model import STATUS_OK, KernelRun, PassRecord, occurrences, pass_label

SHARED = "shared"
"""Both runs ran the pass at this point of the pipeline."""
ONLY_A = "only_a"
"""Only the first run ran it (removed in the second)."""
ONLY_B = "only_b"
"""Only the second run ran it (added)."""
MOVED = "moved"
"""Both runs ran it once, at different points (a pass whose name is unique in both runs)."""
NOT_REACHED = "not_reached"
"""One run ran it after the point where the other failed or was cut short."""

PassKey = tuple[str, int]
"""``(pass name, occurrence)``; occurrence counts from 1."""


@dataclass(frozen=True)
class PassAlignment:
    """One row of an alignment: a pass of either run, or one pass of each facing each other."""

    a: PassRecord | None
    b: PassRecord | None
    status: str
    """``shared``, ``only_a``, ``only_b``, ``moved`` or ``not_reached``."""
    occurrence_a: int | None = None
    """N of ``a``'s ``name#N`` label in its run."""
    occurrence_b: int | None = None
    depth: int = 0
    """Nesting depth in the aligned tree (0 for top-level passes)."""

    @property
    def record(self) -> PassRecord:
        """The pass of the first run, or of the second when only it ran one."""
        record = self.a or self.b
        assert record is not None
        return record

    @property
    def label_a(self) -> str | None:
        return pass_label(self.a.name, self.occurrence_a or 1) if self.a else None

    @property
    def label_b(self) -> str | None:
        return pass_label(self.b.name, self.occurrence_b or 1) if self.b else None

    @property
    def key(self) -> PassKey:
        """``(name, N)`` of the first run's label (the second's when only it ran the pass)."""
        if self.a is not None:
            return (self.a.name, self.occurrence_a or 1)
        assert self.b is not None
        return (self.b.name, self.occurrence_b or 1)

    @property
    def label(self) -> str:
        """``name#N`` in the first run (in the second when only it ran the pass)."""
        return pass_label(*self.key)

    @property
    def both_labels(self) -> str:
        """The label, with the second run's when it differs: ``tl.Simplify#5 (tl.Simplify#7 in b)``."""
        if self.a is not None and self.b is not None and self.occurrence_a != self.occurrence_b:
            return f"{self.label} ({self.label_b} in b)"
        return self.label


@dataclass(frozen=True)
class AlignLimits:
    """How much work one level's alignment may take before it degrades (tests shrink these)."""

    full_table_cells: int = 250_000
    """Largest ``n * m`` of a level's differing middle aligned with the full weighted table: every
    pipeline TileLang runs today is far below it, so normal traces align exactly as they always did."""
    window_cells: int = 250_000
    """Largest window of unmatched passes (with its neighbours) re-aligned by the weighted table."""
    max_edits: int = 2_000
    """Passes added plus removed at one level beyond which the exact alignment (O((n+m) * edits)
    time) gives way to a greedy one by name, flagged ``approximate``."""


DEFAULT_LIMITS = AlignLimits()
_WINDOW_CONTEXT = 4
"""Matched passes on each side of a stretch of unmatched ones that its window re-aligns."""


class Alignment(list[PassAlignment]):
    """The rows of ``align_passes``, plus whether any level had to be aligned greedily."""

    approximate: bool = False
    """Some level differed in more than ``AlignLimits.max_edits`` passes and was paired greedily
    by name: a longest common pairing may hold more shared passes than these rows show."""


class _Work:
    """What one alignment has done so far: whether it degraded anywhere."""

    def __init__(self, limits: AlignLimits) -> None:
        self.limits = limits
        self.approximate = False


class _Side:
    """One run seen as a tree: children per parent index, each pass's occurrence number."""

    def __init__(self, run: KernelRun) -> None:
        self.run = run
        self.occurrence = dict(
            zip((p.index for p in run.passes), occurrences(p.name for p in run.passes), strict=True)
        )
        known = {p.index for p in run.passes}
        self.children: dict[int | None, list[PassRecord]] = {}
        for record in run.passes:
            parent = record.parent if record.parent in known else None
            self.children.setdefault(parent, []).append(record)

    def subtree(self, record: PassRecord, depth: int) -> Iterator[tuple[PassRecord, int]]:
        yield record, depth
        for child in self.children.get(record.index, ()):
            yield from self.subtree(child, depth + 1)


def align_passes(run_a: KernelRun, run_b: KernelRun, limits: AlignLimits | None = None) -> Alignment:
    """Pair the passes of two runs by the pipeline's structure, in pipeline order.

    Rows follow the passes' start order, nested rows right after their parent's; within a stretch
    where the runs differ, the first run's passes come first, except at the end of a run that
    stopped early (its last passes come before the ones it never reached). Memory stays linear in
    the passes and time near-linear while the runs differ in few passes per level; past
    ``limits`` a level is paired greedily and the result's ``approximate`` says so.
    """
    work = _Work(limits or DEFAULT_LIMITS)
    side_a, side_b = _Side(run_a), _Side(run_b)
    rows: list[PassAlignment] = []
    stopped_b = run_b.status != STATUS_OK and run_a.status == STATUS_OK
    _align_level(
        side_a, side_a.children.get(None, []), side_b, side_b.children.get(None, []), 0, stopped_b, rows, work
    )
    rows = _pair_moved(rows, run_a, run_b)
    result = Alignment(_mark_not_reached(rows, run_a, run_b))
    result.approximate = work.approximate
    return result


def _key(record: PassRecord) -> tuple[str, str]:
    return (record.name, record.scope)


def _align_level(
    side_a: _Side,
    level_a: Sequence[PassRecord],
    side_b: _Side,
    level_b: Sequence[PassRecord],
    depth: int,
    stopped_b: bool,
    rows: list[PassAlignment],
    work: _Work,
) -> None:
    def only(side: _Side, record: PassRecord, status: str) -> None:
        for inner, inner_depth in side.subtree(record, depth):
            number = side.occurrence[inner.index]
            if status == ONLY_A:
                rows.append(PassAlignment(inner, None, ONLY_A, occurrence_a=number, depth=inner_depth))
            else:
                rows.append(PassAlignment(None, inner, ONLY_B, occurrence_b=number, depth=inner_depth))

    pairs = match_sequences(level_a, level_b, work.limits, work)
    i = j = 0
    for pair_a, pair_b in [*pairs, (len(level_a), len(level_b))]:
        gap_a, gap_b = level_a[i:pair_a], level_b[j:pair_b]
        at_end = pair_a == len(level_a) and pair_b == len(level_b)
        if at_end and stopped_b:
            # The second run stopped here: its last passes, then those it never reached.
            for record in gap_b:
                only(side_b, record, ONLY_B)
            for record in gap_a:
                only(side_a, record, ONLY_A)
        else:
            for record in gap_a:
                only(side_a, record, ONLY_A)
            for record in gap_b:
                only(side_b, record, ONLY_B)
        if at_end:
            break
        record_a, record_b = level_a[pair_a], level_b[pair_b]
        rows.append(
            PassAlignment(
                record_a,
                record_b,
                SHARED,
                occurrence_a=side_a.occurrence[record_a.index],
                occurrence_b=side_b.occurrence[record_b.index],
                depth=depth,
            )
        )
        _align_level(
            side_a,
            side_a.children.get(record_a.index, []),
            side_b,
            side_b.children.get(record_b.index, []),
            depth + 1,
            stopped_b,
            rows,
            work,
        )
        i, j = pair_a + 1, pair_b + 1


def match_sequences(
    level_a: Sequence[PassRecord],
    level_b: Sequence[PassRecord],
    limits: AlignLimits = DEFAULT_LIMITS,
    work: _Work | None = None,
) -> list[tuple[int, int]]:
    """Index pairs of a longest common subsequence of the two pass lists, by name and scope.

    Among subsequences of the same length, one pairing passes that received or produced the same
    IR (same SHA-256) is preferred, so an extra ``tl.Simplify`` is told apart from its neighbours.
    Long lists are aligned in linear memory: Myers' O((n+m)·D) diff in its linear-space form (the
    divide-and-conquer on the middle snake, Hirschberg's idea), whose matched count is a longest
    common subsequence's, then each window of unmatched passes is re-aligned by the weighted table.
    Past ``limits.max_edits`` the pairing is greedy and ``work.approximate`` says so.
    """
    work = work if work is not None else _Work(limits)
    keys_a = [_key(p) for p in level_a]
    keys_b = [_key(p) for p in level_b]
    n, m = len(keys_a), len(keys_b)
    head = 0
    while head < min(n, m) and keys_a[head] == keys_b[head]:
        head += 1
    tail = 0
    while tail < min(n, m) - head and keys_a[n - 1 - tail] == keys_b[m - 1 - tail]:
        tail += 1
    pairs = [(k, k) for k in range(head)]
    middle_a = level_a[head : n - tail]
    middle_b = level_b[head : m - tail]
    if middle_a and middle_b:
        if len(middle_a) * len(middle_b) <= work.limits.full_table_cells:
            inner = _weighted_lcs(middle_a, middle_b)
        else:
            inner = _long_lcs(middle_a, middle_b, work)
        pairs += [(head + i, head + j) for i, j in inner]
    pairs += [(n - tail + k, m - tail + k) for k in range(tail)]
    return pairs


def _weighted_lcs(level_a: Sequence[PassRecord], level_b: Sequence[PassRecord]) -> list[tuple[int, int]]:
    """The full-table weighted LCS: O(n*m) time and memory, for short lists and small windows."""
    keys_a = [_key(p) for p in level_a]
    keys_b = [_key(p) for p in level_b]
    n, m = len(keys_a), len(keys_b)
    # A match is worth more than all tie-break bonuses together, so the count of matches comes first.
    match = 3 * (min(n, m) + 1)

    def weight(i: int, j: int) -> int:
        a, b = level_a[i], level_b[j]
        return match + (a.ir_before == b.ir_before) + (a.ir_after == b.ir_after)

    best = [[0] * (m + 1) for _ in range(n + 1)]
    for i in range(n - 1, -1, -1):
        row, below = best[i], best[i + 1]
        key = keys_a[i]
        for j in range(m - 1, -1, -1):
            value = below[j] if below[j] >= row[j + 1] else row[j + 1]
            if key == keys_b[j]:
                value = max(value, weight(i, j) + below[j + 1])
            row[j] = value
    pairs = []
    i = j = 0
    while i < n and j < m:
        if keys_a[i] == keys_b[j] and best[i][j] == weight(i, j) + best[i + 1][j + 1]:
            pairs.append((i, j))
            i += 1
            j += 1
        elif best[i + 1][j] >= best[i][j + 1]:
            i += 1
        else:
            j += 1
    return pairs


class _TooManyEdits(Exception):
    """The lists differ in more passes than ``AlignLimits.max_edits``."""


def _long_lcs(
    level_a: Sequence[PassRecord], level_b: Sequence[PassRecord], work: _Work
) -> list[tuple[int, int]]:
    """A longest common subsequence of long lists in linear memory, windows refined by weight."""
    codes: dict[tuple[str, str], int] = {}
    seq_a = [codes.setdefault(_key(p), len(codes)) for p in level_a]
    seq_b = [codes.setdefault(_key(p), len(codes)) for p in level_b]
    try:
        pairs: list[tuple[int, int]] = []
        _myers(seq_a, 0, len(seq_a), seq_b, 0, len(seq_b), work.limits.max_edits, pairs)
    except _TooManyEdits:
        work.approximate = True
        return _greedy_pairs(seq_a, seq_b)
    return _refine_windows(level_a, level_b, pairs, work.limits.window_cells)


_BASE_CELLS = 4_096
"""Below this many cells a sub-problem of the diff is solved by the plain table."""


def _myers(
    a: list[int], a0: int, a1: int, b: list[int], b0: int, b1: int, max_edits: int, out: list[tuple[int, int]]
) -> None:
    """Append to ``out`` the pairs of an LCS of ``a[a0:a1]`` and ``b[b0:b1]``, in order.

    Linear-space Myers: find the middle snake of an optimal edit path, recurse on both halves.
    Each half has at most half the edits, so the depth is O(log D).
    """
    while a0 < a1 and b0 < b1 and a[a0] == b[b0]:
        out.append((a0, b0))
        a0, b0 = a0 + 1, b0 + 1
    suffix: list[tuple[int, int]] = []
    while a0 < a1 and b0 < b1 and a[a1 - 1] == b[b1 - 1]:
        a1, b1 = a1 - 1, b1 - 1
        suffix.append((a1, b1))
    n, m = a1 - a0, b1 - b0
    if n and m:
        if n * m <= _BASE_CELLS:
            out.extend((a0 + i, b0 + j) for i, j in _plain_lcs(a[a0:a1], b[b0:b1]))
        else:
            x, y, u, v = _middle_snake(a, a0, a1, b, b0, b1, max_edits)
            _myers(a, a0, a0 + x, b, b0, b0 + y, max_edits, out)
            out.extend((a0 + x + k, b0 + y + k) for k in range(u - x))
            _myers(a, a0 + u, a1, b, b0 + v, b1, max_edits, out)
    out.extend(reversed(suffix))


def _middle_snake(
    a: list[int], a0: int, a1: int, b: list[int], b0: int, b1: int, max_edits: int
) -> tuple[int, int, int, int]:
    """``(x, y, u, v)``: a diagonal run from ``(x, y)`` to ``(u, v)`` on an optimal edit path.

    Forward search from the start and backward search from the end (on the reversed lists, whose
    diagonal ``k`` is the forward diagonal ``delta - k``) until their furthest points overlap.
    """
    n, m = a1 - a0, b1 - b0
    delta = n - m
    odd = delta % 2 != 0
    limit = (n + m + 1) // 2 + 1
    size = 2 * limit + 3
    forward = [0] * size
    backward = [0] * size
    off = limit + 1
    for d in range(limit):
        if 2 * d - 1 > max_edits:
            raise _TooManyEdits
        for k in range(-d, d + 1, 2):
            if k == -d or (k != d and forward[off + k - 1] < forward[off + k + 1]):
                x = forward[off + k + 1]
            else:
                x = forward[off + k - 1] + 1
            y = x - k
            start_x, start_y = x, y
            while x < n and y < m and a[a0 + x] == b[b0 + y]:
                x, y = x + 1, y + 1
            forward[off + k] = x
            back_k = delta - k
            if odd and -(d - 1) <= back_k <= d - 1 and x >= n - backward[off + back_k]:
                return start_x, start_y, x, y
        for k in range(-d, d + 1, 2):
            if k == -d or (k != d and backward[off + k - 1] < backward[off + k + 1]):
                x = backward[off + k + 1]
            else:
                x = backward[off + k - 1] + 1
            y = x - k
            start_x, start_y = x, y
            while x < n and y < m and a[a1 - 1 - x] == b[b1 - 1 - y]:
                x, y = x + 1, y + 1
            backward[off + k] = x
            fore_k = delta - k
            if not odd and -d <= fore_k <= d and forward[off + fore_k] >= n - x:
                return n - x, m - y, n - start_x, m - start_y
    raise AssertionError("the forward and backward searches always meet")


def _plain_lcs(a: Sequence[int], b: Sequence[int]) -> list[tuple[int, int]]:
    """Pairs of an LCS by the full table (small sub-problems only)."""
    n, m = len(a), len(b)
    best = [[0] * (m + 1) for _ in range(n + 1)]
    for i in range(n - 1, -1, -1):
        row, below, key = best[i], best[i + 1], a[i]
        for j in range(m - 1, -1, -1):
            row[j] = below[j + 1] + 1 if key == b[j] else max(below[j], row[j + 1])
    pairs = []
    i = j = 0
    while i < n and j < m:
        if a[i] == b[j] and best[i][j] == best[i + 1][j + 1] + 1:
            pairs.append((i, j))
            i, j = i + 1, j + 1
        elif best[i + 1][j] >= best[i][j + 1]:
            i += 1
        else:
            j += 1
    return pairs


def _refine_windows(
    level_a: Sequence[PassRecord],
    level_b: Sequence[PassRecord],
    pairs: list[tuple[int, int]],
    window_cells: int,
) -> list[tuple[int, int]]:
    """Re-align each stretch of unmatched passes, with a few matched neighbours, by the weighted table.

    A window lies between two kept pairs of a longest common subsequence, so the best pairing
    inside it matches as many passes as the pairs it replaces: the count stays the longest, and
    ties go to passes that saw the same IR, as on short lists.
    """
    n, m = len(level_a), len(level_b)
    total = len(pairs)
    gaps = [
        g
        for g in range(total + 1)
        if (pairs[g - 1] if g else (-1, -1))
        != ((pairs[g][0] - 1, pairs[g][1] - 1) if g < total else (n - 1, m - 1))
    ]
    windows: list[list[int]] = []
    for g in gaps:
        start, end = max(0, g - _WINDOW_CONTEXT), min(total, g + _WINDOW_CONTEXT)
        if windows and start <= windows[-1][1]:
            windows[-1][1] = max(windows[-1][1], end)
        else:
            windows.append([start, end])
    out: list[tuple[int, int]] = []
    kept = 0
    for start, end in windows:
        lo_a, lo_b = (pairs[start - 1][0] + 1, pairs[start - 1][1] + 1) if start else (0, 0)
        hi_a, hi_b = pairs[end] if end < total else (n, m)
        if (hi_a - lo_a) * (hi_b - lo_b) > window_cells:
            continue
        out += pairs[kept:start]
        inner = _weighted_lcs(level_a[lo_a:hi_a], level_b[lo_b:hi_b]) if hi_a > lo_a and hi_b > lo_b else []
        out += [(lo_a + i, lo_b + j) for i, j in inner]
        kept = end
    out += pairs[kept:]
    return out


def _greedy_pairs(a: Sequence[int], b: Sequence[int]) -> list[tuple[int, int]]:
    """A common subsequence by name in O((n+m) log) time: at a mismatch, skip the shorter way."""
    where_a: dict[int, list[int]] = {}
    where_b: dict[int, list[int]] = {}
    for k, code in enumerate(a):
        where_a.setdefault(code, []).append(k)
    for k, code in enumerate(b):
        where_b.setdefault(code, []).append(k)

    def next_at(where: dict[int, list[int]], code: int, after: int) -> int | None:
        found = where.get(code, [])
        k = bisect_left(found, after)
        return found[k] if k < len(found) else None

    pairs = []
    i = j = 0
    while i < len(a) and j < len(b):
        if a[i] == b[j]:
            pairs.append((i, j))
            i, j = i + 1, j + 1
            continue
        in_b = next_at(where_b, a[i], j)
        in_a = next_at(where_a, b[j], i)
        if in_b is None and in_a is None:
            i, j = i + 1, j + 1
        elif in_a is None or (in_b is not None and in_b - j <= in_a - i):
            j = in_b if in_b is not None else j + 1
        else:
            i = in_a
    return pairs


def _pair_moved(rows: list[PassAlignment], run_a: KernelRun, run_b: KernelRun) -> list[PassAlignment]:
    """A pass that runs once in each run but was not aligned ran at another point: ``moved``."""
    counts_a = Counter(p.name for p in run_a.passes)
    counts_b = Counter(p.name for p in run_b.passes)
    lone_b = {
        row.b.name: row
        for row in rows
        if row.status == ONLY_B and row.b is not None and counts_a[row.b.name] == counts_b[row.b.name] == 1
    }
    moved_b: set[int] = set()
    out = []
    for row in rows:
        partner = lone_b.get(row.a.name) if row.status == ONLY_A and row.a is not None else None
        if partner is not None and partner.b is not None:
            out.append(
                PassAlignment(row.a, partner.b, MOVED, row.occurrence_a, partner.occurrence_b, row.depth)
            )
            moved_b.add(partner.b.index)
        else:
            out.append(row)
    return [row for row in out if not (row.status == ONLY_B and row.b is not None and row.b.index in moved_b)]


def _mark_not_reached(rows: list[PassAlignment], run_a: KernelRun, run_b: KernelRun) -> list[PassAlignment]:
    """Passes one run ran after the last pass of the other, when that other one stopped early."""
    for stopped, side in ((run_b, "b"), (run_a, "a")):
        if stopped.status == STATUS_OK:
            continue
        last = max((k for k, row in enumerate(rows) if getattr(row, side) is not None), default=-1)
        lone = ONLY_A if side == "b" else ONLY_B
        rows = [
            PassAlignment(row.a, row.b, NOT_REACHED, row.occurrence_a, row.occurrence_b, row.depth)
            if k > last and row.status == lone
            else row
            for k, row in enumerate(rows)
        ]
    return rows


def end_order(rows: Sequence[PassAlignment]) -> Iterator[PassAlignment]:
    """The rows in the order their passes finished: nested passes before the pass around them."""
    pending: list[PassAlignment] = []
    for row in rows:
        while pending and pending[-1].depth >= row.depth:
            yield pending.pop()
        pending.append(row)
    while pending:
        yield pending.pop()
