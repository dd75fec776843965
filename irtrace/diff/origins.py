"""Which Python line of the kernel a diff's hunks come from, read from the trace's source maps
(``srcmap`` records, ``irtrace record --source-map``; docs/source-maps.md).

A changed line is attributed to the Python lines its statements carry in the map of its own text:
a removed line through the map of the old text, an added line through the map of the new one.
Only the kernel's own file counts, and only lines both texts and that file have: a trace without
maps, or a text without one, attributes nothing (never a guess from the text).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import PurePosixPath

from irtrace.diff.textdiff import EQUAL, Opcode
from irtrace.facts.source_map import RunMaps, author_lines, kernel_files, origins_by_ir_line, used_by_words
from irtrace.trace.model import KernelRun, PassRecord, Trace
from irtrace.trace.schema import SourceMapRecord

NO_MAPS_HINT = (
    "Python lines of the hunks: not shown, the trace holds no source maps (record it with "
    "irtrace record --source-map)"
)
"""What the terminal and HTML outputs say once when no run compared holds source maps."""
_UNPRINTABLE = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_SHOWN_SOURCE = 70
"""Characters of a Python line shown beside its number."""


@dataclass(frozen=True)
class TextOrigins:
    """Which lines of the kernel's file each line of one IR text comes from."""

    file: str
    """the kernel file's name, for display (its last component, unprintable characters replaced)"""
    lines: Mapping[int, tuple[int, ...]]
    """IR line (from 1) -> Python lines of the kernel's file"""
    source: tuple[str, ...] | None
    """the kernel's file as the trace holds it (``None`` when it holds none)"""
    spanned: Mapping[int, tuple[int, ...]] = field(default_factory=dict)
    """``lines`` without the carried lines (over a pass that dropped their span, or inside a block)"""
    values: Mapping[int, tuple[int, ...]] = field(default_factory=dict)
    """a line that made no statement -> the lines reading its value (``AuthorLines.value_users``):
    a hunk touching their IR comes from it too"""

    def _direct(self, ir_lines: Iterable[int]) -> set[int]:
        return {py for ir in ir_lines for py in self.lines.get(ir, ())}

    def of(self, ir_lines: Iterable[int]) -> tuple[int, ...]:
        direct = self._direct(ir_lines)
        return tuple(sorted(direct | set(self.used_by(direct))))

    def used_by(self, direct: set[int]) -> dict[int, tuple[int, ...]]:
        """The value lines among ``direct``'s origins: value line -> those of its readers there."""
        found = {line: tuple(u for u in users if u in direct) for line, users in self.values.items()}
        return {line: users for line, users in found.items() if users}

    def carried_of(self, ir_lines: Iterable[int]) -> tuple[int, ...]:
        """Of ``of(ir_lines)``, the Python lines these IR lines keep only by being carried."""
        numbers = list(ir_lines)
        spanned = {py for ir in numbers for py in self.spanned.get(ir, ())}
        return tuple(sorted(py for py in self._direct(numbers) if py not in spanned))


@dataclass(frozen=True)
class HunkOrigin:
    """The Python lines of one hunk's changed lines, on each side (``None``: that side has no map)."""

    old: tuple[int, ...] | None
    new: tuple[int, ...] | None
    old_carried: tuple[int, ...] = ()
    """of ``old``, the lines that reach the hunk only through carried statements (over a pass, or
    inside a block of the line)"""
    new_carried: tuple[int, ...] = ()
    """of ``new``, likewise"""
    used_by: Mapping[int, tuple[int, ...]] = field(default_factory=dict)
    """of ``old`` and ``new``, the lines that made no statement: line -> the lines reading its
    value whose IR the hunk changes"""

    @property
    def carried(self) -> tuple[int, ...]:
        return tuple(sorted(set(self.old_carried) | set(self.new_carried)))


@dataclass(frozen=True)
class DiffOrigins:
    """The source maps of a diff's old and new texts, read for the kernel's file."""

    before: TextOrigins | None
    after: TextOrigins | None
    recorded: bool
    """the runs compared hold source maps at all (without them, one hint says how to get them)"""
    same_source: bool
    """both sides' line numbers are of the same file (one run, or the same recorded file)"""

    @property
    def mapped(self) -> bool:
        return self.before is not None or self.after is not None

    def hunk(self, old_lines: Iterable[int], new_lines: Iterable[int]) -> HunkOrigin:
        """The origin of a hunk whose changed lines are ``old_lines`` and ``new_lines`` (from 1)."""
        old_lines, new_lines = list(old_lines), list(new_lines)
        old = None if self.before is None else self.before.of(old_lines)
        new = None if self.after is None else self.after.of(new_lines)
        old_carried = self.before.carried_of(old_lines) if self.before is not None else ()
        new_carried = self.after.carried_of(new_lines) if self.after is not None else ()
        used_by: dict[int, set[int]] = {}
        for origins, lines in ((self.before, old_lines), (self.after, new_lines)):
            if origins is not None:
                for line, users in origins.used_by(origins._direct(lines)).items():
                    used_by.setdefault(line, set()).update(users)
        used = {line: tuple(sorted(users)) for line, users in used_by.items()}
        return HunkOrigin(old, new, old_carried, new_carried, used)

    def of_opcodes(self, group: Sequence[Opcode]) -> HunkOrigin:
        """The origin of a hunk given as difflib-style opcodes (0-based line indexes)."""
        old = [i + 1 for tag, i1, i2, _, _ in group if tag != EQUAL for i in range(i1, i2)]
        new = [j + 1 for tag, _, _, j1, j2 in group if tag != EQUAL for j in range(j1, j2)]
        return self.hunk(old, new)

    def label(self, hunk: HunkOrigin) -> str:
        """``gemm.py:34,36``; ``a gemm.py:34 b gemm.py:35`` when the sides are different files;
        ``''`` when no changed line comes from a line of the kernel."""
        if self.same_source:
            lines = sorted(set(hunk.old or ()) | set(hunk.new or ()))
            origins = self.after or self.before
            return f"{origins.file}:{','.join(map(str, lines))}" if lines and origins else ""
        parts = [
            f"{side} {origins.file}:{','.join(map(str, lines))}"
            for side, origins, lines in (("a", self.before, hunk.old), ("b", self.after, hunk.new))
            if origins is not None and lines
        ]
        return " ".join(parts)

    def described(self, hunk: HunkOrigin) -> list[str]:
        """One line per Python line of the hunk: its number and, where the trace holds the
        kernel's file, the line itself (stripped and cut)."""
        sides = (
            [("", self.after or self.before, sorted(set(hunk.old or ()) | set(hunk.new or ())))]
            if self.same_source
            else [("a ", self.before, list(hunk.old or ())), ("b ", self.after, list(hunk.new or ()))]
        )
        out = []
        for side, origins, lines in sides:
            if origins is None:
                continue
            for line in lines:
                text = ""
                if origins.source is not None and line <= len(origins.source):
                    text = _UNPRINTABLE.sub("?", origins.source[line - 1].strip())
                    text = text if len(text) <= _SHOWN_SOURCE else text[: _SHOWN_SOURCE - 1] + "…"
                mark = " (carried)" if line in hunk.carried else ""
                if line in hunk.used_by:
                    mark += f" ({used_by_words(hunk.used_by[line])})"
                out.append(f"{side}{origins.file}:{line}{mark}  {text}".rstrip())
        return out


NOT_RECORDED = DiffOrigins(None, None, recorded=False, same_source=True)


def _display_name(files: set[str]) -> str:
    name = PurePosixPath(sorted(files)[0]).name if files else "kernel"
    return _UNPRINTABLE.sub("?", name)[:120] or "kernel"


def _text_origins(
    trace: Trace, run: KernelRun, source_map: SourceMapRecord | None, sha: str | None
) -> TextOrigins | None:
    files = kernel_files(run)
    if source_map is None or not source_map.placed or not files or sha is None:
        return None
    source_text = trace.kernel_file(run)
    source = tuple(source_text.splitlines()) if source_text is not None else None
    text, count = trace.text(sha), None if source is None else len(source)
    lines = origins_by_ir_line(source_map, files, text, count)
    spanned = (
        origins_by_ir_line(source_map, files, text, count, carried=False) if source_map.carried else lines
    )
    values = author_lines(trace, run).value_users
    return TextOrigins(_display_name(files), lines, source, spanned, values)


def pass_origins(trace: Trace, run: KernelRun, first: PassRecord, last: PassRecord) -> DiffOrigins:
    """The origins of the diff from what ``first`` received to what ``last`` produced."""
    if not run.source_maps:
        return NOT_RECORDED
    maps = RunMaps(run)
    after_sha = last.ir_after if last.ir_after is not None else last.ir_before
    return DiffOrigins(
        _text_origins(trace, run, maps.received(first), first.ir_before),
        _text_origins(trace, run, maps.produced(last), after_sha),
        recorded=True,
        same_source=True,
    )


def _state_origins(trace: Trace, run: KernelRun, record: PassRecord | None) -> TextOrigins | None:
    """The origins of a run's IR after ``record`` (before its first pass when ``None``)."""
    if not run.source_maps or not run.passes:
        return None
    maps = RunMaps(run)
    if record is None:
        first = min(run.passes, key=lambda p: p.index)
        return _text_origins(trace, run, maps.received(first), first.ir_before)
    sha = record.ir_after if record.ir_after is not None else record.ir_before
    return _text_origins(trace, run, maps.produced(record), sha)


def state_origins(
    trace_a: Trace,
    run_a: KernelRun,
    record_a: PassRecord | None,
    trace_b: Trace,
    run_b: KernelRun,
    record_b: PassRecord | None,
) -> DiffOrigins:
    """The origins of a diff of two runs' IR, each after its pass (or before its first one)."""
    if not run_a.source_maps and not run_b.source_maps:
        return NOT_RECORDED
    sha_a = run_a.kernel_file_sha256
    same = trace_a is trace_b or (sha_a is not None and sha_a == run_b.kernel_file_sha256)
    return DiffOrigins(
        _state_origins(trace_a, run_a, record_a),
        _state_origins(trace_b, run_b, record_b),
        recorded=True,
        same_source=same,
    )
