"""The trace model and its file: what one lowering looked like after every pass.

A trace file is JSON Lines (``docs/trace-format.md``): a header, then per kernel and target a
``run`` record, its ``pass`` records in order and an ``end`` record, with each distinct IR text
stored once as an ``ir`` record keyed by its SHA-256. Lines are appended and flushed as passes
finish, so a run killed midway leaves a file readable up to the last completed pass. Loading
never executes code. This module does not import tilelang.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import IO, Any

from irtrace.errors import InputError, NotInTraceError, TraceFormatError
from irtrace.targets import canonical_target_name

SCHEMA_VERSION = 1
FORMAT_NAME = "irtrace"

STATUS_OK = "ok"
STATUS_FAILED = "failed"
STATUS_INCOMPLETE = "incomplete"
"""A run whose ``end`` record is missing: the recording process died midway."""

PHASE_CHECK = "check"
"""Backend-independent semantic checks before the pipeline."""
PHASE_LOWER = "lower"
"""The backend's pass pipeline."""
PHASE_FINALIZE = "finalize"
"""Host/device split and device preparation after the pipeline."""
PHASE_CODEGEN = "codegen"
"""Kernel source generation; its snapshot is the kernel source."""


def text_sha256(text: str) -> str:
    """The content key of an IR text or kernel source."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class PassRecord:
    """One pass invocation (or the final codegen step) of one run."""

    index: int
    """Position in the run, in the order passes started."""
    name: str
    """Display name; TVM's anonymous ``pass_fn`` passes are named from their Python function."""
    raw_name: str
    """The name TVM reported."""
    phase: str
    """One of ``check``, ``lower``, ``finalize``, ``codegen``."""
    pipeline: str | None
    """The backend pipeline it ran in (``cuda``, ``hip``, ``metal``, ``ascend``), if any."""
    depth: int
    """Nesting depth: 0 for a top-level pass."""
    parent: int | None
    """Index of the enclosing pass, for nested passes."""
    start_s: float
    """Seconds from the run's start to this pass's start."""
    wall_s: float
    """Inclusive wall time, without the recorder's own overhead."""
    self_s: float
    """Wall time minus that of nested passes."""
    changed: bool
    """Whether the printed IR after the pass differs from the IR it received."""
    ir_before: str | None
    """SHA-256 of the IR text the pass received."""
    ir_after: str | None
    """SHA-256 of the IR text after it; ``None`` when it failed. For codegen: the kernel source."""
    scope: str = "module"
    """``module`` before the host/device split, then ``host`` or ``device``."""
    status: str = STATUS_OK
    """``ok`` or ``failed``."""
    error: str | None = None
    """The error message of a failed pass."""

    @property
    def failed(self) -> bool:
        return self.status == STATUS_FAILED


@dataclass(frozen=True)
class KernelRun:
    """One kernel lowered for one target: its header facts and its passes."""

    run_id: int
    """Position of the run in its trace file."""
    kernel: str
    """Kernel name as users refer to it (``matmul``, ``gemm.py::matmul``)."""
    spec: str
    """The kernel spec as given (``examples/gemm.py::matmul(M=1024)``)."""
    args: Mapping[str, Any]
    """``{"args": [...], "kwargs": {...}}`` given to the factory, as JSON values."""
    target: str
    """Short target name (``cuda:sm_90``)."""
    target_detail: str
    """The full TVM target the pipeline ran with."""
    pass_configs: Mapping[str, Any]
    """Pass configs in effect (the jit decorator's and ``--pass-config`` ones)."""
    tilelang_version: str
    host: Mapping[str, str]
    """Machine facts: hostname, platform, python."""
    passes: tuple[PassRecord, ...] = ()
    status: str = STATUS_INCOMPLETE
    """``ok``, ``failed``, or ``incomplete`` when the recording was cut short."""
    error: str | None = None
    """Why the run failed (frontend, pass or codegen error)."""
    total_s: float | None = None
    """Wall time of the whole lowering, recorder overhead included."""
    input_ir: str | None = None
    """SHA-256 of the module handed to the pipeline."""
    source_sha256: str | None = None
    """SHA-256 of the final kernel source; ``None`` if codegen did not finish."""

    @property
    def key(self) -> tuple[str, str]:
        return (self.kernel, self.target)

    def occurrence_names(self) -> list[str]:
        """``name#N`` labels, N counting earlier passes of the same name (1-based)."""
        return occurrence_labels(p.name for p in self.passes)

    def find_pass(self, query: str) -> PassRecord:
        """The pass named ``NAME`` (first occurrence) or ``NAME#N``; suffix matches allowed.

        ``LayoutInference`` finds ``tl.LayoutInference``. Raises ``NotInTraceError`` listing
        the passes when nothing matches.
        """
        name, _, number = query.partition("#")
        try:
            occurrence = int(number) if number else 1
        except ValueError:
            raise NotInTraceError(f"bad pass occurrence in {query!r}; write NAME#N with N >= 1") from None
        exact = [p for p in self.passes if p.name == name or p.raw_name == name]
        matches = exact or [p for p in self.passes if p.name.split(".")[-1] == name.split(".")[-1]]
        if len(matches) >= occurrence >= 1:
            return matches[occurrence - 1]
        names = ", ".join(dict.fromkeys(p.name for p in self.passes))
        raise NotInTraceError(
            f"pass {query!r} is not in {self.kernel} on {self.target}; "
            f"it ran {len(matches)} time(s). Passes in this run: {names}"
        )


def pass_label(name: str, occurrence: int) -> str:
    """``name#N``: the Nth pass called ``name`` in a run, as ``--pass`` and ``find_pass`` accept it."""
    return f"{name}#{occurrence}"


def occurrences(names: Iterable[str]) -> list[int]:
    """For each name, how many times it has occurred so far (1-based)."""
    seen: Counter[str] = Counter()
    numbers = []
    for name in names:
        seen[name] += 1
        numbers.append(seen[name])
    return numbers


def occurrence_labels(names: Iterable[str], *, bare_when_unique: bool = False) -> list[str]:
    """``name#N`` for each name in order; ``bare_when_unique`` leaves names that occur once bare."""
    names = list(names)
    counts = Counter(names)
    return [
        name if bare_when_unique and counts[name] == 1 else pass_label(name, number)
        for name, number in zip(names, occurrences(names), strict=True)
    ]


class LazyTexts(Mapping[str, str]):
    """IR texts of a loaded trace, decoded from their JSON line when first asked for.

    Most readers look at a few snapshots of a large trace; decoding every text up front would
    dominate the time to open it.
    """

    def __init__(self, raw_lines: dict[str, str], where: str) -> None:
        self._raw = raw_lines
        self._decoded: dict[str, str] = {}
        self._where = where

    def __getitem__(self, sha: str) -> str:
        text = self._decoded.get(sha)
        if text is None:
            line = self._raw[sha]
            try:
                text = str(json.loads(line)["text"])
            except (ValueError, KeyError, TypeError):
                raise TraceFormatError(f"{self._where}: the IR record {sha[:12]} is corrupt") from None
            self._decoded[sha] = text
        return text

    def __iter__(self) -> Iterator[str]:
        return iter(self._raw)

    def __len__(self) -> int:
        return len(self._raw)

    def __contains__(self, sha: object) -> bool:
        return sha in self._raw

    def size(self, sha: str) -> int:
        """About the length of the text, without decoding it."""
        return len(self._raw.get(sha, ""))


@dataclass(frozen=True)
class Trace:
    """A loaded trace file: its runs and the IR texts they refer to."""

    runs: tuple[KernelRun, ...]
    texts: Mapping[str, str] = field(repr=False)
    """IR texts and kernel sources by SHA-256."""
    created: str = ""
    path: str | None = None
    truncated: bool = False
    """The file ended in a partial line or without a run's ``end``: a cut-short recording."""

    def text(self, sha: str | None) -> str:
        """The IR text stored under ``sha`` ('' for ``None``)."""
        if sha is None:
            return ""
        try:
            return self.texts[sha]
        except KeyError:
            raise TraceFormatError(f"trace refers to IR {sha[:12]} that it does not hold") from None

    def ir_after(self, record: PassRecord) -> str:
        """IR after the pass, or the IR it received when it failed."""
        return self.text(record.ir_after if record.ir_after is not None else record.ir_before)

    def ir_before(self, record: PassRecord) -> str:
        return self.text(record.ir_before)

    def text_size(self, sha: str | None) -> int:
        """About the length of a stored text, cheaply (for deciding what to compute lazily)."""
        if sha is None:
            return 0
        if isinstance(self.texts, LazyTexts):
            return self.texts.size(sha)
        return len(self.texts.get(sha, ""))

    def kernel_source(self, run: KernelRun) -> str | None:
        return self.texts.get(run.source_sha256) if run.source_sha256 else None

    def kernels(self) -> list[str]:
        return list(dict.fromkeys(run.kernel for run in self.runs))

    def targets(self) -> list[str]:
        return list(dict.fromkeys(run.target for run in self.runs))

    def select(self, kernel: str | None = None, target: str | None = None) -> list[KernelRun]:
        """Runs of ``kernel`` (full or short name) on ``target``; ``None`` matches any.

        ``target`` may be an alias, as on ``irtrace record -t`` (``cuda`` is ``cuda:sm_90``). An
        empty selection raises ``NotInTraceError`` listing what the trace holds.
        """
        if target is not None:
            target = canonical_target_name(target)
        matches = [
            run
            for run in self.runs
            if (kernel is None or kernel in (run.kernel, run.kernel.split("::")[-1]))
            and (target is None or run.target == target)
        ]
        if not matches:
            asked = " on ".join(x for x in (kernel, target) if x) or "a run"
            raise NotInTraceError(f"{asked} is not in the trace; it holds: {self._contents()}")
        return matches

    def find_run(self, kernel: str | None = None, target: str | None = None) -> KernelRun:
        """The run for ``kernel`` and ``target``; either may be omitted when it is unambiguous."""
        matches = self.select(kernel, target)
        if len(matches) == 1 or (kernel and target):
            return matches[-1]
        raise NotInTraceError(
            f"several runs match; name --kernel and --target. The trace holds: {self._contents()}"
        )

    def _contents(self) -> str:
        return "; ".join(f"{run.kernel} on {run.target}" for run in self.runs) or "no runs"

    def line_changes(self, record: PassRecord) -> tuple[int, int]:
        """Lines added and removed by the pass (0, 0 when unchanged)."""
        if not record.changed or record.ir_after is None:
            return (0, 0)
        return count_line_changes(self.text(record.ir_before), self.text(record.ir_after))


def count_line_changes(before: str, after: str) -> tuple[int, int]:
    """Added and removed lines, matching lines as a multiset (cheap; passdiff does real diffs)."""
    old = Counter(before.splitlines())
    new = Counter(after.splitlines())
    return (sum((new - old).values()), sum((old - new).values()))


def host_facts() -> dict[str, str]:
    """Where a trace was recorded."""
    import platform
    import socket

    return {
        "hostname": socket.gethostname(),
        "platform": platform.platform(),
        "python": platform.python_version(),
    }


# ----------------------------------------------------------------------------- writing


def _open_text(path: Path, mode: str) -> IO[str]:
    if path.suffix == ".gz":
        return gzip.open(path, mode + "t", encoding="utf-8")  # type: ignore[return-value]
    return open(path, mode, encoding="utf-8")


class TraceWriter:
    """Appends runs to a trace file (or only to memory when ``path`` is ``None``).

    Every line is flushed when written, so what is on disk is always readable.
    """

    def __init__(self, path: str | os.PathLike[str] | None = None, *, created: str | None = None) -> None:
        from datetime import datetime, timezone

        self.path = Path(path) if path is not None else None
        self.created = created or datetime.now(timezone.utc).isoformat(timespec="seconds")
        self._texts: dict[str, str] = {}
        self._runs: dict[int, KernelRun] = {}
        self._next_run_id = 0
        self._file: IO[str] | None = None
        if self.path is not None:
            if self.path.parent and not self.path.parent.exists():
                self.path.parent.mkdir(parents=True, exist_ok=True)
            self._file = _open_text(self.path, "w")
        self._write(
            {"record": "header", "format": FORMAT_NAME, "schema": SCHEMA_VERSION, "created": self.created}
        )

    def _write(self, record: Mapping[str, Any]) -> None:
        if self._file is not None:
            self._file.write(json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n")
            self._file.flush()

    def add_text(self, text: str, sha: str | None = None) -> str:
        """Store an IR text once; returns its key."""
        key = sha or text_sha256(text)
        if key not in self._texts:
            self._texts[key] = text
            self._write({"record": "ir", "sha256": key, "text": text})
        return key

    def begin_run(self, run: KernelRun) -> KernelRun:
        """Start a run; the returned copy carries its ``run_id``."""
        run = replace(run, run_id=self._next_run_id, passes=(), status=STATUS_INCOMPLETE)
        self._next_run_id += 1
        self._runs[run.run_id] = run
        header = {k: v for k, v in _run_to_json(run).items() if k not in ("passes",)}
        self._write({"record": "run", **header})
        return run

    def add_pass(self, run_id: int, record: PassRecord) -> None:
        run = self._runs[run_id]
        self._runs[run_id] = replace(run, passes=(*run.passes, record))
        self._write({"record": "pass", "run": run_id, **asdict(record)})

    def end_run(
        self,
        run_id: int,
        *,
        status: str,
        error: str | None,
        total_s: float | None,
        input_ir: str | None,
        source_sha256: str | None,
    ) -> KernelRun:
        run = replace(
            self._runs[run_id],
            passes=tuple(sorted(self._runs[run_id].passes, key=lambda p: p.index)),
            status=status,
            error=error,
            total_s=total_s,
            input_ir=input_ir,
            source_sha256=source_sha256,
        )
        self._runs[run_id] = run
        self._write(
            {
                "record": "end",
                "run": run_id,
                "status": status,
                "error": error,
                "total_s": total_s,
                "input_ir": input_ir,
                "source_sha256": source_sha256,
            }
        )
        return run

    def add_run(self, run: KernelRun, texts: Mapping[str, str]) -> KernelRun:
        """Copy a finished run (and the texts it needs) from another trace."""
        for sha in _shas_of(run):
            self.add_text(texts[sha], sha)
        started = self.begin_run(run)
        for record in run.passes:
            self.add_pass(started.run_id, record)
        return self.end_run(
            started.run_id,
            status=run.status,
            error=run.error,
            total_s=run.total_s,
            input_ir=run.input_ir,
            source_sha256=run.source_sha256,
        )

    def trace(self) -> Trace:
        """What has been written so far, as a ``Trace``."""
        path = str(self.path) if self.path else None
        return Trace(tuple(self._runs.values()), dict(self._texts), self.created, path)

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def __enter__(self) -> TraceWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _shas_of(run: KernelRun) -> Iterator[str]:
    for sha in (run.input_ir, run.source_sha256):
        if sha:
            yield sha
    for record in run.passes:
        for sha in (record.ir_before, record.ir_after):
            if sha:
                yield sha


def _run_to_json(run: KernelRun) -> dict[str, Any]:
    data = asdict(run)
    data["run"] = data.pop("run_id")
    return data


def merge_traces(paths: Iterable[str | os.PathLike[str]], output: str | os.PathLike[str]) -> Trace:
    """Join trace files into one; runs keep their order, IR texts are stored once."""
    loaded = [load_trace(path) for path in paths]
    with TraceWriter(output) as writer:
        for trace in loaded:
            for run in trace.runs:
                writer.add_run(run, trace.texts)
        return writer.trace()


# ----------------------------------------------------------------------------- reading

_IR_PREFIX = '{"record":"ir","sha256":"'
_SHA_END = len(_IR_PREFIX) + 64
_PASS_FIELDS = {f for f in PassRecord.__dataclass_fields__}
_RUN_FIELDS = {f for f in KernelRun.__dataclass_fields__} - {"run_id", "passes"}


def load_trace(path: str | os.PathLike[str]) -> Trace:
    """Read a trace file; a file cut short loads up to its last complete line.

    Raises ``InputError`` for a missing file and ``TraceFormatError`` for anything that is not
    an irtrace trace or is of a newer schema.
    """
    file = Path(path)
    if not file.exists():
        raise InputError(f"trace file {str(file)!r} does not exist")
    if file.is_dir():
        raise InputError(f"{str(file)!r} is a directory; give a trace file written by `irtrace record`")
    try:
        with _open_text(file, "r") as handle:
            lines = handle.read().split("\n")
    except (OSError, UnicodeDecodeError, EOFError, gzip.BadGzipFile) as error:
        raise TraceFormatError(f"{str(file)!r} is not a readable trace file: {error}") from None
    return parse_trace_lines(lines, str(file))


def parse_trace_lines(lines: list[str], where: str = "<trace>") -> Trace:
    """Build a ``Trace`` from the file's lines (see ``load_trace``)."""
    raw_texts: dict[str, str] = {}
    runs: dict[int, KernelRun] = {}
    passes: dict[int, list[PassRecord]] = {}
    truncated = False
    created = ""
    last = len(lines) - 1
    while last >= 0 and not lines[last].strip():
        last -= 1
    for number, line in enumerate(lines[: last + 1], start=1):
        if not line.strip():
            continue
        if line.startswith(_IR_PREFIX) and line.endswith('"}') and line[_SHA_END : _SHA_END + 2] == '",':
            # IR texts are most of a trace: keep the line, decode the text when it is read.
            raw_texts[line[len(_IR_PREFIX) : _SHA_END]] = line
            continue
        try:
            record = json.loads(line)
            if not isinstance(record, dict):
                raise ValueError("not a JSON object")
        except ValueError:
            if number == last + 1 and number > 1:
                truncated = True  # a write cut short by a kill: keep what came before
                break
            raise TraceFormatError(
                f"{where}:{number}: not a trace record (corrupt file, or not written by irtrace)"
            ) from None
        kind = record.get("record")
        try:
            if number == 1 or kind == "header":
                if kind != "header" or record.get("format") != FORMAT_NAME:
                    raise TraceFormatError(f"{where} is not an irtrace trace (no irtrace header on line 1)")
                schema = record.get("schema")
                if not isinstance(schema, int) or schema > SCHEMA_VERSION:
                    raise TraceFormatError(
                        f"{where} has trace schema {schema!r}, newer than this irtrace understands "
                        f"({SCHEMA_VERSION}); upgrade tilelang-devtools to read it"
                    )
                created = created or str(record.get("created", ""))
            elif kind == "ir":
                raw_texts[str(record["sha256"])] = line
            elif kind == "run":
                run_id = int(record["run"])
                fields = {k: v for k, v in record.items() if k in _RUN_FIELDS}
                runs[run_id] = KernelRun(run_id=run_id, **fields)
                passes[run_id] = []
            elif kind == "pass":
                run_id = int(record["run"])
                fields = {k: v for k, v in record.items() if k in _PASS_FIELDS}
                passes[run_id].append(PassRecord(**fields))
            elif kind == "end":
                run_id = int(record["run"])
                runs[run_id] = replace(
                    runs[run_id],
                    status=str(record["status"]),
                    error=record.get("error"),
                    total_s=record.get("total_s"),
                    input_ir=record.get("input_ir"),
                    source_sha256=record.get("source_sha256"),
                )
            # Unknown record kinds of the same schema are skipped: readers stay forward-tolerant.
        except TraceFormatError:
            raise
        except (KeyError, TypeError, ValueError) as error:
            raise TraceFormatError(f"{where}:{number}: malformed {kind!r} record ({error})") from None
    if not runs and last < 0:
        raise TraceFormatError(f"{where} is empty; it is not an irtrace trace")
    finished = []
    for run_id, run in runs.items():
        records = tuple(sorted(passes[run_id], key=lambda p: p.index))
        if run.status == STATUS_INCOMPLETE:
            truncated = True
        finished.append(replace(run, passes=records))
    return Trace(tuple(finished), LazyTexts(raw_texts, where), created, where, truncated)
