"""Line diffs of (normalized) IR texts, word diffs inside changed lines, unified and side-by-side views.

The line matcher maps lines to integers, trims the common head and tail (most passes change a
small part of the module) and runs ``difflib``'s matcher on what is left, without its
"popular line" junk heuristic, which would hide changes among IR lines that repeat
(``T.reads()``). ``bench/diff_speed.py`` measures it against a plain ``difflib`` diff.

Every diff here is bounded: the pairing of re-indented lines goes through the same guarded line
matcher, and a word diff whose changed part is too long to compare word by word falls back to the
whole lines and says so (``WordDiff.skipped``), since ``difflib`` is quadratic in a line's tokens.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property

from irtrace.diff.normalize import NormalizeRules, normalize_ir

EQUAL = "equal"
INSERT = "insert"
DELETE = "delete"
REPLACE = "replace"
REINDENT = "reindent"
"""A line whose indentation alone changed: one ``DiffLine`` with both line numbers."""

Opcode = tuple[str, int, int, int, int]
"""``(tag, i1, i2, j1, j2)`` as ``difflib.SequenceMatcher.get_opcodes`` gives them."""


@dataclass(frozen=True, slots=True)
class DiffLine:
    """One line of a line diff."""

    kind: str
    """``equal``, ``insert``, ``delete`` or ``reindent`` (only the indentation changed)."""
    old_no: int | None
    """1-based line number in the old text; ``None`` for an inserted line."""
    new_no: int | None
    """1-based line number in the new text; ``None`` for a deleted line."""
    text: str
    """The line without its newline (normalized text when rules were on); the new one for
    ``reindent``."""
    old_text: str | None = None
    """For ``reindent``: the old line."""


@dataclass(frozen=True, slots=True)
class SideBySideRow:
    """One row of a two-column view: a deleted line faces the inserted line that replaced it."""

    kind: str
    """``equal``, ``replace``, ``insert``, ``delete`` or ``reindent``."""
    old_no: int | None
    old_text: str
    new_no: int | None
    new_text: str


@dataclass(frozen=True)
class TextDiff:
    """The line diff of two texts after normalization with ``rules``."""

    before: str
    """The old text as diffed (normalized; line for line the raw text)."""
    after: str
    """The new text as diffed."""
    rules: NormalizeRules
    added: int
    """Lines only in ``after``."""
    removed: int
    """Lines only in ``before``."""
    line_opcodes: tuple[Opcode, ...] = field(default=(), repr=False)
    """The diff as ``difflib``-style opcodes over 0-based line indexes; ``lines`` is built from it."""

    @cached_property
    def lines(self) -> tuple[DiffLine, ...]:
        """The whole diff in order; within a changed block deletions come before insertions, and a
        line whose indentation alone changed is one ``reindent`` line.

        Built on first use: the unified and JSON outputs never need one record per line.
        """
        old_lines = split_lines(self.before)
        new_lines = split_lines(self.after)
        lines: list[DiffLine] = []
        append = lines.append
        for tag, i1, i2, j1, j2 in self.line_opcodes:
            if tag == EQUAL:
                for k in range(i2 - i1):
                    append(DiffLine(EQUAL, i1 + k + 1, j1 + k + 1, old_lines[i1 + k]))
                continue
            lines.extend(block_lines(old_lines, new_lines, i1, i2, j1, j2))
        return tuple(lines)

    @cached_property
    def reindented(self) -> int:
        """Changed lines whose indentation alone changed (each counts once in ``added`` and once
        in ``removed``)."""
        return sum(line.kind == REINDENT for line in self.lines)

    @property
    def is_empty(self) -> bool:
        """No line differs."""
        return self.added == 0 and self.removed == 0

    def opcodes(self) -> list[Opcode]:
        """The diff as ``difflib``-style opcodes over line indexes (0-based)."""
        return list(self.line_opcodes)

    def unified(
        self,
        from_name: str = "before",
        to_name: str = "after",
        context: int = 3,
        hunk_note: Callable[[list[Opcode]], str] | None = None,
    ) -> str:
        """A unified diff that ``patch`` applies to ``before`` to get ``after`` ('' when equal).

        The texts are taken as ``irtrace ir`` writes them, ending in a newline, so the patch
        applies to the files it writes even where a hunk touches the last line. ``hunk_note``
        gives the text after a hunk's ``@@ ... @@`` (where diff -p names the function; patch
        skips it), one line without control characters.
        """
        if self.is_empty:
            return ""
        old_lines = split_lines(self.before)
        new_lines = split_lines(self.after)
        out = [f"--- {from_name}\n", f"+++ {to_name}\n"]
        for group in grouped_opcodes(self.opcodes(), context):
            first, last = group[0], group[-1]
            note = hunk_note(group) if hunk_note is not None else ""
            ranges = f"-{_range(first[1], last[2])} +{_range(first[3], last[4])}"
            out.append(f"@@ {ranges} @@{' ' if note else ''}{note}\n")
            for tag, i1, i2, j1, j2 in group:
                if tag == EQUAL:
                    out.extend(" " + old_lines[i] + "\n" for i in range(i1, i2))
                    continue
                out.extend("-" + old_lines[i] + "\n" for i in range(i1, i2))
                out.extend("+" + new_lines[j] + "\n" for j in range(j1, j2))
        return "".join(out)

    def side_by_side(self, context: int | None = None) -> list[SideBySideRow]:
        """Rows for a two-column view; with ``context``, only rows within that many of a change.

        Rows left out are unchanged; a jump in line numbers marks where they were.
        """
        rows: list[SideBySideRow] = []
        deleted: list[DiffLine] = []
        inserted: list[DiffLine] = []

        def flush() -> None:
            for k in range(max(len(deleted), len(inserted))):
                old = deleted[k] if k < len(deleted) else None
                new = inserted[k] if k < len(inserted) else None
                kind = REPLACE if old and new else (DELETE if old else INSERT)
                rows.append(
                    SideBySideRow(
                        kind,
                        old.old_no if old else None,
                        old.text if old else "",
                        new.new_no if new else None,
                        new.text if new else "",
                    )
                )
            deleted.clear()
            inserted.clear()

        for line in self.lines:
            if line.kind == DELETE:
                if inserted:
                    flush()
                deleted.append(line)
            elif line.kind == INSERT:
                inserted.append(line)
            elif line.kind == REINDENT:
                flush()
                rows.append(SideBySideRow(REINDENT, line.old_no, line.old_text or "", line.new_no, line.text))
            else:
                flush()
                rows.append(SideBySideRow(EQUAL, line.old_no, line.text, line.new_no, line.text))
        flush()
        if context is None:
            return rows
        changed = [k for k, row in enumerate(rows) if row.kind != EQUAL]
        keep = [False] * len(rows)
        for k in changed:
            for near in range(max(0, k - context), min(len(rows), k + context + 1)):
                keep[near] = True
        return [row for row, kept in zip(rows, keep, strict=True) if kept]


def diff_texts(before: str, after: str, rules: NormalizeRules = NormalizeRules()) -> TextDiff:  # noqa: B008
    """Normalize both texts with ``rules`` and diff them line by line.

    With ``rules.ignore_whitespace`` lines that differ only in whitespace are equal, as with
    ``diff -w``; the diff then shows the old text's line.
    """
    if rules.any:
        before = normalize_ir(before, rules)
        after = normalize_ir(after, rules)
    old_keys, new_keys = split_lines(before), split_lines(after)
    if rules.ignore_whitespace:
        old_keys = [_no_space(line) for line in old_keys]
        new_keys = [_no_space(line) for line in new_keys]
    opcodes = diff_line_opcodes(old_keys, new_keys)
    removed = sum(i2 - i1 for tag, i1, i2, _, _ in opcodes if tag != EQUAL)
    added = sum(j2 - j1 for tag, _, _, j1, j2 in opcodes if tag != EQUAL)
    return TextDiff(before, after, rules, added, removed, tuple(opcodes))


def count_line_changes(before: str, after: str) -> tuple[int, int]:
    """Lines added and removed by the line diff ``passdiff pass`` shows (default normalization):
    a line that moved counts once in each, where counting lines as a multiset would miss it."""
    diff = diff_texts(before, after, NormalizeRules())
    return (diff.added, diff.removed)


def split_lines(text: str) -> list[str]:
    """Lines split on newlines only (as ``patch`` sees them), without the newline."""
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return lines


def _no_space(line: str) -> str:
    return "".join(line.split())


def whitespace_key(text: str) -> str:
    """``text`` with all whitespace inside lines removed: equal keys mean equal under ``diff -w``."""
    return "\n".join(_no_space(line) for line in split_lines(text))


def block_lines(
    old_lines: Sequence[str], new_lines: Sequence[str], i1: int, i2: int, j1: int, j2: int
) -> list[DiffLine]:
    """The lines of one changed block; lines that differ only in indentation become ``reindent``.

    Lines are paired by a second diff of the block's lines with their indentation stripped, so a
    loop body indented under a new ``if`` reads as the ``if`` plus re-indented lines. That diff
    goes through the line matcher, whose size guard keeps it n log n on huge repetitive blocks.
    """
    out: list[DiffLine] = []
    olds = [line.lstrip() for line in old_lines[i1:i2]]
    news = [line.lstrip() for line in new_lines[j1:j2]]
    pieces: list[Opcode] = [(REPLACE, 0, len(olds), 0, len(news))]
    if olds and news:
        pieces = diff_line_opcodes(olds, news)
    for tag, a1, a2, b1, b2 in pieces:
        if tag == EQUAL:
            for k in range(a2 - a1):
                i, j = i1 + a1 + k, j1 + b1 + k
                if old_lines[i] == new_lines[j]:  # the same line at another place: it moved
                    out.append(DiffLine(DELETE, i + 1, None, old_lines[i]))
                    out.append(DiffLine(INSERT, None, j + 1, new_lines[j]))
                else:
                    out.append(DiffLine(REINDENT, i + 1, j + 1, new_lines[j], old_lines[i]))
            continue
        out.extend(DiffLine(DELETE, i + 1, None, old_lines[i]) for i in range(i1 + a1, i1 + a2))
        out.extend(DiffLine(INSERT, None, j + 1, new_lines[j]) for j in range(j1 + b1, j1 + b2))
    return out


# ----------------------------------------------------------------------------- line matching


_EXACT_MATCH_LIMIT = 5_000 * 5_000
_EQUAL_PAIR_LIMIT = 1_000_000
"""Most pairs of equal lines (one old, one new) a region may hold for ``difflib``: its search for
the longest match visits each such pair, so 5,000 copies of one line (25 million pairs) took 14 s
while within ``_EXACT_MATCH_LIMIT``. Real IR regions hold far fewer (about 100,000 in the
5,000-line bench texts)."""
_FEW_EDITS_STEPS = 4_000_000
"""Work allowed to ``_few_edits_blocks`` (lines x edits) before the k-th copy pairing takes over."""


def diff_line_opcodes(old: list[str], new: list[str]) -> list[Opcode]:
    """Opcodes turning ``old`` into ``new`` (lists of lines)."""
    ids: dict[str, int] = {}
    a = [ids.setdefault(line, len(ids)) for line in old]
    b = [ids.setdefault(line, len(ids)) for line in new]
    n, m = len(a), len(b)
    head = 0
    limit = min(n, m)
    while head < limit and a[head] == b[head]:
        head += 1
    tail = 0
    while tail < limit - head and a[n - 1 - tail] == b[m - 1 - tail]:
        tail += 1
    matches: list[tuple[int, int, int]] = []
    if head:
        matches.append((0, 0, head))
    _match_region(a, b, head, n - tail, head, m - tail, matches)
    if tail:
        matches.append((n - tail, m - tail, tail))
    return _opcodes_from_matches(matches, n, m)


def _match_region(
    a: list[int], b: list[int], alo: int, ahi: int, blo: int, bhi: int, out: list[tuple[int, int, int]]
) -> None:
    """Append matching blocks ``(i, j, size)`` of ``a[alo:ahi]`` and ``b[blo:bhi]`` in order.

    ``difflib``'s longest-matching-block recursion, on integers: on real IR pairs it gives
    smaller diffs than a patience diff, whose unique-line anchors often pair the wrong copies
    of IR blocks that repeat with small changes.
    """
    if alo >= ahi or blo >= bhi:
        return
    region_a, region_b = a[alo:ahi], b[blo:bhi]
    if (ahi - alo) * (bhi - blo) > _EXACT_MATCH_LIMIT or _equal_pairs(region_a, region_b) > _EQUAL_PAIR_LIMIT:
        # difflib's matching is quadratic on very repetitive text (unrolled IR of tens of
        # thousands of lines, each line hundreds of times). Past this size a text that differs in
        # few lines gets a shortest diff in (lines x edits); failing that, the k-th copy of a line
        # may only match the k-th copy in the other text: every element is then unique, and a
        # longest common subsequence is a longest increasing one, found in n log n.
        lines = len(region_a) + len(region_b)
        blocks = _few_edits_blocks(region_a, region_b, min(lines, _FEW_EDITS_STEPS // lines))
        if blocks is None:
            blocks = _unique_lcs_blocks(region_a, region_b)
        out.extend((alo + i, blo + j, size) for i, j, size in blocks)
        return
    matcher = difflib.SequenceMatcher(None, region_a, region_b, autojunk=False)
    for i, j, size in matcher.get_matching_blocks():
        if size:
            out.append((alo + i, blo + j, size))


def _equal_pairs(a: list[int], b: list[int]) -> int:
    """How many ``(i, j)`` have ``a[i] == b[j]``, in linear time."""
    in_b: dict[int, int] = {}
    for line in b:
        in_b[line] = in_b.get(line, 0) + 1
    get = in_b.get
    return sum(get(line, 0) for line in a)


def _few_edits_blocks(a: list[int], b: list[int], max_edits: int) -> list[tuple[int, int, int]] | None:
    """Matching blocks of a shortest edit script of at most ``max_edits`` insertions and deletions
    (Myers' greedy algorithm, as GNU diff uses; linear in lines x edits), or ``None`` if it needs
    more."""
    n, m = len(a), len(b)
    offset = max_edits + 1
    furthest = [0] * (2 * max_edits + 3)  # [k + offset]: the furthest x reached on diagonal x - y = k
    history: list[list[int]] = []
    for edits in range(max_edits + 1):
        history.append(furthest.copy())
        for k in range(-edits, edits + 1, 2):
            if k == -edits or (k != edits and furthest[k - 1 + offset] < furthest[k + 1 + offset]):
                x = furthest[k + 1 + offset]  # an insertion: down from diagonal k + 1
            else:
                x = furthest[k - 1 + offset] + 1  # a deletion: right from diagonal k - 1
            y = x - k
            while x < n and y < m and a[x] == b[y]:
                x += 1
                y += 1
            furthest[k + offset] = x
            if x >= n and y >= m:
                return _myers_blocks(history, offset, n, m)
    return None


def _myers_blocks(history: list[list[int]], offset: int, n: int, m: int) -> list[tuple[int, int, int]]:
    """Walk the furthest-reaching paths back from ``(n, m)`` and collect their diagonal runs."""
    blocks: list[tuple[int, int, int]] = []
    x, y = n, m
    for edits in range(len(history) - 1, 0, -1):
        before = history[edits]  # the furthest points after ``edits - 1`` edits
        k = x - y
        down = k == -edits or (k != edits and before[k - 1 + offset] < before[k + 1 + offset])
        previous_k = k + 1 if down else k - 1
        previous_x = before[previous_k + offset]
        start_x = previous_x if down else previous_x + 1
        if x > start_x:
            blocks.append((start_x, start_x - k, x - start_x))
        x, y = previous_x, previous_x - previous_k
    if x:
        blocks.append((0, 0, x))
    blocks.reverse()
    return blocks


def _unique_lcs_blocks(a: list[int], b: list[int]) -> list[tuple[int, int, int]]:
    """Matching blocks of a longest common subsequence where the k-th copy of a line in ``a`` can
    only match the k-th copy in ``b``."""
    import bisect

    # Key of the k-th copy of a line: line id + k * stride (ints hash and compare fastest).
    stride = max(max(a, default=0), max(b, default=0)) + 1
    seen = [0] * stride
    positions: dict[int, int] = {}
    for j, line in enumerate(b):
        positions[line + seen[line] * stride] = j
        seen[line] += 1
    seen = [0] * stride
    pairs: list[tuple[int, int]] = []
    get = positions.get
    for i, line in enumerate(a):
        found = get(line + seen[line] * stride)
        seen[line] += 1
        if found is not None:
            pairs.append((i, found))
    # Longest increasing subsequence of the b positions (patience sorting with back links).
    tails: list[int] = []
    tail_at: list[int] = []
    back: list[int] = [-1] * len(pairs)
    for n, (_, j) in enumerate(pairs):
        slot = bisect.bisect_left(tails, j)
        if slot == len(tails):
            tails.append(j)
            tail_at.append(n)
        else:
            tails[slot] = j
            tail_at[slot] = n
        back[n] = tail_at[slot - 1] if slot else -1
    chain = []
    n = tail_at[-1] if tail_at else -1
    while n >= 0:
        chain.append(pairs[n])
        n = back[n]
    chain.reverse()
    blocks: list[tuple[int, int, int]] = []
    for i, j in chain:
        if blocks and blocks[-1][0] + blocks[-1][2] == i and blocks[-1][1] + blocks[-1][2] == j:
            blocks[-1] = (blocks[-1][0], blocks[-1][1], blocks[-1][2] + 1)
        else:
            blocks.append((i, j, 1))
    return blocks


def _opcodes_from_matches(matches: list[tuple[int, int, int]], n: int, m: int) -> list[Opcode]:
    opcodes: list[Opcode] = []
    i = j = 0
    for ai, bj, size in [*matches, (n, m, 0)]:
        if i < ai and j < bj:
            opcodes.append((REPLACE, i, ai, j, bj))
        elif i < ai:
            opcodes.append((DELETE, i, ai, j, bj))
        elif j < bj:
            opcodes.append((INSERT, i, ai, j, bj))
        if size:
            if opcodes and opcodes[-1][0] == EQUAL:
                _, i1, _, j1, _ = opcodes.pop()
                opcodes.append((EQUAL, i1, ai + size, j1, bj + size))
            else:
                opcodes.append((EQUAL, ai, ai + size, bj, bj + size))
        i, j = ai + size, bj + size
    return opcodes


def grouped_opcodes(opcodes: list[Opcode], context: int) -> list[list[Opcode]]:
    """Hunks: runs of changes with ``context`` equal lines around, as difflib groups them."""
    if not opcodes:
        return []
    codes = list(opcodes)
    if codes[0][0] == EQUAL:
        _, i1, i2, j1, j2 = codes[0]
        codes[0] = (EQUAL, max(i1, i2 - context), i2, max(j1, j2 - context), j2)
    if codes[-1][0] == EQUAL:
        _, i1, i2, j1, j2 = codes[-1]
        codes[-1] = (EQUAL, i1, min(i2, i1 + context), j1, min(j2, j1 + context))
    groups: list[list[Opcode]] = []
    group: list[Opcode] = []
    for tag, i1, i2, j1, j2 in codes:
        if tag == EQUAL and i2 - i1 > 2 * context:
            group.append((EQUAL, i1, min(i2, i1 + context), j1, min(j2, j1 + context)))
            groups.append(group)
            group = []
            i1, j1 = max(i1, i2 - context), max(j1, j2 - context)
        group.append((tag, i1, i2, j1, j2))
    if group and not (len(group) == 1 and group[0][0] == EQUAL):
        groups.append(group)
    return [g for g in groups if any(code[0] != EQUAL for code in g)]


def _range(start: int, stop: int) -> str:
    """A unified-diff range: ``start,length`` with 1-based start (``0,0`` style when empty)."""
    length = stop - start
    if length == 1:
        return f"{start + 1}"
    if length == 0:
        return f"{start},0"
    return f"{start + 1},{length}"


# ----------------------------------------------------------------------------- words

_TOKEN = re.compile(r"\s+|\w+|[^\w\s]")

WORD_PAIR_LIMIT = 250_000
"""Most token pairs (old tokens x new tokens of the changed part of one line) given to ``difflib``.

Its matcher is quadratic in a line's tokens, and worse on repetitive ones (an 88 KB line took
79 s); 500 x 500 IR tokens changed throughout take up to about 0.2 s. Lines over the limit are
first trimmed of their common head and tail, so a long line with one changed number is still
compared word by word. The longest changed part in the example traces is about 60,000 pairs."""

WORD_PAIR_BUDGET = 5_000_000
"""Most token pairs one rendering of a whole diff compares word by word (``WordBudget``): the
per-line limit alone would let ten thousand long changed lines take minutes; with it a rendering
costs a few seconds at worst. About 50 times the largest diff of the example traces."""


@dataclass
class WordBudget:
    """Token pairs a rendering of one diff may still compare word by word; shared by its lines."""

    left: int = WORD_PAIR_BUDGET


@dataclass(frozen=True, slots=True)
class WordDiff:
    """The word diff of two lines, or the reason it was not made."""

    pieces: tuple[tuple[str, str], ...]
    """``(kind, fragment)``: ``equal`` fragments shared, ``delete`` only in the old line, ``insert``
    only in the new one. Joining equal+delete gives the old line, and equal+insert the new one."""
    skipped: str | None = None
    """``word-level diff skipped: line of 660 KB, ...`` when the words were not compared;
    ``pieces`` are then the whole old line deleted and the whole new one inserted."""


def word_diff(old_line: str, new_line: str) -> list[tuple[str, str]]:
    """``(kind, fragment)`` pieces of both lines (see ``WordDiff.pieces``); a line too long to
    compare word by word comes back whole, as one deletion and one insertion."""
    return list(diff_words(old_line, new_line).pieces)


def diff_words(old_line: str, new_line: str, budget: WordBudget | None = None) -> WordDiff:
    """The word diff of two lines: ``difflib`` on the tokens between their common head and tail,
    within ``WORD_PAIR_LIMIT`` and what is ``left`` of ``budget``; past either, the whole lines
    (linear time) and a note saying why."""
    old_tokens, new_tokens = _TOKEN.findall(old_line), _TOKEN.findall(new_line)
    head = tail = 0
    # Trimmed only when needed: on usual lines difflib's own choice among equal-sized diffs stays.
    if len(old_tokens) * len(new_tokens) > WORD_PAIR_LIMIT:
        head, tail = _common_ends(old_tokens, new_tokens)
    old_middle = old_tokens[head : len(old_tokens) - tail]
    new_middle = new_tokens[head : len(new_tokens) - tail]
    pairs = len(old_middle) * len(new_middle)
    if pairs > WORD_PAIR_LIMIT:
        return WordDiff(_whole_lines(old_line, new_line), word_diff_skipped_note(old_line, new_line))
    if budget is not None:
        if pairs > budget.left:
            budget.left = 0  # the rest of the diff is shown whole too, not only its longest lines
            note = (
                f"word-level diff skipped: this diff compared {WORD_PAIR_BUDGET:,} token pairs word by "
                "word already; shown whole"
            )
            return WordDiff(_whole_lines(old_line, new_line), note)
        budget.left -= pairs
    pieces = [(EQUAL, "".join(old_tokens[:head])), *_word_pieces(old_middle, new_middle)]
    pieces.append((EQUAL, "".join(old_tokens[len(old_tokens) - tail :])))
    return WordDiff(_merged(pieces))


def word_diff_skipped(old_line: str, new_line: str) -> str | None:
    """The note ``diff_words`` gives for these lines without a budget, or ``None``; cheap for
    lines of usual length, so a view can place its notes before it builds the word diffs."""
    if len(old_line) * len(new_line) <= WORD_PAIR_LIMIT:  # a line has no more tokens than characters
        return None
    old_tokens, new_tokens = _TOKEN.findall(old_line), _TOKEN.findall(new_line)
    head, tail = _common_ends(old_tokens, new_tokens)
    if (len(old_tokens) - head - tail) * (len(new_tokens) - head - tail) > WORD_PAIR_LIMIT:
        return word_diff_skipped_note(old_line, new_line)
    return None


def word_diff_skipped_note(old_line: str, new_line: str) -> str:
    """``word-level diff skipped: line of 660 KB, ...``: what every view shows for such a line."""
    size = max(_utf8_size(old_line), _utf8_size(new_line))
    shown = f"{size / 1000:.0f} KB" if size >= 10_000 else f"{size:,} bytes"
    return f"word-level diff skipped: line of {shown}, too long to compare word by word; shown whole"


def _utf8_size(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))  # a trace's text may hold lone surrogates


def _common_ends(old: list[str], new: list[str]) -> tuple[int, int]:
    """Lengths of the common head and tail of two token lists (not overlapping)."""
    limit = min(len(old), len(new))
    head = 0
    while head < limit and old[head] == new[head]:
        head += 1
    tail = 0
    while tail < limit - head and old[len(old) - 1 - tail] == new[len(new) - 1 - tail]:
        tail += 1
    return head, tail


def _whole_lines(old_line: str, new_line: str) -> tuple[tuple[str, str], ...]:
    return tuple((kind, text) for kind, text in ((DELETE, old_line), (INSERT, new_line)) if text)


def _word_pieces(old_tokens: list[str], new_tokens: list[str]) -> list[tuple[str, str]]:
    matcher = difflib.SequenceMatcher(None, old_tokens, new_tokens, autojunk=False)
    pieces: list[tuple[str, str]] = []
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == EQUAL:
            pieces.append((EQUAL, "".join(old_tokens[i1:i2])))
        else:
            pieces.append((DELETE, "".join(old_tokens[i1:i2])))
            pieces.append((INSERT, "".join(new_tokens[j1:j2])))
    return pieces


def _merged(pieces: list[tuple[str, str]]) -> tuple[tuple[str, str], ...]:
    """Drop empty fragments and join neighbours of one kind."""
    out: list[tuple[str, str]] = []
    for kind, fragment in pieces:
        if not fragment:
            continue
        if out and out[-1][0] == kind:
            out[-1] = (kind, out[-1][1] + fragment)
        else:
            out.append((kind, fragment))
    return tuple(out)
