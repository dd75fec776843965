"""Reading a trace run by run: memory bounded by its largest run, not by the corpus it holds.

``open_trace`` scans the file once and keeps, per run, only its header's keys (kernel, target,
tilelang version, host name) and where its lines lie; every IR text stays on disk, indexed by its
SHA-256 (``trace_reader.FileLines``), in a ``DigestIndex`` that moves to a temporary file once a
corpus outgrows memory. The returned ``Trace``'s ``runs`` is a ``RunFile``: each run
is read from the file, decoded and validated by the same code as ``load_trace`` when it is asked
for, and dropped once the caller lets go of it. ``irtrace merge``, ``check`` and ``show`` and
``passviz html`` read traces this way; the interactive tools load them whole (``load_trace``).

Errors are the same as ``load_trace``'s: what the scan can see (a record before its run or after
its end, a second header, records after the footer, a record that is not JSON) is raised by
``open_trace``; what needs a run's records decoded (a field of the wrong type, a pass whose parent
is missing, a text the trace does not hold) when that run is read, or for every run at once by
``validate_runs``.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, overload

import msgspec

from irtrace.base.errors import TraceFormatError
from irtrace.trace.digest_index import DigestIndex
from irtrace.trace.model import LazyTexts, RunHeader, Trace
from irtrace.trace.reader import (
    KEPT_TEXTS,
    MIN_BYTES_PER_LINE,
    FileLines,
    ParsedRecords,
    UnknownRecord,
    decode_record,
    decode_records,
    finish_run,
    ir_text_sha,
    open_trace_file,
    read_errors,
    read_header,
    read_record,
    text_place,
)
from irtrace.trace.schema import IrRecord, KernelRun, Record

_IR_PREFIX = b'{"record":"ir","sha256":"'
_BOM = b"\xef\xbb\xbf"
_ENDS_RUN = {"end"}
_IN_RUN = {"pass", "start", "layout", "srcmap", "end"}
"""Record kinds that must come between their run's record and its ``end``."""
_AFTER_END = {"machine", "bench", "launches"}
"""Record kinds that may come after their run's ``end`` (the compile overlaps the next run)."""


class _Head(msgspec.Struct):
    """What the scan reads of a record line: its kind and run (the rest is skipped unread)."""

    record: str
    run: int | None = None


_head_decoder = msgspec.json.Decoder(_Head)


@dataclass(slots=True)
class _RunPlace:
    """Where a run's lines lie: spans of the file (IR lines inside them are skipped on reading)."""

    header: RunHeader
    spans: list[tuple[int, int, int]] = field(default_factory=list)
    """(first byte, end byte, number of the first line)."""
    ended: bool = False


class RunFile(Sequence[KernelRun]):
    """A streamed trace's runs, in file order, each read from the file when asked for."""

    def __init__(self, source: _Source, places: Sequence[_RunPlace]) -> None:
        self._source = source
        self._places = places
        self.headers: tuple[RunHeader, ...] = tuple(place.header for place in places)
        """Every run's keys, without reading any run."""
        self._last: tuple[int, KernelRun] | None = None
        """The run read last: a caller that asks for the same run twice reads it once."""

    @overload
    def __getitem__(self, index: int) -> KernelRun: ...
    @overload
    def __getitem__(self, index: slice) -> RunFile: ...
    def __getitem__(self, index: int | slice) -> KernelRun | RunFile:
        if isinstance(index, slice):
            return RunFile(self._source, self._places[index])
        place = self._places[index]
        if self._last is None or self._last[0] != place.header.run_id:
            self._last = (place.header.run_id, self._source.read_run(place))
        return self._last[1]

    def __len__(self) -> int:
        return len(self._places)

    def __iter__(self) -> Iterator[KernelRun]:
        for index in range(len(self._places)):
            yield self[index]

    def only(self, run_ids: Sequence[int]) -> RunFile:
        """These runs (by id), in the order given."""
        by_id = {place.header.run_id: place for place in self._places}
        return RunFile(self._source, [by_id[run_id] for run_id in run_ids])


class _Source:
    """The open trace file and what its scan found: the texts' places and the header's facts."""

    def __init__(self, handle: IO[bytes], where: str, texts: FileLines, created: str) -> None:
        self.handle = handle
        self.where = where
        self.texts = texts
        self.created = created

    def read_run(self, place: _RunPlace) -> KernelRun:
        """Decode and validate one run's records, as ``load_trace`` does, and build the run."""
        parsed = ParsedRecords()
        numbers: list[int] = []
        lines: list[str] = []
        for start, end, first in place.spans:
            data = _pread(self.handle, end - start, start)
            for number, raw in enumerate(data.split(b"\n"), start=first):
                if not raw.strip() or raw.startswith(_IR_PREFIX):
                    continue
                numbers.append(number)
                lines.append(raw.decode("utf-8"))
        for number, record in zip(numbers, decode_records(lines, numbers, self.where), strict=True):
            if record is not None and not isinstance(record, IrRecord):
                read_record(record, self.where, number, parsed)
        return finish_run(parsed, place.header.run_id, self.where, self.texts)


def _pread(handle: IO[bytes], length: int, start: int) -> bytes:
    import os

    if hasattr(os, "pread"):
        return os.pread(handle.fileno(), length, start)
    handle.seek(start)
    return handle.read(length)


def open_trace(path: str | Path) -> Trace:
    """A trace whose runs are read one at a time (``RunFile``); see the module's docstring."""
    file = Path(path)
    with read_errors(file):
        handle, packed_cut = open_trace_file(file)
        try:
            return _scan(handle, str(file), packed_cut)
        except BaseException:
            handle.close()
            raise


def validate_runs(trace: Trace) -> None:
    """Read every run once (one at a time) so that a bad record is found before any output."""
    for _ in trace.runs:
        pass


def _scan(handle: IO[bytes], where: str, packed_cut: bool) -> Trace:
    parsed = ParsedRecords()  # the header's facts, and which runs began and ended
    places: dict[int, _RunPlace] = {}
    offsets = DigestIndex()  # a corpus's texts outgrow memory: the index moves to a file
    fallback: dict[str, str] = {}
    cut = packed_cut
    header_seen = False
    footer_line: int | None = None
    previous: _RunPlace | None = None
    offset = 0
    number = 0
    for raw in handle:
        start = offset
        offset += len(raw)
        number += 1
        ended = raw.endswith(b"\n")
        body = raw[:-1] if ended else raw
        if start == 0 and body.startswith(_BOM):  # a byte-order mark, added by some Windows editors
            body, start = body[len(_BOM) :], start + len(_BOM)
        if number > offset // MIN_BYTES_PER_LINE + 1000:  # as load_trace: no trace is mostly empty lines
            raise TraceFormatError(f"{where!r} is not a trace: mostly empty lines")
        if not body.strip():
            continue
        if not header_seen:
            read_header(_text(body, where), where, parsed)
            header_seen = True
            continue
        if footer_line is not None:
            raise TraceFormatError(f"{where}:{number}: a record after the trace's footer")
        sha_hex = ir_text_sha(body) if ended else None
        if sha_hex is not None:
            _text(body, where)
            key, text_at = text_place(sha_hex, start, len(body))
            offsets[key] = text_at
            continue
        line = _text(body, where) if ended else body.decode("utf-8", errors="replace")
        record = _record(line, where, number, last=not ended)
        if record is None:
            if not ended:
                cut = True  # a write cut short by a kill: keep what came before
            continue
        kind, run_id, full = record
        if kind == "ir":
            assert isinstance(full, IrRecord)
            fallback[full.sha256] = line
            continue
        if kind == "footer":
            footer_line = number
            continue
        assert run_id is not None
        place = places.get(run_id)
        if kind == "run":
            if place is not None:
                raise TraceFormatError(f"{where}:{number}: run {run_id} is started twice")
            assert isinstance(full, KernelRun)
            # Targets, versions and hosts repeat across a corpus: one string each, not one a run.
            host = sys.intern(full.host.get("hostname", "?"))
            header = RunHeader(
                run_id, full.kernel, sys.intern(full.target), sys.intern(full.tilelang_version), host
            )
            place = places[run_id] = _RunPlace(header)
        elif place is None:
            raise TraceFormatError(
                f"{where}:{number}: {kind} record of run {run_id}, which has no run record before it"
            )
        elif place.ended and kind in _IN_RUN:
            raise TraceFormatError(f"{where}:{number}: {kind} record of run {run_id} after its end")
        if kind in _ENDS_RUN:
            place.ended = True
        # A run's lines go on across the IR lines between them; another run's line starts a span.
        if previous is place and place.spans:
            first_byte, _, first_number = place.spans[-1]
            place.spans[-1] = (first_byte, offset, first_number)
        else:
            place.spans.append((start, offset, number))
        previous = place
    if not header_seen:
        raise TraceFormatError(f"{where} is empty; it is not an irtrace trace")
    texts = FileLines(handle, offsets)
    texts.fallback.update(fallback)
    truncated = cut or (parsed.footer_expected and footer_line is None)
    truncated = truncated or any(not place.ended for place in places.values())
    source = _Source(handle, where, texts, parsed.created)
    runs = RunFile(source, list(places.values()))
    return Trace(runs, LazyTexts(texts, where, keep=KEPT_TEXTS), parsed.created, where, truncated)


def _text(body: bytes, where: str) -> str:
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError as error:
        raise TraceFormatError(f"{where!r} is not a trace: not UTF-8 text ({error.reason})") from None


def _record(
    line: str, where: str, number: int, *, last: bool
) -> tuple[str, int | None, Record | None] | None:
    """(kind, run, the whole record for ``run`` and ``ir`` records) of a record line; ``None`` for
    a record of a kind this reader does not know, or for a last line cut short by a kill."""
    try:
        head = _head_decoder.decode(line)
    except (msgspec.MsgspecError, RecursionError):
        head = None
    full: Record | None = None
    if head is None or head.record in ("run", "ir") or (head.run is None and head.record != "footer"):
        try:
            full = decode_record(line, where, number)
        except UnknownRecord:
            return None
        except TraceFormatError:
            if last and _not_json(line):
                return None
            raise
        if head is None:
            head = _Head(type(full).__struct_config__.tag, getattr(full, "run", None))  # type: ignore[arg-type]
        if isinstance(full, KernelRun):
            head = _Head("run", full.run_id)
    if head.record == "header":
        raise TraceFormatError(
            f"{where}:{number}: a second header (two traces joined by hand?); join traces with irtrace merge"
        )
    if head.record not in _IN_RUN | _AFTER_END | {"run", "ir", "footer"}:
        return None  # a record kind this reader does not know: readers stay forward-tolerant
    return head.record, head.run, full


def _not_json(line: str) -> bool:
    import json

    try:
        json.loads(line)
    except (ValueError, RecursionError):
        return True
    return False
