"""Reading traces: every record line decoded and validated by the typed schema
(``irtrace.trace.schema``) in one call, a ``TraceFormatError`` naming the line and field otherwise.
A file cut short (plain or ``.gz``) loads up to its last complete line. Loading never executes code.
"""

from __future__ import annotations

import binascii
import bisect
import codecs
import contextlib
import itertools
import json
import os
import re
import stat
import tempfile
import threading
import zlib
from collections.abc import Container, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, cast

import msgspec
from msgspec.structs import replace

from irtrace.base.errors import InputError, OutputError, TraceFormatError
from irtrace.base.output import describe_os_error
from irtrace.trace.digest_index import DigestIndex
from irtrace.trace.model import (
    FORMAT_NAME,
    SCHEMA_VERSION,
    LazyTexts,
    Trace,
    bench_of,
    resources_of,
    shas_of,
    with_end,
    with_machine_code,
)
from irtrace.trace.schema import (
    RECORD_TYPES,
    STATUS_INCOMPLETE,
    BenchRecord,
    EndRecord,
    FooterRecord,
    IrRecord,
    KernelRun,
    LaunchesRecord,
    LayoutRecord,
    MachineRecord,
    PassRecord,
    Record,
    SourceMapRecord,
    StartRecord,
    encoder,
    is_sha_type,
    record_decoder,
    show,
    unfinished_pass,
)

_IR_PREFIX = '{"record":"ir","sha256":"'
_SHA_END = len(_IR_PREFIX) + 64
_SHA = re.compile(r"[0-9a-f]{64}\Z")
MAX_DECOMPRESSED = 8 << 30
"""Largest text a ``.gz`` trace may decompress to."""
MAX_RATIO = 128
"""Most bytes of text per compressed byte (irtrace's own traces compress about 16:1; a
decompression bomb about 1000:1)."""
RATIO_FLOOR = 32 << 20
"""Text any ``.gz`` trace may decompress to, whatever its ratio (small files compress less)."""
MIN_BYTES_PER_LINE = 8
"""A trace's lines are records of at least ``{"record":...}``: a file of mostly empty lines
(whose line list would cost far more memory than its text) is no trace."""
_AT = re.compile(r" - at `\$(?P<path>[^`]*)`$")
_MISSING = re.compile(r"Object missing required field `(?P<key>[^`]+)`")


class UnknownRecord(Exception):
    """A record of a kind this reader does not know (skipped: readers stay forward-tolerant)."""


def _plain_json(line: str) -> Any:
    """The line as plain JSON, for error messages only (``None`` when it is not JSON)."""
    try:
        return json.loads(line)
    except (ValueError, RecursionError):
        return None


def decode_record(line: str, where: str, number: int) -> Record:
    """One record line, decoded and validated; a ``TraceFormatError`` names the line and field.

    Raises ``UnknownRecord`` for a record kind of the same schema this reader does not know.
    """
    try:
        return cast(Record, record_decoder.decode(line))
    except msgspec.ValidationError as error:
        raise _field_error(line, str(error), where, number) from None
    except msgspec.DecodeError as error:
        if "\\ud" in line.lower():
            reason = "text that is not Unicode (a lone surrogate escape)"
        else:
            reason = (
                "not valid JSON" if "malformed" in str(error) or "truncated" in str(error) else str(error)
            )
        raise TraceFormatError(f"{where}:{number}: not a trace record ({reason})") from None
    except RecursionError:
        raise TraceFormatError(f"{where}:{number}: not a trace record (nested too deeply)") from None


def _field_error(line: str, message: str, where: str, number: int) -> Exception:
    """The clear error for a record msgspec refused: which field, what it must be, what it was."""
    record = _plain_json(line)
    if not isinstance(record, dict):
        return TraceFormatError(f"{where}:{number}: not a trace record (not a JSON object)")
    kind = record.get("record")
    if not isinstance(kind, str):
        return TraceFormatError(f"{where}:{number}: a record without a 'record' kind")
    if kind not in RECORD_TYPES:
        return UnknownRecord(kind)
    if kind == "header":
        return TraceFormatError(
            f"{where}:{number}: a second header (two traces joined by hand?); join traces with irtrace merge"
        )
    missing = _MISSING.search(message)
    at = _AT.search(message)
    if missing:
        return TraceFormatError(f"{where}:{number}: {kind} record without {missing['key']!r}")
    if at is None or not at["path"]:
        return TraceFormatError(f"{where}:{number}: {kind} record: {_AT.sub('', message)}")
    path = at["path"].lstrip(".")
    key = re.findall(r"[^.\[\]]+(?![^\[]*\])", path)[-1]
    expected = expected_text(RECORD_TYPES[kind], path)
    value = _value_at(record, path)
    return TraceFormatError(f"{where}:{number}: {kind} record: {key!r} must be {expected}, not {show(value)}")


def _value_at(record: dict[str, Any], path: str) -> Any:
    value: Any = record
    for part in re.findall(r"[^.\[\]]+|\[[^\]]*\]", path):
        if part == "[...]" and isinstance(value, dict):
            value = next(iter(value.values()), None)  # msgspec does not say which key
        elif part.startswith("[") and isinstance(value, list):
            index = int(part[1:-1])
            value = value[index] if index < len(value) else None
        elif isinstance(value, dict):
            value = value.get(part)
        else:
            break
    return value


def expected_text(struct: type[msgspec.Struct], path: str) -> str:
    """What the field at ``path`` (``index``, ``passes[0].depth``) must be, in words."""
    info: Any = msgspec.inspect.type_info(struct)
    for part in re.findall(r"[^.\[\]]+|\[[^\]]*\]", path):
        info = _unwrap(info)
        if part.startswith("[") and isinstance(
            info, (msgspec.inspect.ListType, msgspec.inspect.VarTupleType)
        ):
            info = info.item_type
        elif part.startswith("[") and isinstance(info, msgspec.inspect.DictType):
            if not isinstance(_unwrap(info.value_type), msgspec.inspect.StructType):
                return _describe(info)  # a bad value inside an object: say what the object must hold
            info = info.value_type
        elif isinstance(info, msgspec.inspect.StructType):
            found = next((f for f in info.fields if f.encode_name == part), None)
            if found is None:
                break
            info = found.type
        else:
            break
    return _describe(info)


def _unwrap(info: Any) -> Any:
    if isinstance(info, msgspec.inspect.UnionType):
        others = [t for t in info.types if not isinstance(t, msgspec.inspect.NoneType)]
        if len(others) == 1:
            return others[0]
    return info


def _describe(info: Any) -> str:
    inspect = msgspec.inspect
    if isinstance(info, inspect.Metadata):
        info = info.type
    if isinstance(info, inspect.UnionType):
        return " or ".join(_describe(t) for t in info.types)
    if isinstance(info, inspect.NoneType):
        return "null"
    if isinstance(info, inspect.BoolType):
        return "true or false"
    if isinstance(info, inspect.IntType):
        if info.ge is not None and info.le is not None:
            return f"an integer from {info.ge} to {info.le}"
        return "an integer"
    if isinstance(info, inspect.FloatType):
        return f"a number of seconds from 0 to {info.le:g}" if info.le is not None else "a number"
    if isinstance(info, inspect.StrType):
        return "a SHA-256 (64 lowercase hex digits)" if is_sha_type(info) else "a string"
    if isinstance(info, inspect.LiteralType):
        return " or ".join(repr(v) for v in info.values)
    if isinstance(info, inspect.DictType):
        return "an object of strings" if isinstance(info.value_type, inspect.StrType) else "an object"
    if isinstance(info, (inspect.ListType, inspect.VarTupleType)):
        return "a list"
    if isinstance(info, inspect.StructType):
        return "an object"
    return "valid"


def load_trace(path: str | os.PathLike[str]) -> Trace:
    """Read a trace file; a file cut short (plain or ``.gz``) loads up to its last complete line.

    Raises ``InputError`` for a missing file and ``TraceFormatError`` for anything that is not
    an irtrace trace, has a field of the wrong type, or is of a newer schema.
    """
    file = Path(path)
    with read_errors(file):
        handle, packed_cut = open_trace_file(file)
        try:
            lines, offsets, cut = _scan_lines(handle, str(file))
            texts_in = FileLines(handle, offsets)
            return parse_trace_lines(lines, str(file), cut=cut or packed_cut, texts_in=texts_in)
        except BaseException:
            handle.close()
            raise


@contextlib.contextmanager
def read_errors(file: Path) -> Iterator[None]:
    """An ``OSError`` while reading ``file`` as the ``TraceFormatError`` every reader raises."""
    try:
        yield
    except OSError as error:
        raise TraceFormatError(
            f"{str(file)!r} is not a readable trace file: {describe_os_error(error)}"
        ) from None


def open_trace_file(file: Path) -> tuple[IO[bytes], bool]:
    """The trace's plain text, open at its start (a ``.gz`` trace decompressed into a temporary
    file first), and whether a ``.gz`` stream was cut short. ``InputError`` for a path that is
    missing or no file."""
    try:
        mode = file.stat().st_mode
    except FileNotFoundError:
        raise InputError(f"trace file {str(file)!r} does not exist") from None
    except OSError as error:
        raise InputError(f"cannot read {str(file)!r}: {describe_os_error(error)}") from None
    if stat.S_ISDIR(mode):
        raise InputError(f"{str(file)!r} is a directory; give a trace file written by `irtrace record`")
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        raise InputError(f"{str(file)!r} is a device, not a trace file")
    handle: IO[bytes] = open(file, "rb")  # noqa: SIM115 (kept open: texts are read from it when asked for)
    try:
        packed_cut = False
        if handle.read(2) == b"\x1f\x8b":
            handle.seek(0)
            plain, packed_cut = gunzip_to_file(handle, str(file))
            handle.close()
            handle = plain
        handle.seek(0)
        return handle, packed_cut
    except BaseException:
        handle.close()
        raise


_IR_PREFIX_BYTES = _IR_PREFIX.encode()
_SHA_BYTES = re.compile(rb"[0-9a-f]{64}\Z")
_BOM = b"\xef\xbb\xbf"
KEPT_TEXTS = 64
"""Decoded IR texts a trace read from a plain file keeps; the others are read again when asked for."""


def _stand_in(sha: str) -> str:
    """What an IR line read from a file is, until its text is asked for: a line that names it."""
    return f'{_IR_PREFIX}{sha}",""}}'


def _scan_lines(handle: IO[bytes], where: str) -> tuple[list[str], dict[bytes, int], bool]:
    """The file's lines as ``str.split("\n")`` gives them, IR lines replaced by stand-ins.

    Returns the lines, where each IR line lies (offset, length), and whether the file ends inside
    a character. Only the records other than IR texts stay in memory: the texts are most of a
    trace, and a corpus of thousands of runs would not fit otherwise.
    """
    lines: list[str] = []
    offsets: dict[bytes, int] = {}
    cut = False
    offset = 0
    ended = True
    try:
        while batch := handle.readlines(_SCAN_BATCH):
            starts = list(itertools.accumulate(map(len, batch), initial=offset))
            ended = batch[-1].endswith(b"\n")  # only the file's last line can lack its newline
            whole = batch if ended else batch[:-1]
            # most lines are records: decoded (and checked as UTF-8) in one comprehension
            decoded = [raw[:-1].decode("utf-8") for raw in whole]
            special = [i for i, raw in enumerate(whole) if raw.startswith(_IR_PREFIX_BYTES)]
            for i in [0, *special] if offset == 0 and whole else special:
                decoded[i] = _special_line(whole[i][:-1], starts[i], offsets)
            lines += decoded
            if not ended:
                body = batch[-1]
                if starts[-2] == 0 and body.startswith(_BOM):
                    body = body[len(_BOM) :]
                decoder = codecs.getincrementaldecoder("utf-8")()
                lines.append(decoder.decode(body, final=False))
                cut = bool(decoder.getstate()[0])  # the file ends inside a character: cut short
            offset = starts[-1]
            if len(lines) > offset // MIN_BYTES_PER_LINE + 1000:  # each line costs far more than its bytes
                raise TraceFormatError(f"{where!r} is not a trace: mostly empty lines")
    except UnicodeDecodeError as error:
        raise _not_utf8(where, error) from None
    if ended:
        lines.append("")
    return lines, offsets, cut


_SCAN_BATCH = 1 << 18
"""Bytes of whole lines read at a time (a longer line comes whole): a batch of empty lines is
still small."""


def _special_line(body: bytes, start: int, offsets: dict[bytes, int]) -> str:
    """A complete line (without its newline) that is the file's first or an IR text: a first
    line's byte-order mark (added by some Windows editors) dropped, an IR line noted in ``offsets``
    and replaced by its stand-in."""
    if start == 0 and body.startswith(_BOM):
        body, start = body[len(_BOM) :], start + len(_BOM)
    sha_hex = ir_text_sha(body)
    if sha_hex is None:
        return body.decode("utf-8")
    key, place = text_place(sha_hex, start, len(body))
    offsets[key] = place
    return _stand_in(sha_hex.decode())


def _not_utf8(where: str, error: UnicodeDecodeError) -> TraceFormatError:
    return TraceFormatError(f"{where!r} is not a trace: not UTF-8 text ({error.reason})")


_LENGTH_BITS = 40
"""An IR line's place is one int, ``offset << 40 | length`` (one object per text, not three)."""


def ir_text_sha(body: bytes) -> bytes | None:
    """The SHA-256 (64 hex bytes) of a complete line that is an ``ir`` record in the writer's own
    shape (``{"record":"ir","sha256":"...","text":"..."}``), read without decoding its JSON; ``None``
    for any other line, which is then decoded and checked as a record."""
    if (
        body.startswith(_IR_PREFIX_BYTES)
        and body.endswith(b'"}')
        and body[_SHA_END : _SHA_END + 2] == b'",'
        and _SHA_BYTES.match(body[len(_IR_PREFIX_BYTES) : _SHA_END])
    ):
        return body[len(_IR_PREFIX_BYTES) : _SHA_END]
    return None


def text_place(sha_hex: bytes, start: int, length: int) -> tuple[bytes, int]:
    """The index entry of an IR line: its SHA-256 as 32 bytes (not a 64-character string) and
    its place as one int. A corpus's index holds one of these per distinct text."""
    return binascii.unhexlify(sha_hex), start << _LENGTH_BITS | length


def _index_key(sha: object) -> bytes | None:
    if not isinstance(sha, str) or len(sha) != 64 or not _SHA.match(sha):
        return None
    return bytes.fromhex(sha)


class FileLines(Mapping[str, str]):
    """IR lines of a trace file, read from the open file when asked for (by ``LazyTexts``)."""

    def __init__(self, handle: IO[bytes], offsets: dict[bytes, int] | DigestIndex) -> None:
        self._handle = handle
        self._offsets = offsets
        """SHA-256 digest -> ``text_place``."""
        self._lock = threading.Lock()
        self.fallback: dict[str, str] = {}
        """Lines not read from the file (the last line, read whole)."""

    def _place(self, sha: object) -> int | None:
        key = _index_key(sha)
        return None if key is None else self._offsets.get(key)

    def __getitem__(self, sha: str) -> str:
        line = self.fallback.get(sha)
        if line is not None:
            return line
        place = self._place(sha)
        if place is None:
            raise KeyError(sha)
        start, length = place >> _LENGTH_BITS, place & ((1 << _LENGTH_BITS) - 1)
        if hasattr(os, "pread"):  # no shared file position: safe across threads and forked children
            data = os.pread(self._handle.fileno(), length, start)
        else:
            with self._lock:
                self._handle.seek(start)
                data = self._handle.read(length)
        return data.decode("utf-8", errors="surrogateescape")

    def __iter__(self) -> Iterator[str]:
        for key in self._offsets:
            yield key.hex()
        for sha in self.fallback:
            if self._place(sha) is None:
                yield sha

    def __len__(self) -> int:
        return len(self._offsets) + sum(self._place(sha) is None for sha in self.fallback)

    def __contains__(self, sha: object) -> bool:
        return sha in self.fallback or self._place(sha) is not None

    def line_length(self, sha: str) -> int:
        line = self.fallback.get(sha)
        if line is not None:
            return len(line)
        place = self._place(sha)
        return 0 if place is None else place & ((1 << _LENGTH_BITS) - 1)

    def __del__(self) -> None:
        self._handle.close()


_CHUNK = 1 << 16
"""Bytes of a ``.gz`` trace decompressed at a time (deflate expands at most ~1032x: 66 MB)."""


def _too_big(where: str, limit: int, size: int) -> str:
    if limit == MAX_DECOMPRESSED:
        return f"{where!r} decompresses to more than {MAX_DECOMPRESSED >> 30} GiB"
    return (
        f"{where!r} decompresses to more than {limit >> 20} MB, over {MAX_RATIO} times its {size} bytes "
        "(a decompression bomb, not a trace)"
    )


def gunzip_to_file(handle: IO[bytes], where: str) -> tuple[IO[bytes], bool]:
    """Decompress every gzip member into an anonymous temporary file, a chunk at a time; a
    stream that stops early (a killed writer) is not an error. Returns the file and whether the
    stream was cut short."""
    size = os.fstat(handle.fileno()).st_size
    limit = min(MAX_DECOMPRESSED, max(RATIO_FLOOR, MAX_RATIO * size))
    out = tempfile.TemporaryFile()  # noqa: SIM115 (returned open; gone from the disk once closed)
    try:
        total = 0
        stream = zlib.decompressobj(16 + zlib.MAX_WBITS)
        started = False
        while data := handle.read(_CHUNK):
            while data:
                started = True
                try:
                    chunk = stream.decompress(data)
                except zlib.error as error:
                    if total:
                        _write_unpacked(out, b"", where)
                        return out, True
                    raise TraceFormatError(f"{where!r} is not a readable trace file: {error}") from None
                total += len(chunk)
                if total > limit:
                    raise TraceFormatError(_too_big(where, limit, size))
                _write_unpacked(out, chunk, where)
                if stream.eof:
                    data = stream.unused_data
                    stream = zlib.decompressobj(16 + zlib.MAX_WBITS)
                    started = False
                else:
                    data = b""
        _write_unpacked(out, b"", where)
        return out, started  # no end-of-stream marker: the writer was killed
    except BaseException:
        out.close()
        raise


def _write_unpacked(out: IO[bytes], chunk: bytes, where: str) -> None:
    """Write decompressed text to the temporary file (an empty ``chunk``: flush it); a full
    temporary folder is said to be one (the trace is not to blame)."""
    try:
        if chunk:
            out.write(chunk)
        else:
            out.flush()
    except OSError as error:
        raise OutputError(
            f"cannot decompress {where!r}: the temporary folder {tempfile.gettempdir()!r} has no room "
            f"({describe_os_error(error)}); set TMPDIR to a folder with space"
        ) from None


@dataclass
class ParsedRecords:
    """What ``parse_trace_lines`` has read so far."""

    raw_texts: dict[str, str] = field(default_factory=dict)
    runs: dict[int, KernelRun] = field(default_factory=dict)
    passes: dict[int, dict[int, PassRecord]] = field(default_factory=dict)
    starts: dict[int, dict[int, StartRecord]] = field(default_factory=dict)
    layouts: dict[int, list[LayoutRecord]] = field(default_factory=dict)
    source_maps: dict[int, list[SourceMapRecord]] = field(default_factory=dict)
    """Records that grow per run are appended here, never rebuilt per record: a run becomes
    immutable once, in ``finish_run`` (a tuple extended per record is quadratic in their count)."""
    ended: set[int] = field(default_factory=set)
    created: str = ""
    footer_expected: bool = False
    footer_line: int | None = None
    """The line of the footer record, once read."""
    last_line: int = 0
    """The line of the last record read."""


def parse_trace_lines(
    lines: list[str], where: str = "<trace>", *, cut: bool = False, texts_in: FileLines | None = None
) -> Trace:
    """Build a ``Trace`` from the file's lines (see ``load_trace``); ``cut``: the file itself was
    found cut short (a ``.gz`` stream without its end); ``texts_in``: where the IR lines replaced
    by stand-ins lie in the file."""
    parsed = ParsedRecords()
    truncated = cut
    last = len(lines) - 1
    while last >= 0 and not lines[last].strip():
        last -= 1
    if last < 0:
        raise TraceFormatError(f"{where} is empty; it is not an irtrace trace")
    first = next(number for number, line in enumerate(lines) if line.strip())
    read_header(lines[first], where, parsed)
    # Lines are written whole with their newline: only a last line without one can be a cut write.
    cut_candidate = lines[last] if last == len(lines) - 1 and last > first else None
    span = range(first + 1, last + 1 if cut_candidate is None else last)
    # two passes of comprehensions (the IR lines, then the records): a loop with a branch per
    # line was a third of the time a trace took to load
    numbers = [n for n in span if lines[n].strip() and not lines[n].startswith(_IR_PREFIX)]
    for number in [n for n in span if lines[n].startswith(_IR_PREFIX)]:
        line = lines[number]
        if (
            line.endswith('"}')
            and line[_SHA_END : _SHA_END + 2] == '",'
            and _SHA.match(line[len(_IR_PREFIX) : _SHA_END])
        ):
            # IR texts are most of a trace: keep the line, decode the text when it is read.
            parsed.raw_texts[line[len(_IR_PREFIX) : _SHA_END]] = line
            parsed.last_line = number + 1
        else:  # not in the writer's shape: decoded and checked as any record
            bisect.insort(numbers, number)
    records = [lines[n] for n in numbers]
    numbers = [n + 1 for n in numbers]
    for at in range(0, len(records), _BATCH):  # a batch at a time: a corpus's records never all at once
        batch, batch_numbers = records[at : at + _BATCH], numbers[at : at + _BATCH]
        for number, record in zip(batch_numbers, decode_records(batch, batch_numbers, where), strict=True):
            if record is not None:
                read_record(record, where, number, parsed)
    if cut_candidate is not None:
        try:
            record = decode_record(cut_candidate, where, last + 1)
        except UnknownRecord:
            record = None
        except TraceFormatError:
            if _plain_json(cut_candidate) is not None:
                raise
            truncated = True  # a write cut short by a kill: keep what came before
            record = None
        if record is not None:
            read_record(record, where, last + 1, parsed)
        elif not truncated and cut_candidate.startswith(_IR_PREFIX):
            parsed.last_line = last + 1
    if parsed.footer_line is not None and parsed.last_line > parsed.footer_line:
        raise TraceFormatError(f"{where}:{parsed.last_line}: a record after the trace's footer")
    return _finish(parsed, where, truncated, texts_in)


_BATCH = 20_000
"""Record lines decoded in one call."""
_bulk_decoder = msgspec.json.Decoder(list[Record])


def decode_records(lines: list[str], numbers: list[int], where: str) -> list[Record | None]:
    """Every record line decoded in one call; line by line (to name the bad one) if that fails.

    ``None`` stands for a record of a kind this reader does not know.
    """
    try:
        return list(_bulk_decoder.decode("[" + ",".join(lines) + "]"))
    except (msgspec.MsgspecError, RecursionError):
        pass
    decoded: list[Record | None] = []
    for number, line in zip(numbers, lines, strict=True):
        try:
            decoded.append(decode_record(line, where, number))
        except UnknownRecord:
            decoded.append(None)
    return decoded


def read_header(line: str, where: str, parsed: ParsedRecords) -> None:
    try:
        record = json.loads(line, parse_constant=_reject_constant)
    except (ValueError, RecursionError):
        raise TraceFormatError(
            f"{where}:1: not a trace record (not valid JSON); it is not an irtrace trace"
        ) from None
    if (
        not isinstance(record, dict)
        or record.get("record") != "header"
        or record.get("format") != FORMAT_NAME
    ):
        raise TraceFormatError(f"{where} is not an irtrace trace (no irtrace header on its first line)")
    schema = record.get("schema")
    if isinstance(schema, bool) or not isinstance(schema, int) or schema < 1:
        raise TraceFormatError(
            f"{where} has an invalid trace schema {show(schema)}; it must be a positive integer"
        )
    if schema > SCHEMA_VERSION:
        raise TraceFormatError(
            f"{where} has trace schema {schema}, newer than this irtrace understands "
            f"({SCHEMA_VERSION}); upgrade tilelang-devtools to read it"
        )
    created = record.get("created", "")
    parsed.created = created if isinstance(created, str) else ""
    parsed.footer_expected = record.get("footer") is True


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def read_record(record: Record, where: str, number: int, parsed: ParsedRecords) -> None:
    parsed.last_line = number
    if parsed.footer_line is not None:
        raise TraceFormatError(f"{where}:{number}: a record after the trace's footer")
    if isinstance(record, PassRecord):  # most records: checked first
        run_id = record.run
        passes = parsed.passes.get(run_id)
        if passes is None or run_id in parsed.ended:
            _orphan(record, where, number, parsed)
        if record.index in passes:  # type: ignore[operator]
            raise TraceFormatError(f"{where}:{number}: run {run_id} has two passes with index {record.index}")
        passes[record.index] = record  # type: ignore[index]
        parsed.starts[run_id].pop(record.index, None)  # kept only for passes that never finished
    elif isinstance(record, StartRecord):
        if record.run not in parsed.starts or record.run in parsed.ended:
            _orphan(record, where, number, parsed)
        parsed.starts[record.run][record.index] = record
    elif isinstance(record, LayoutRecord):
        if record.run not in parsed.runs or record.run in parsed.ended:
            _orphan(record, where, number, parsed)
        parsed.layouts[record.run].append(record)
    elif isinstance(record, SourceMapRecord):
        if record.run not in parsed.runs or record.run in parsed.ended:
            _orphan(record, where, number, parsed)
        parsed.source_maps[record.run].append(record)
    elif isinstance(record, IrRecord):
        parsed.raw_texts[record.sha256] = encoder.encode(record).decode("utf-8")
    elif isinstance(record, FooterRecord):
        parsed.footer_line = number
    elif isinstance(record, KernelRun):
        if record.run_id in parsed.runs:
            raise TraceFormatError(f"{where}:{number}: run {record.run_id} is started twice")
        parsed.runs[record.run_id] = replace(record, passes=(), status=STATUS_INCOMPLETE)
        parsed.passes[record.run_id] = {}
        parsed.starts[record.run_id] = {}
        parsed.layouts[record.run_id] = []
        parsed.source_maps[record.run_id] = []
    elif isinstance(record, EndRecord):
        if record.run not in parsed.runs or record.run in parsed.ended:
            _orphan(record, where, number, parsed)
        parsed.runs[record.run] = with_end(parsed.runs[record.run], record)
        parsed.ended.add(record.run)
    else:  # machine and bench records come after the run's end (the compile overlaps the next run)
        run_id = record.run
        if run_id not in parsed.runs:
            _orphan(record, where, number, parsed)
        run = parsed.runs[run_id]
        if isinstance(record, BenchRecord):
            parsed.runs[run_id] = replace(run, bench=bench_of(record))
            return
        if isinstance(record, LaunchesRecord):
            parsed.runs[run_id] = replace(run, launches=tuple(record.signatures))
            return
        for item in record.passes:
            if item.index in parsed.passes[run_id]:
                raise TraceFormatError(
                    f"{where}:{number}: run {run_id} has two passes with index {item.index}"
                )
            parsed.passes[run_id][item.index] = replace(item, run=run_id)
        # the stages themselves are in ``parsed.passes``: the run's own passes stay empty until
        # ``finish_run``, so a run's machine records cost what they hold, not what came before
        run = replace(with_machine_code(run, record.passes, resources_of(record)), passes=())
        parsed.runs[run_id] = replace(run, machine_lines=tuple(record.line_maps)) if record.line_maps else run


def _orphan(
    record: StartRecord
    | PassRecord
    | EndRecord
    | LayoutRecord
    | SourceMapRecord
    | MachineRecord
    | BenchRecord
    | LaunchesRecord,
    where: str,
    number: int,
    parsed: ParsedRecords,
) -> None:
    """Raise for a record whose run has no run record before it, or has ended already."""
    kind = type(record).__struct_config__.tag
    if record.run in parsed.runs:
        raise TraceFormatError(f"{where}:{number}: {kind} record of run {record.run} after its end")
    raise TraceFormatError(
        f"{where}:{number}: {kind} record of run {record.run}, which has no run record before it"
    )


def _finish(parsed: ParsedRecords, where: str, truncated: bool, texts_in: FileLines | None = None) -> Trace:
    finished = []
    if parsed.footer_expected and parsed.footer_line is None:
        truncated = True  # cut between two records: after a run, or before the first
    for run_id in parsed.runs:
        run = finish_run(parsed, run_id, where, parsed.raw_texts)
        truncated = truncated or run.status == STATUS_INCOMPLETE
        finished.append(run)
    if texts_in is None:
        texts = LazyTexts(parsed.raw_texts, where)
    else:
        texts_in.fallback.update(
            (sha, line) for sha, line in parsed.raw_texts.items() if line != _stand_in(sha)
        )
        texts = LazyTexts(texts_in, where, keep=KEPT_TEXTS)
    return Trace(tuple(finished), texts, parsed.created, where, truncated)


def finish_run(parsed: ParsedRecords, run_id: int, where: str, holds: Container[str]) -> KernelRun:
    """Run ``run_id`` of ``parsed`` with its passes as a tree; every text it names must be in
    ``holds`` (``TraceFormatError`` otherwise)."""
    run = parsed.runs[run_id]
    passes = parsed.passes[run_id]
    # Passes that started and never finished were running when the recording stopped: they
    # are kept as failed records, so a reader sees where it stopped and the IR they received.
    unfinished = {i: unfinished_pass(start) for i, start in parsed.starts[run_id].items() if i not in passes}
    passes = {**passes, **unfinished}
    ended = run_id in parsed.ended
    records = _forest(run_id, [passes[index] for index in sorted(passes)], ended, where)
    for sha in shas_of(replace(run, passes=records)):
        if sha not in holds:
            if not _SHA.match(sha):
                raise TraceFormatError(
                    f"{where}: run {run_id} names IR {show(sha)}, not a SHA-256 (64 lowercase hex digits)"
                )
            raise TraceFormatError(
                f"{where}: run {run_id} refers to IR {sha[:12]} that the trace does not hold"
            )
    running = run.running
    if unfinished and running is None:
        running = unfinished[max(unfinished)].name
    return replace(
        run,
        passes=records,
        running=running,
        layouts=(*run.layouts, *parsed.layouts.get(run_id, ())),
        source_maps=(*run.source_maps, *parsed.source_maps.get(run_id, ())),
    )


def _forest(run_id: int, records: list[PassRecord], ended: bool, where: str) -> tuple[PassRecord, ...]:
    """The run's passes (in index order) with every parent among them and depths that agree.

    In a run that was cut short, a nested pass can outlive the record of its parent (the parent
    never finished and no ``start`` record names it): it becomes a top-level pass. In a run that
    ended, a missing parent or a depth that does not follow its parent's is a format error.
    """
    depth_of: dict[int, int] = {}
    out = []
    for record in records:
        parent = record.parent if record.parent in depth_of else None
        depth = 0 if parent is None else depth_of[parent] + 1
        if ended and (parent != record.parent or depth != record.depth):
            raise TraceFormatError(
                f"{where}: run {run_id}, pass {record.index}: parent {record.parent} and depth "
                f"{record.depth} do not match the run's passes"
            )
        depth_of[record.index] = depth
        out.append(
            record
            if (parent, depth) == (record.parent, record.depth)
            else replace(record, parent=parent, depth=depth)
        )
    return tuple(out)
