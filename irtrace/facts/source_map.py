"""The trace's source maps read back (``srcmap`` records): which IR lines after each pass come from
a Python line of the kernel's file, and how many statements keep a span pass by pass (where
spans stop). Line numbers from a trace are untrusted: a line past the end of its text is dropped.
No tilelang here.
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from dataclasses import field as dataclass_field
from pathlib import PurePosixPath
from typing import Any

from irtrace.base.errors import NotInTraceError, UsageError
from irtrace.facts.line_users import binding_readers
from irtrace.trace.model import PHASE_CODEGEN, PHASE_MACHINE, Trace
from irtrace.trace.schema import KernelRun, MachineLines, PassRecord, SourceMapRecord, occurrence_labels

_LINE_QUERY = re.compile(r"(?:(?P<file>[^\x00-\x1f]{1,4096}):)?(?P<line>[1-9][0-9]{0,6})")
"""``42`` or ``FILE:42``: a line of the kernel's file, or of a file whose path ends with FILE."""


@dataclass(frozen=True)
class LineQuery:
    """A Python line asked about: ``line`` of the kernel's file, or of the file named ``file``."""

    line: int
    file: str | None = None


def parse_line_query(text: str) -> LineQuery:
    """``42`` or ``path/to/file.py:42``; anything else is a usage error."""
    match = _LINE_QUERY.fullmatch(text)
    if match is None:
        raise UsageError(f"--line takes LINE or FILE:LINE (a line number from 1), not {text[:60]!r}")
    return LineQuery(int(match.group("line")), match.group("file"))


@dataclass(frozen=True)
class PassMap:
    """A pass and the source map of the module after it (``None`` when the trace holds none)."""

    record: PassRecord
    label: str
    """``name#N`` when the name occurs more than once in the run"""
    source_map: SourceMapRecord | None


class _Finished:
    """The passes that had finished when pass ``index`` finished (with ``started``: when it began),
    asked one index at a time instead of kept as a set per pass (a set each is quadratic in the
    pass count): those that began before it but its ancestors, its nested passes, and itself.
    Nested passes begin after their parent and before its next sibling, so a pass's nest is the
    indices up to its ``ends`` entry."""

    def __init__(self, index: int, ends: dict[int, int], *, started: bool = False) -> None:
        self.index = index
        self._ends = ends
        self.last = index - 1 if started else ends.get(index, index)
        """the highest index among them"""
        self.own = None if started else index
        """the pass itself, when it has finished: a map it wrote is the last written by then (a
        pass's map is written when it ends, after its nested passes' maps)"""

    def started(self) -> _Finished:
        """The passes that had finished when this one began."""
        return _Finished(self.index, self._ends, started=True)

    def __contains__(self, other: object) -> bool:
        if not isinstance(other, int) or other not in self._ends or other > self.last:
            return False
        return other >= self.index or self._ends[other] < self.index  # an ancestor ends after it


_TextMaps = tuple[list[int], list[SourceMapRecord]]
"""The maps of one text sorted by the pass they follow (``-1``: the pipeline's input), and those keys."""


def _map_of(by_text: dict[str, _TextMaps], sha: str | None, finished: _Finished) -> SourceMapRecord | None:
    """The map of text ``sha`` written last by one of the ``finished`` passes (or for the input).
    Only a pass's ancestors (at most ``MAX_DEPTH``) are skipped on the way down."""
    keys, maps = by_text.get(sha or "", ([], []))
    own = bisect_left(keys, finished.own) if finished.own is not None else len(keys)
    if own < len(keys) and keys[own] == finished.own:
        return maps[own]
    at = bisect_right(keys, finished.last)
    while at > 0:
        key = keys[at - 1]
        first = bisect_left(keys, key)
        if key == -1 or key in finished:
            return maps[first]  # the first written of that pass's maps
        at = first
    return None


def _maps_by_text(run: KernelRun) -> dict[str, _TextMaps]:
    """The run's maps by text, sorted by the pass they follow; a map after a pass the run does not
    hold can never be chosen and is left out."""
    indexes = {p.index for p in run.passes}
    by_text: dict[str, list[tuple[int, SourceMapRecord]]] = {}
    for record in run.source_maps:
        if record.after is None or record.after in indexes:
            key = -1 if record.after is None else record.after
            by_text.setdefault(record.ir, []).append((key, record))
    found: dict[str, _TextMaps] = {}
    for text, items in by_text.items():
        items.sort(key=lambda item: item[0])  # stable: maps of one pass stay in the order written
        found[text] = ([key for key, _ in items], [record for _, record in items])
    return found


def _finished_by(passes: list[PassRecord]) -> dict[int, _Finished]:
    """For each pass, the passes that had finished when it finished: those that started before it
    and are not its ancestors (they finish after it), its nested passes, and itself. A pass whose
    module holds the same objects as a nested pass's writes no map of its own."""
    ends = {p.index: p.index for p in passes}  # each pass's last nested index (a parent starts first)
    for record in reversed(passes):
        if record.parent is not None and record.parent in ends and record.parent < record.index:
            ends[record.parent] = max(ends[record.parent], ends[record.index])
    return {p.index: _Finished(p.index, ends) for p in passes}


def pass_maps(run: KernelRun) -> list[PassMap]:
    """Every pass of ``run`` that produced a module, in order, with that module's source map: the
    last record written by then (a pass whose module holds the same objects as before writes
    none) whose text is the pass's ``ir_after``."""
    by_text = _maps_by_text(run)
    passes = sorted(run.passes, key=lambda p: p.index)
    finished = _finished_by(passes)
    labels = occurrence_labels((p.name for p in passes), bare_when_unique=True)
    found = []
    for record, label in zip(passes, labels, strict=True):
        if record.phase in (PHASE_CODEGEN, PHASE_MACHINE) or record.ir_after is None:
            continue
        found.append(PassMap(record, label, _map_of(by_text, record.ir_after, finished[record.index])))
    return found


class RunMaps:
    """The source maps of one run looked up by pass: the map of the module a pass received and of
    the one it produced, by the same rule as ``pass_maps`` (the last map of that text written by
    then)."""

    def __init__(self, run: KernelRun) -> None:
        self._by_text = _maps_by_text(run)
        self._finished = _finished_by(sorted(run.passes, key=lambda p: p.index))
        self._none = _Finished(-1, {})  # a pass the run does not hold: only the input's map

    def received(self, record: PassRecord) -> SourceMapRecord | None:
        """The map of the module ``record`` received (``None`` when the trace holds none)."""
        finished = self._finished.get(record.index)
        started = self._none if finished is None else finished.started()
        return _map_of(self._by_text, record.ir_before, started)

    def produced(self, record: PassRecord) -> SourceMapRecord | None:
        """The map of the module after ``record``; for a failed pass, of the module it received."""
        if record.ir_after is None:
            return self.received(record)
        return _map_of(self._by_text, record.ir_after, self._finished.get(record.index, self._none))


def kernel_files(run: KernelRun) -> set[str]:
    """The files of ``run``'s source maps that are the kernel's own file (empty when none is)."""
    try:
        return wanted_files(run, LineQuery(1))
    except NotInTraceError:
        return set()


def origins_by_ir_line(
    source_map: SourceMapRecord,
    files: set[str],
    text: str,
    source_lines: int | None = None,
    carried: bool = True,
) -> dict[int, tuple[int, ...]]:
    """IR line -> the lines of ``files`` its statements come from, for the lines ``text`` has (and,
    with ``source_lines``, Python lines the kernel's file has): a hostile map naming lines past
    either end, or another file, adds nothing. With ``carried``, the carried lines (over a pass
    that dropped them, or inside a block) count too (``carried_ir_lines`` tells them apart)."""
    count = text.count("\n") + (0 if text.endswith("\n") else 1)
    indexes = {i for i, name in enumerate(source_map.files) if name in files}
    found: dict[int, set[int]] = {}
    for ir, file, py in [*source_map.lines, *(source_map.carried if carried else ())]:
        if file in indexes and ir <= count and (source_lines is None or py <= source_lines):
            found.setdefault(ir, set()).add(py)
    return {ir: tuple(sorted(lines)) for ir, lines in found.items()}


def input_map(run: KernelRun) -> SourceMapRecord | None:
    """The source map of the module the pipeline received."""
    return next((m for m in run.source_maps if m.after is None and m.ir == run.input_ir), None)


@dataclass(frozen=True)
class AuthorLines:
    """What the frontend did with the statement lines of a run's kernel file: which it ran, and
    which ran, made no statement and bind a name other lines read (shown with those lines' IR)."""

    ran: frozenset[int] | None = None
    """the kernel file's lines the frontend ran (``SourceMapRecord.ran``); ``None``: not known"""
    value_users: Mapping[int, tuple[int, ...]] = dataclass_field(default_factory=dict)
    """a line that ran, made no statement and binds names -> the lines that ran and read them
    (reached by that binding, same function; through such lines in turn), which make statements"""
    inlined_users: Mapping[int, tuple[int, ...]] = dataclass_field(default_factory=dict)
    """an assignment line that ran and made a statement (a ``Bind``) -> the lines reading its value,
    as for ``value_users``: where a pass inlined the bind (the map names no IR line of its own),
    their IR stands for it"""

    skipped: tuple[int, ...] = ()
    """the statement lines the frontend did not run in the functions where it ran some (a branch
    Python left out); views list these, ``not_run`` answers for any line"""

    def not_run(self, line: int) -> bool:
        """Whether ``line`` starts a statement of a function the frontend ran (the kernel's, a
        macro's) that it did not run."""
        return line in self.skipped

    def users_of(self, line: int) -> tuple[int, ...]:
        """The lines whose IR stands for value line ``line`` (empty: not a value line)."""
        return self.value_users.get(line, ())

    def inlined_into(self, line: int) -> tuple[int, ...]:
        """The lines whose IR stands for ``line`` where a pass inlined its bind (empty: none)."""
        return self.inlined_users.get(line, ())


CHAIN_WORK = 8
"""Readers visited per reader edge when following chains of value lines (bounds hostile chains)."""
NOT_RUN = "line {line} is not part of this instance: the frontend did not run it"
"""What every view says of a statement line the frontend did not run (a branch left out)."""


def not_run_words(lines: Sequence[int]) -> str:
    """``line 52 is not part ...`` or ``lines 52, 53 are not part ...`` of this instance."""
    if len(lines) == 1:
        return NOT_RUN.format(line=lines[0])
    numbers = ", ".join(str(n) for n in lines)
    return f"lines {numbers} are not part of this instance: the frontend did not run them"


def used_by_words(users: Sequence[int], inlined: bool = False) -> str:
    """``its value is used by line 49`` (or ``lines 25, 27``): how views mark a value line's IR;
    ``inlined``: the line made a bind that a pass inlined into those lines (``inlined: ...``)."""
    lines = f"line {users[0]}" if len(users) == 1 else f"lines {', '.join(str(u) for u in users)}"
    return f"{'inlined: ' if inlined else ''}its value is used by {lines}"


def stands_for_words(users: Sequence[int], inlined: bool) -> str:
    """How views say whose IR is shown for a line: ``no statement of its own, its value is used by
    line 49`` for a value line, ``inlined: its value is used by lines 39, 40`` for an inlined bind."""
    return (
        used_by_words(users, inlined=True) if inlined else f"no statement of its own, {used_by_words(users)}"
    )


def _chain_readers(
    line: int, readers: Mapping[int, Sequence[int]], ran: frozenset[int], values: set[int], budget: list[int]
) -> tuple[int, ...]:
    """The lines that ran, read ``line``'s value and are not value lines (through value lines in
    turn: ``a = ...; b = a + 1; T.copy(..b..)``); ``budget[0]`` counts the readers visited, a hostile
    chain of value lines is followed only while it lasts."""
    reached: set[int] = set()
    pending, seen = [line], {line}
    while pending:
        found = readers.get(pending.pop(), ())
        budget[0] -= len(found)
        for reader in found:
            if reader in seen or reader not in ran:
                continue
            seen.add(reader)
            if reader not in values:
                reached.add(reader)
            elif budget[0] > 0:
                pending.append(reader)
    return tuple(sorted(reached))


BIND_PRINT = re.compile(r"\s*[A-Za-z_]\w*: T\.\w+(\(.*\))? = ")
"""How TVMScript prints a ``Bind`` (a let of a scalar, ``s: T.int32 = ko % 3``); an allocation an
assignment line makes prints unannotated (``A_shared = T.sblock_alloc_buffer(...)``)."""


def _bind_lines(
    trace: Trace, run: KernelRun, source_map: SourceMapRecord, files: set[str], lines: set[int]
) -> set[int]:
    """Of assignment ``lines``, those whose statements in the module the pipeline received are all
    ``Bind``s (``BIND_PRINT``): only such a statement can a pass inline into the lines reading it.
    One walk over the map's entries (no walk per line: a hostile map stays linear)."""
    if run.input_ir is None or not lines:
        return set()
    printed = trace.text(run.input_ir).split("\n")
    indexes = {i for i, name in enumerate(source_map.files) if name in files}
    binds: dict[int, bool] = {}
    for ir, file, py in [*source_map.lines, *source_map.carried, *source_map.inner]:
        if py in lines and file in indexes and 1 <= ir <= len(printed):
            binds[py] = binds.get(py, True) and BIND_PRINT.match(printed[ir - 1]) is not None
    return {line for line, bind in binds.items() if bind}


def author_lines(trace: Trace, run: KernelRun) -> AuthorLines:
    """``run``'s ``AuthorLines``: the lines run from the input map's ``ran``, the statements and
    readers from the kernel's file the trace stores (parsed, never run). Without the file or
    ``ran``, nothing is claimed (empty)."""
    source_map = input_map(run)
    files = kernel_files(run)
    if source_map is None or source_map.ran is None or not files:
        return AuthorLines()
    indexes = {i for i, name in enumerate(source_map.files) if name in files}
    ran = frozenset(line for file, line in source_map.ran if file in indexes)
    text = trace.kernel_file(run)
    found = binding_readers(text) if text is not None else None
    if found is None:
        return AuthorLines(ran=ran)
    made = {py for _, file, py in [*source_map.lines, *source_map.carried] if file in indexes}
    values = {line for line in found.assignments if line in ran and line not in made}
    binds = _bind_lines(
        trace, run, source_map, files, {line for line in found.assignments if line in ran and line in made}
    )
    budget = [CHAIN_WORK * (len(values) + len(binds) + sum(len(r) for r in found.readers.values()))]
    users: dict[int, tuple[int, ...]] = {}
    for line in sorted(values):
        if reached := _chain_readers(line, found.readers, ran, values, budget):
            users[line] = reached
    inlined: dict[int, tuple[int, ...]] = {}
    for line in sorted(binds):  # a bind a later pass may inline into its readers
        if reached := _chain_readers(line, found.readers, ran, values, budget):
            inlined[line] = reached
    # the functions the frontend ran: a ``def`` line run is its enclosing function's statement
    ran_in = {found.owner[line] for line in ran if line in found.owner and line not in found.definitions} - {
        0
    }
    skipped = tuple(
        sorted(line for line, owner in found.owner.items() if owner in ran_in and line not in ran)
    )
    return AuthorLines(ran=ran, value_users=users, inlined_users=inlined, skipped=skipped)


def kernel_path(run: KernelRun) -> str | None:
    """The kernel's file as the run names it: the spec's ``FILE::...``, or where a captured
    kernel's function was defined."""
    if "::" in run.spec:
        return run.spec.split("::", 1)[0]
    if run.instance is not None and run.instance.definition:
        return run.instance.definition.rsplit(":", 1)[0]
    return None


def _ends_with(path: str, tail: str) -> bool:
    """Whether ``path`` is ``tail`` or ends with it at a path component."""
    parts, tail_parts = PurePosixPath(path).parts, PurePosixPath(tail).parts
    tail_parts = tuple(part for part in tail_parts if part != ".")
    return bool(tail_parts) and parts[-len(tail_parts) :] == tail_parts


def wanted_files(run: KernelRun, query: LineQuery) -> set[str]:
    """The files of ``run``'s source maps that ``query`` means: those ending with its ``file``, or
    the kernel's own file."""
    files = {name for record in run.source_maps for name in record.files}
    tail = query.file or kernel_path(run)
    if tail is None:
        raise NotInTraceError(f"{run.kernel} on {run.target}: name the file, FILE:LINE")
    chosen = {name for name in files if _ends_with(name, tail) or (query.file is None and name == tail)}
    if not chosen:
        known = ", ".join(sorted(files)[:8]) or "none"
        raise NotInTraceError(
            f"no statement of {run.kernel} on {run.target} has a span in a file ending with {tail!r} "
            f"(files with spans: {known})"
        )
    return chosen


def ir_lines(
    source_map: SourceMapRecord, files: set[str], line: int, text: str, carried: bool = True
) -> list[int]:
    """The lines of ``text`` (the module's IR, from 1) that ``source_map`` says print a statement of
    ``line`` in one of ``files`` (with ``carried``, also one carried to it: over a pass that dropped
    it, or inside a block of it)."""
    entries = [*source_map.lines, *(source_map.carried if carried else ()), *source_map.inner]
    return _named(entries, source_map.files, files, line, text)


def carried_ir_lines(source_map: SourceMapRecord, files: set[str], line: int, text: str) -> list[int]:
    """Of ``ir_lines``, those whose statement carries ``line`` only because it was carried over a
    pass that dropped its span (the views mark them)."""
    spanned = set(_named(source_map.lines, source_map.files, files, line, text))
    return [n for n in _named(source_map.carried, source_map.files, files, line, text) if n not in spanned]


def owned_ir_lines(source_map: SourceMapRecord, files: set[str], line: int, text: str) -> list[int]:
    """Of ``carried_ir_lines``, those whose statement is the line's only by being inside a block of
    that line (``SourceMapRecord.owned``), not carried over a pass."""
    carried = set(carried_ir_lines(source_map, files, line, text))
    others = {
        n
        for n in _named(
            sorted(set(source_map.carried) - set(source_map.owned)), source_map.files, files, line, text
        )
    }
    return [n for n in _named(source_map.owned, source_map.files, files, line, text) if n in carried - others]


def carried_words(carried: Sequence[int], owned: Sequence[int]) -> str:
    """Why the ``carried`` IR lines (``~``) are the line's though no span of it is on them, in
    words true of each kind: carried over a pass that dropped the span, or (``owned``) inside a
    block of the line, within the one module. Empty when none is carried."""
    if not carried:
        return ""
    if not set(carried) - set(owned):
        return "inside the line's block, without a span of that line"
    if owned:
        return "carried over a pass that dropped the line, or inside the line's block"
    return "carried over a pass that dropped the line"


def _named(
    entries: Sequence[tuple[int, int, int]], names: Sequence[str], files: set[str], line: int, text: str
) -> list[int]:
    count = text.count("\n") + (0 if text.endswith("\n") else 1)
    indexes = {i for i, name in enumerate(names) if name in files}
    return sorted({ir for ir, file, py in entries if py == line and file in indexes and ir <= count})


@dataclass(frozen=True)
class LineInPass:
    """The IR lines a Python line became after one pass (or after a run of passes printing the same)."""

    first: PassMap
    last: PassMap
    """the last of the consecutive passes that left the same text and lines"""
    lines: tuple[int, ...]
    text_lines: tuple[str, ...]
    carried: tuple[int, ...] = ()
    """of ``lines``, those without a span of the line that are provably its statements
    (``SourceMapRecord.carried``): carried over a pass that dropped the span, or inside a block of
    the line (those are in ``owned`` too)"""
    owned: tuple[int, ...] = ()
    """of ``carried``, those inside a block of the line (``SourceMapRecord.owned``), not carried
    over a pass"""
    used_by: tuple[int, ...] = ()
    """for a line that made no statement (``AuthorLines.value_users``), or whose bind this pass
    inlined (``inlined``): the lines reading its value whose IR ``lines`` are"""
    inlined: bool = False
    """whether ``used_by`` stands for a bind of the line that a pass inlined into its readers (the
    map names no IR line of the line's own after this pass; ``AuthorLines.inlined_users``)"""


def require_maps(run: KernelRun) -> None:
    if not run.source_maps:
        raise NotInTraceError(
            f"{run.kernel} on {run.target} has no source maps in the trace: record it again with "
            "--source-map (irtrace record; irtrace run and IRTRACE= captures store them unless "
            "--no-source-map or IRTRACE_SOURCE_MAP=0)"
        )


def query_facts(trace: Trace, run: KernelRun, query: LineQuery) -> AuthorLines:
    """``author_lines`` when ``query`` asks about the kernel's own file, else nothing claimed."""
    require_maps(run)  # a trace without maps says so before a file is looked for in them
    files = wanted_files(run, query)
    return author_lines(trace, run) if files <= kernel_files(run) else AuthorLines()


def _standing_lines(
    source_map: SourceMapRecord, files: set[str], line: int, text: str, facts: AuthorLines
) -> tuple[dict[int, list[int]], bool]:
    """The lines of ``text`` that stand for Python ``line`` in one map, by the Python line whose
    statements they are: ``line``'s own (a value line's: its readers'); where the map names none
    and ``line``'s bind was inlined (``AuthorLines.inlined_users``), its readers', and ``True``."""
    by_line = {each: ir_lines(source_map, files, each, text) for each in facts.users_of(line) or (line,)}
    readers = facts.inlined_into(line)
    if readers and not any(by_line.values()):  # the bind's own statement is gone: its readers stand for it
        return {each: ir_lines(source_map, files, each, text) for each in readers}, True
    return by_line, False


def line_through_passes(
    trace: Trace,
    run: KernelRun,
    query: LineQuery,
    only: PassRecord | None = None,
    facts: AuthorLines | None = None,
) -> list[LineInPass]:
    """What Python line ``query`` became after each pass (or only after ``only``), consecutive
    passes that printed the same lines for it taken together (not across a pass in between whose
    module has no statement of that line: a nested pass's, say). A line that made no statement and
    binds a value others read is followed through those lines (``LineInPass.used_by``); a statement
    line the frontend did not run raises ``NotInTraceError`` saying so. ``facts``: the run's
    ``query_facts``, when the caller asks about many lines."""
    require_maps(run)
    files = wanted_files(run, query)
    facts = query_facts(trace, run, query) if facts is None else facts
    if facts.not_run(query.line):
        raise NotInTraceError(NOT_RUN.format(line=query.line))
    users = facts.users_of(query.line)
    found: list[LineInPass] = []
    last_shown = -2  # position in pass_maps of found[-1].last: only neighbours are taken together
    seen: dict[
        tuple[str, int],
        tuple[list[int], tuple[str, ...], tuple[int, ...], tuple[int, ...], tuple[int, ...], bool],
    ] = {}
    for position, item in enumerate(pass_maps(run)):
        if only is not None and item.record.index != only.index:
            continue
        if item.source_map is None or item.record.ir_after is None:
            continue
        key = (item.record.ir_after, id(item.source_map))
        if key not in seen:  # passes that leave one text share its lines: each text read once
            text = trace.text(item.record.ir_after)
            by_line, inlined = _standing_lines(item.source_map, files, query.line, text, facts)
            numbers = sorted({n for found_lines in by_line.values() for n in found_lines})
            all_lines = text.split("\n") if numbers else []
            carried_here: set[int] = set()
            owned_here: set[int] = set()
            for line in by_line if numbers else ():
                carried_here.update(carried_ir_lines(item.source_map, files, line, text))
                owned_here.update(owned_ir_lines(item.source_map, files, line, text))
            used = (
                tuple(line for line, found_lines in by_line.items() if found_lines)
                if users or inlined
                else ()
            )
            seen[key] = (
                numbers,
                tuple(all_lines[n - 1] for n in numbers),
                tuple(sorted(carried_here)),
                tuple(sorted(owned_here & carried_here)),
                used,
                inlined and bool(numbers),
            )
        numbers, shown, carried, owned, used_by, inlined = seen[key]
        if not numbers:
            continue
        previous = found[-1] if found else None
        if (
            previous is not None
            and last_shown == position - 1
            and previous.lines == tuple(numbers)
            and previous.text_lines == shown
            and previous.carried == carried
            and previous.owned == owned
            and previous.used_by == used_by
            and previous.inlined == inlined
            and previous.last.record.ir_after == item.record.ir_after
        ):
            found[-1] = LineInPass(
                previous.first, item, previous.lines, shown, carried, owned, used_by, inlined
            )
        else:
            found.append(LineInPass(item, item, tuple(numbers), shown, carried, owned, used_by, inlined))
        last_shown = position
    return found


LINE_FORMAT = "irtrace-line/1"
"""The ``format`` of ``line_document`` (``irtrace ir --line N --json``, MCP's ``source_line_ir``)."""


def line_document(
    kernel: str,
    target: str,
    line: str,
    found: list[LineInPass],
    generated: Sequence[GeneratedText] = (),
    machine_code: Mapping[str, int] | None = None,
) -> dict[str, Any]:
    """``found`` (and the ``generated`` code's lines, keyed by stage, and ``machine_code``: the SASS
    instructions by class, ``instruction_classes.counts_document``) as the ``irtrace-line/1`` JSON
    document; ``line`` is the query as given."""
    document: dict[str, Any] = {
        "format": LINE_FORMAT,
        "kernel": kernel,
        "target": target,
        "line": line,
        "passes": [
            {
                "first": item.first.label,
                "first_index": item.first.record.index,
                "last": item.last.label,
                "last_index": item.last.record.index,
                "ir": item.first.record.ir_after,
                "ir_lines": list(item.lines),
                "carried": list(item.carried),
                "owned": list(item.owned),
                "used_by": list(item.used_by),
                "inlined": item.inlined,
                "text": list(item.text_lines),
            }
            for item in found
        ],
    }
    for stage, lines, texts in generated:
        document[stage] = {"lines": list(lines), "text": texts}
    if machine_code is not None:
        document["machine_code"] = dict(machine_code)
    return document


@dataclass(frozen=True)
class SpanRow:
    """How many statements keep a span after one pass, and which lines of the kernel's file the
    module still maps."""

    item: PassMap
    statements: int
    with_span: int
    kernel_lines: tuple[int, ...]
    lost: tuple[int, ...]
    """kernel lines the module the pass received mapped and its output does not"""
    gained: tuple[int, ...]


def span_rows(run: KernelRun) -> list[SpanRow]:
    """The span-survival table of ``run``: one row per pass with a source map; what a pass lost or
    gained is against the map of the module it received (a nested pipeline's own module too)."""
    require_maps(run)
    try:
        files = wanted_files(run, LineQuery(1))
    except NotInTraceError:
        files = set()
    by_text = _maps_by_text(run)
    passes = sorted(run.passes, key=lambda p: p.index)
    finished = _finished_by(passes)
    kernel_lines: dict[int, tuple[int, ...]] = {}  # by map: many passes share one map

    def lines_of(source_map: SourceMapRecord) -> tuple[int, ...]:
        found = kernel_lines.get(id(source_map))
        if found is None:
            found = kernel_lines[id(source_map)] = _kernel_lines(source_map, files)
        return found

    changes: dict[tuple[int, int], tuple[tuple[int, ...], tuple[int, ...]]] = {}
    rows: list[SpanRow] = []
    for item in pass_maps(run):
        source_map = item.source_map
        if source_map is None:
            continue
        lines = lines_of(source_map)
        # against what had finished when the pass started: the passes before it but its ancestors
        received = _map_of(by_text, item.record.ir_before, finished[item.record.index].started())
        pair = (id(received), id(source_map))
        if pair not in changes:
            previous = lines_of(received) if received is not None else lines
            changes[pair] = (
                tuple(sorted(set(previous) - set(lines))),
                tuple(sorted(set(lines) - set(previous))),
            )
        lost, gained = changes[pair]
        rows.append(SpanRow(item, source_map.statements, source_map.with_span, lines, lost, gained))
    return rows


def _kernel_lines(source_map: SourceMapRecord, files: set[str]) -> tuple[int, ...]:
    indexes = {i for i, name in enumerate(source_map.files) if name in files}
    return tuple(sorted({py for _, file, py in source_map.lines if file in indexes}))


def carried_kernel_lines(source_map: SourceMapRecord, files: set[str]) -> tuple[int, ...]:
    """The lines of ``files`` that the module keeps only through carried statements (over a pass
    that dropped their span, or inside a block of the line: ``SourceMapRecord.carried``)."""
    indexes = {i for i, name in enumerate(source_map.files) if name in files}
    spanned = set(_kernel_lines(source_map, files))
    return tuple(sorted({py for _, file, py in source_map.carried if file in indexes} - spanned))


def changed_rows(rows: Sequence[SpanRow]) -> list[SpanRow]:
    """The rows where the count of statements with a span, or the kernel lines mapped, changed."""
    kept: list[SpanRow] = []
    last: tuple[int, int, tuple[int, ...]] | None = None
    for row in rows:
        key = (row.statements, row.with_span, row.kernel_lines)
        if key != last:
            kept.append(row)
        last = key
    return kept


# ----------------------------------------------------------------------------- generated code


def kernel_source_map(run: KernelRun) -> SourceMapRecord | None:
    """The map of ``run``'s kernel source, placed by TileLang's ``#line`` directives (``None`` when
    the trace holds none: recorded without ``--source-map``, or a backend that writes none)."""
    return next(
        (m for m in run.source_maps if m.by == "line_directives" and m.ir == run.source_sha256),
        None,
    )


def line_ranges(numbers: Sequence[int]) -> tuple[tuple[int, int], ...]:
    """Sorted line numbers as ``(first, last)`` runs of consecutive lines."""
    runs: list[tuple[int, int]] = []
    for number in sorted(set(numbers)):
        if runs and number == runs[-1][1] + 1:
            runs[-1] = (runs[-1][0], number)
        else:
            runs.append((number, number))
    return tuple(runs)


@dataclass(frozen=True)
class GeneratedLines:
    """What a Python line became in the kernel source, the PTX and the SASS of one run."""

    source: tuple[int, ...]
    """lines of the kernel source (from 1) whose statement carries the Python line"""
    ptx: tuple[int, ...]
    """lines of the PTX (from 1) compiled from those kernel-source lines"""
    sass: tuple[int, ...]
    """lines of the SASS listing (from 1) compiled from those kernel-source lines"""
    source_mapped: bool
    """whether the trace maps the kernel source at all (else every field is empty because nothing
    is known, not because the line became nothing)"""
    ptx_mapped: bool
    """whether the trace maps the PTX to the kernel source"""
    sass_mapped: bool
    inlined_by: tuple[int, ...] = ()
    """for a line whose bind a pass inlined (``AuthorLines.inlined_users``) and that has no
    kernel-source line of its own: the lines reading its value, whose lines ``source`` are"""


def machine_line_map(run: KernelRun, stage: str) -> MachineLines | None:
    """The map of ``run``'s ``stage`` (``ptx``, ``sass``) to its kernel source, if the trace holds one."""
    return next((m for m in run.machine_lines if m.stage == stage and m.source == run.source_sha256), None)


def _stage_lines(trace: Trace, run: KernelRun, stage: str, source: tuple[int, ...]) -> tuple[int, ...] | None:
    """The lines of ``run``'s ``stage`` text compiled from kernel-source lines ``source`` (``None``
    when the trace does not map that stage); lines past the end of the text are dropped."""
    line_map = machine_line_map(run, stage)
    if line_map is None:
        return None
    wanted = set(source)
    count = trace.text(line_map.ir).count("\n") + 1
    return tuple(
        sorted({line for line, from_source in line_map.lines if from_source in wanted and line <= count})
    )


def generated_lines(
    trace: Trace, run: KernelRun, query: LineQuery, facts: AuthorLines | None = None
) -> GeneratedLines:
    """The kernel-source, PTX and SASS lines Python line ``query`` became in ``run`` (the API for
    the language server's hover and the MCP tool): source lines by the ``#line`` map of the kernel
    source, PTX and SASS lines by their maps to the source composed with it; for a line that made
    no statement, those of the lines reading its value (``AuthorLines.value_users``). Raises
    ``NotInTraceError`` when the run has no source maps or none names the file asked for."""
    require_maps(run)
    files = wanted_files(run, query)
    facts = query_facts(trace, run, query) if facts is None else facts
    source_map = kernel_source_map(run)
    if source_map is None or run.source_sha256 is None:
        return GeneratedLines((), (), (), source_mapped=False, ptx_mapped=False, sass_mapped=False)
    text = trace.text(run.source_sha256)
    by_line, inlined = _standing_lines(source_map, files, query.line, text, facts)
    source = tuple(sorted({n for found in by_line.values() for n in found}))
    inlined_by = tuple(line for line, found in by_line.items() if found) if inlined else ()
    ptx = _stage_lines(trace, run, "ptx", source)
    sass = _stage_lines(trace, run, "sass", source)
    return GeneratedLines(
        source,
        ptx or (),
        sass or (),
        source_mapped=True,
        ptx_mapped=ptx is not None,
        sass_mapped=sass is not None,
        inlined_by=inlined_by,
    )


GeneratedText = tuple[str, tuple[int, ...], list[str]]
"""``(stage, lines, their text)``: ``source``, ``ptx`` or ``sass``."""


def generated_texts(
    trace: Trace, run: KernelRun, query: LineQuery, lines: GeneratedLines | None = None
) -> list[GeneratedText]:
    """The kernel-source, PTX and SASS lines Python line ``query`` became, with their text, for each
    stage the trace maps (no lines: the line became nothing there that the map can name);
    ``lines``: its ``generated_lines``, when the caller has them."""
    lines = generated_lines(trace, run, query) if lines is None else lines
    found: list[GeneratedText] = []
    if lines.source_mapped and run.source_sha256 is not None:
        text = trace.text(run.source_sha256).split("\n")
        found.append(("source", lines.source, [text[n - 1] for n in lines.source]))
    for stage, mapped, numbers in (
        ("ptx", lines.ptx_mapped, lines.ptx),
        ("sass", lines.sass_mapped, lines.sass),
    ):
        line_map = machine_line_map(run, stage)
        if mapped and line_map is not None:
            text = trace.text(line_map.ir).split("\n")
            found.append((stage, numbers, [text[n - 1] for n in numbers]))
    return found
