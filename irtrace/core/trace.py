"""The trace model and its file: what one lowering looked like after every pass.

A trace file is JSON Lines (``docs/trace-format.md``): a header, then per kernel and target a
``run`` record, a ``start`` and a ``pass`` record per pass and an ``end`` record, with each
distinct IR text stored once as an ``ir`` record keyed by its SHA-256, and a ``footer`` once the
file is complete. Lines are flushed as they are written, so a run killed midway (even by a
native crash) leaves a file readable up to the last completed pass that names the pass that was
running. Loading never executes code and checks every field it reads (``TraceFormatError``).
This module does not import tilelang.
"""

from __future__ import annotations

import codecs
import contextlib
import gzip
import hashlib
import json
import os
import re
import stat
import zlib
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, cast

import msgspec
from msgspec.structs import replace

from irtrace.core.errors import InputError, NotInTraceError, OutputError, TraceFormatError
from irtrace.core.output import PartialFile, describe_os_error
from irtrace.core.resources import RESOURCE_COUNTS, BenchResult, KernelResources
from irtrace.core.schema import (
    MAX_DEPTH,
    MAX_ID,
    MAX_JSON_NESTING,
    MAX_SECONDS,
    RECORD_KINDS,
    RUN_HEADER_FIELDS,
    STATUS_FAILED,
    STATUS_INCOMPLETE,
    STATUS_OK,
    STOPPED_BY_CRASH,
    STOPPED_BY_TIMEOUT,
    UNFINISHED,
    BenchRecord,
    EndRecord,
    FooterRecord,
    HeaderRecord,
    IrRecord,
    KernelRun,
    MachineRecord,
    PassRecord,
    Phase,
    Record,
    ResourceCounts,
    Scope,
    StartRecord,
    encoder,
    ir_decoder,
    occurrence_labels,
    occurrences,
    pass_label,
    record_decoder,
    show,
    start_of,
    unfinished_pass,
)
from irtrace.core.targets import canonical_target_name

__all__ = [
    "MAX_DEPTH",
    "MAX_ID",
    "MAX_JSON_NESTING",
    "MAX_SECONDS",
    "STATUS_FAILED",
    "STATUS_INCOMPLETE",
    "STATUS_OK",
    "STOPPED_BY_CRASH",
    "STOPPED_BY_TIMEOUT",
    "UNFINISHED",
    "KernelRun",
    "PassRecord",
    "Trace",
    "TraceWriter",
    "load_trace",
    "merge_traces",
    "occurrence_labels",
    "occurrences",
    "pass_label",
    "text_sha256",
    "write_merged",
]

SCHEMA_VERSION = 1
FORMAT_NAME = "irtrace"

RUN_STATUSES = (STATUS_OK, STATUS_FAILED, STATUS_INCOMPLETE)

PHASE_CHECK: Phase = "check"
"""Backend-independent semantic checks before the pipeline."""
PHASE_LOWER: Phase = "lower"
"""The backend's pass pipeline."""
PHASE_FINALIZE: Phase = "finalize"
"""Host/device split and device preparation after the pipeline."""
PHASE_CODEGEN: Phase = "codegen"
"""Kernel source generation; its snapshot is the kernel source."""
PHASE_MACHINE: Phase = "machine"
"""The kernel source compiled by nvcc (``irtrace record --machine-code``): stages ``ptx`` and ``sass``."""
PHASES = (PHASE_CHECK, PHASE_LOWER, PHASE_FINALIZE, PHASE_CODEGEN, PHASE_MACHINE)
SCOPES: tuple[Scope, ...] = ("module", "host", "device")
"""A pass's ``scope``: the whole module until the host/device split, then one side of it."""


def text_sha256(text: str) -> str:
    """The content key of an IR text or kernel source."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


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
                decoded = ir_decoder.decode(line).text
            except (msgspec.MsgspecError, RecursionError):
                raise TraceFormatError(f"{self._where}: the IR record {sha[:12]} is corrupt") from None
            try:
                matches = text_sha256(decoded) == sha
            except UnicodeEncodeError:  # a lone surrogate escape: no UTF-8 text has that hash
                matches = False
            if not matches:
                raise TraceFormatError(
                    f"{self._where}: the IR text stored as {sha[:12]} does not match its SHA-256 "
                    "(the trace was edited or is corrupt)"
                )
            text = self._decoded[sha] = decoded
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

    def verify(self) -> Trace:
        """Decode every stored text now, checking it against its SHA-256 (``TraceFormatError``).

        Loading decodes texts lazily; a reader that cannot report an error midway (the pass
        browser) or reads most texts anyway calls this first. Returns the trace.
        """
        for sha in self.texts:
            self.texts[sha]
        return self

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
        size = getattr(self.texts, "size", None)  # LazyTexts and views of it know without decoding
        if size is not None:
            return int(size(sha))
        return len(self.texts.get(sha, ""))

    def kernel_source(self, run: KernelRun) -> str | None:
        return self.texts.get(run.source_sha256) if run.source_sha256 else None

    def kernel_file(self, run: KernelRun) -> str | None:
        """The kernel's Python file as the trace recorded it (``None`` when it holds none)."""
        return self.text(run.kernel_file_sha256) if run.kernel_file_sha256 else None

    def kernels(self) -> list[str]:
        return list(dict.fromkeys(run.kernel for run in self.runs))

    def targets(self) -> list[str]:
        return list(dict.fromkeys(run.target for run in self.runs))

    def select(self, kernel: str | None = None, target: str | None = None) -> list[KernelRun]:
        """Runs of ``kernel`` (full or short name) on ``target``; ``None`` matches any.

        ``target`` may be an alias, as on ``irtrace record -t`` (``cuda`` is ``cuda:sm_90``).
        ``NAME#N`` picks the Nth run of a kernel on each target, for traces that hold it more than
        once (``irtrace merge`` of two recordings). An empty selection raises ``NotInTraceError``
        listing what the trace holds.
        """
        if target is not None:
            target = canonical_target_name(target)
        wanted, occurrence = self._kernel_query(kernel)
        labels = self.run_labels()
        matches = [
            run
            for run in self.runs
            if (wanted is None or wanted in (run.kernel, run.kernel.split("::")[-1]))
            and (target is None or run.target == target)
            and (occurrence is None or labels[run.run_id].endswith(f"#{occurrence}"))
        ]
        if not matches:
            asked = " on ".join(x for x in (kernel, target) if x) or "a run"
            raise NotInTraceError(f"{asked} is not in the trace; it holds: {self._contents()}")
        return matches

    def _kernel_query(self, kernel: str | None) -> tuple[str | None, int | None]:
        """``(name, N)`` for ``NAME#N`` unless a kernel is called that whole text."""
        if kernel is None or "#" not in kernel:
            return kernel, None
        if any(kernel in (run.kernel, run.kernel.split("::")[-1]) for run in self.runs):
            return kernel, None
        name, _, number = kernel.rpartition("#")
        if not number.isdigit() or int(number) < 1:
            raise NotInTraceError(f"bad run number in {kernel!r}; write KERNEL#N with N >= 1")
        return name, int(number)

    def run_labels(self) -> dict[int, str]:
        """Run id -> ``kernel``, or ``kernel#N`` when the trace holds that kernel and target N times."""
        counts = Counter(run.key for run in self.runs)
        seen: Counter[tuple[str, str]] = Counter()
        labels = {}
        for run in self.runs:
            seen[run.key] += 1
            labels[run.run_id] = run.kernel if counts[run.key] == 1 else f"{run.kernel}#{seen[run.key]}"
        return labels

    def find_run(self, kernel: str | None = None, target: str | None = None) -> KernelRun:
        """The run for ``kernel`` and ``target``; either may be omitted when it is unambiguous.

        With both given and the pair recorded more than once, the last run is taken
        (``KERNEL#N`` picks another).
        """
        matches = self.select(kernel, target)
        if len(matches) == 1 or (kernel and target):
            return matches[-1]
        raise NotInTraceError(
            f"several runs match; name --kernel and --target. The trace holds: {self._contents()}"
        )

    def _contents(self) -> str:
        labels = self.run_labels()
        return "; ".join(f"{labels[run.run_id]} on {run.target}" for run in self.runs) or "no runs"

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


# ----------------------------------------------------------------------------- writing


class TraceWriter:
    """Appends runs to a trace file (or only to memory when ``path`` is ``None``).

    Every line is flushed when written, so what is on disk is always readable up to its last
    line. With ``partial``, lines go to ``NAME.partial`` (locked against a second writer) and
    ``close`` renames it onto ``NAME``: an existing trace is replaced only by a complete one.
    ``close`` ends the file with a ``footer``; ``abandon`` stops without one. A write that fails
    raises ``OutputError``, and so does every later one.
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        created: str | None = None,
        partial: bool = False,
    ) -> None:
        from datetime import datetime, timezone

        self.path = Path(path) if path is not None else None
        self.created = created or datetime.now(timezone.utc).isoformat(timespec="seconds")
        self._texts: dict[str, str] = {}
        self._runs: dict[int, KernelRun] = {}
        self._next_run_id = 0
        self._output: PartialFile | None = None
        self._stream: IO[bytes] | None = None
        self._closed = False
        self._adopted_starts: dict[int, dict[int, str]] = {}
        self._redirected: IO[bytes] | None = None
        self.failure: OutputError | None = None
        """The write error that stopped this writer, if any."""
        if self.path is not None:
            if partial:
                self._output = PartialFile(self.path)
                self._stream = self._compressed(self._output.handle)
            else:
                self._stream = self._open_direct(self.path)
        try:
            self._write_header()
        except OutputError:
            self.abandon(keep=False)  # no caller holds this writer yet: leave no empty NAME.partial
            raise

    def _write_header(self) -> None:
        self._write(
            HeaderRecord(format=FORMAT_NAME, schema=SCHEMA_VERSION, created=self.created, footer=True)
        )

    @property
    def partial_path(self) -> Path | None:
        """``NAME.partial`` while a partial writer is open."""
        return self._output.partial if self._output is not None else None

    @property
    def replaced_stale_partial(self) -> bool:
        """A ``NAME.partial`` left by a killed writer was there and is being replaced."""
        return self._output is not None and self._output.stale

    def _compressed(self, handle: IO[bytes]) -> IO[bytes]:
        if self.path is not None and self.path.suffix == ".gz":
            return cast(IO[bytes], gzip.GzipFile(filename=self.path.name, fileobj=handle, mode="wb"))
        return handle

    def _open_direct(self, path: Path) -> IO[bytes]:
        try:
            if path.parent and not path.parent.exists():
                path.parent.mkdir(parents=True, exist_ok=True)
            return self._compressed(open(path, "wb"))  # closed by close()
        except OSError as error:
            raise OutputError(f"cannot write {str(path)!r}: {describe_os_error(error)}") from None

    def _write(self, record: msgspec.Struct | Mapping[str, Any]) -> None:
        if self.failure is not None:
            raise self.failure
        if self._stream is None:
            return
        try:
            line = encoder.encode(record) + b"\n"
        except (
            TypeError,
            ValueError,
            OverflowError,
            NotImplementedError,
        ) as error:  # NaN, unencodable values
            raise OutputError(f"cannot write a {type(record).__name__} record: {error}") from None
        try:
            self._stream.write(line)
            self._stream.flush()
        except OSError as error:
            where = self.partial_path or self.path
            self.failure = OutputError(f"cannot write {str(where)!r}: {describe_os_error(error)}")
            raise self.failure from None

    def add_text(self, text: str, sha: str | None = None) -> str:
        """Store an IR text once; returns its key."""
        key = sha or text_sha256(text)
        if key not in self._texts:
            self._write(IrRecord(sha256=key, text=text))
            self._texts[key] = text
        return key

    def begin_run(self, run: KernelRun) -> KernelRun:
        """Start a run; the returned copy carries its ``run_id``."""
        run = replace(
            run, run_id=self._next_run_id, passes=(), status=STATUS_INCOMPLETE, running=None, stopped_by=None
        )
        self._next_run_id += 1
        self._runs[run.run_id] = run
        self._write(
            {"record": "run", "run": run.run_id, **{key: getattr(run, key) for key in RUN_HEADER_FIELDS}}
        )
        return run

    def start_pass(self, run_id: int, record: PassRecord) -> None:
        """Note that a pass began (``record`` as far as it is known then): if the process dies in
        it, the trace says which pass it was and holds the IR it received."""
        self._write(start_of(replace(record, run=run_id)))

    def add_pass(self, run_id: int, record: PassRecord) -> None:
        record = replace(record, run=run_id) if record.run != run_id else record
        run = self._runs[run_id]
        self._runs[run_id] = replace(run, passes=(*run.passes, record))
        self._write(record)

    def end_run(
        self,
        run_id: int,
        *,
        status: str,
        error: str | None,
        total_s: float | None,
        input_ir: str | None,
        source_sha256: str | None,
        running: str | None = None,
        stopped_by: str | None = None,
    ) -> KernelRun:
        end = EndRecord(
            run=run_id,
            status=status,  # type: ignore[arg-type]
            error=error,
            total_s=total_s,
            input_ir=input_ir,
            source_sha256=source_sha256,
            running=running,
            stopped_by=stopped_by,  # type: ignore[arg-type]
        )
        return self._end(end)

    def _end(self, end: EndRecord) -> KernelRun:
        self._write(end)
        run = self._runs[end.run] = with_end(self._runs[end.run], end)
        return run

    def add_machine_code(
        self, run_id: int, passes: Sequence[PassRecord], resources: Sequence[KernelResources]
    ) -> KernelRun:
        """Add a run's machine-code stages (phase ``machine``) and resources, after its ``end``.

        A separate record, so the compile can finish after later runs began; a failed stage
        makes an ``ok`` run ``failed`` with its error.
        """
        passes = [replace(record, run=run_id) for record in passes]
        counts = {
            item.function: ResourceCounts(
                arch=item.arch,
                dynamic_smem=item.dynamic_smem,
                **{name: getattr(item, name) for name in RESOURCE_COUNTS},
            )
            for item in resources
        }
        self._write(MachineRecord(run=run_id, passes=passes, resources=counts))
        run = self._runs[run_id] = with_machine_code(self._runs[run_id], passes, resources)
        return run

    def add_bench(self, run_id: int, bench: BenchResult) -> KernelRun:
        """Add a run's measured latency (``irtrace record --bench``), after its ``end``."""
        self._write({"record": "bench", "run": run_id, **bench.to_json()})
        run = self._runs[run_id] = replace(self._runs[run_id], bench=bench)
        return run

    def add_run(self, run: KernelRun, texts: Mapping[str, str]) -> KernelRun:
        """Copy a run (and the texts it needs) from another trace."""
        for sha in _shas_of(run):
            self.add_text(texts[sha], sha)
        started = self.begin_run(run)
        machine = [record for record in run.passes if record.phase == PHASE_MACHINE]
        for record in run.passes:
            if record.phase != PHASE_MACHINE:
                self.add_pass(started.run_id, record)
        status, error = run.status, run.error
        if machine and status == STATUS_FAILED and any(r.failed for r in machine):
            status, error = STATUS_OK, None  # the lowering's own outcome; the stage fails it again
        ended = self.end_run(
            started.run_id,
            status=status,
            error=error,
            total_s=run.total_s,
            input_ir=run.input_ir,
            source_sha256=run.source_sha256,
            running=run.running,
            stopped_by=run.stopped_by,
        )
        if machine or run.resources:
            ended = self.add_machine_code(started.run_id, machine, run.resources)
        if run.bench is not None:
            ended = self.add_bench(started.run_id, run.bench)
        return ended

    @property
    def next_run_id(self) -> int:
        """The number the next run begun will get: the runs so far are numbered below it."""
        return self._next_run_id

    def run(self, run_id: int) -> KernelRun:
        """The run as written so far."""
        return self._runs[run_id]

    def trace(self) -> Trace:
        """What has been written so far, as a ``Trace``."""
        path = str(self.path) if self.path else None
        return Trace(tuple(self._runs.values()), dict(self._texts), self.created, path)

    # --- worker processes (``irtrace.recording.executor``) --------------------------------------

    def redirect(self, path: str | os.PathLike[str]) -> None:
        """In a forked worker: write every further line to ``path`` (plain JSON Lines, no header),
        as a trace of its own: run numbers from 0, every IR text a run needs written there.

        The parent's file stays untouched; the parent copies the worker's lines with ``adopt``.
        """
        if self._redirected is not None:  # the last task's file; the parent's own is never closed here
            with contextlib.suppress(OSError):
                self._redirected.close()
        self._output = None
        self._stream = self._redirected = open(path, "wb")  # noqa: SIM115 - closed by the next redirect
        self._texts, self._runs, self._adopted_starts = {}, {}, {}
        self._next_run_id, self.failure = 0, None

    def adopt(self, lines: list[str], where: str) -> list[KernelRun]:
        """Copy lines a worker wrote after ``redirect`` (a cut last line is dropped), numbering
        its runs after this writer's; returns them.

        Runs the worker did not end stay open here; ``started_passes`` says what they were running.
        """
        numbers: dict[int, int] = {}
        complete = [line for line in lines if line.strip()]
        for number, line in enumerate(complete, start=1):
            try:
                record = decode_record(line, where, number)
            except TraceFormatError:
                if number == len(complete):
                    break  # the worker died writing it
                raise
            if isinstance(record, IrRecord):
                self.add_text(record.text, record.sha256)
                continue
            if isinstance(record, KernelRun):
                numbers[record.run_id] = self.begin_run(record).run_id
                continue
            if isinstance(record, FooterRecord):
                continue
            run_id = numbers.get(record.run)
            if run_id is None:
                raise TraceFormatError(f"{where}:{number}: a record of run {record.run} before the run")
            if isinstance(record, StartRecord):
                self._adopted_starts.setdefault(run_id, {})[record.index] = record.name
                self._write(replace(record, run=run_id))
            elif isinstance(record, PassRecord):
                self.add_pass(run_id, record)
            elif isinstance(record, EndRecord):
                self._end(replace(record, run=run_id))
            elif isinstance(record, MachineRecord):
                self.add_machine_code(run_id, record.passes, _resources_of(record))
            elif isinstance(record, BenchRecord):
                self.add_bench(run_id, _bench_of(record))
        return [self._runs[run_id] for run_id in numbers.values()]

    def restart_in_child(self, path: str | os.PathLike[str]) -> None:
        """In a forked child (``irtrace run`` of a script that forks): leave the parent's file and
        runs to the parent and start a trace of this process's own runs in ``path``.

        The inherited descriptor is pointed at ``/dev/null`` first, so nothing this process
        writes or flushes through it (a gzip trailer at exit) can reach the parent's file; the
        parent merges ``path`` into its own trace, renumbering the runs.
        """
        if self._stream is not None:
            with contextlib.suppress(OSError, ValueError):
                null = os.open(os.devnull, os.O_WRONLY)
                os.dup2(null, self._stream.fileno())
                os.close(null)
        self._stream, self._output = None, None
        self._texts, self._runs, self._adopted_starts = {}, {}, {}
        self._next_run_id, self._closed, self.failure = 0, False, None
        self.path = Path(path)
        self._stream = self._open_direct(self.path)
        self._write_header()

    def started_passes(self, run_id: int) -> dict[int, str]:
        """Index -> name of the passes a child noted as started for ``run_id`` (see ``adopt``)."""
        return self._adopted_starts.get(run_id, {})

    # --- finishing --------------------------------------------------------------------------

    def close(self) -> None:
        """Finish the file: write the footer, and put a partial file in place of the output."""
        if self._closed:
            return
        self._closed = True
        if self.failure is None and self._stream is not None:
            self._write(FooterRecord(runs=len(self._runs)))
        self._close_stream()
        if self._output is not None:
            if self.failure is not None:
                self._output.discard()
                raise self.failure
            self._output.commit()

    def abandon(self, *, keep: bool) -> Path | None:
        """Stop without a footer. A partial file is kept (and returned) with ``keep``, else removed;
        the output is left as it was."""
        if self._closed:
            return None
        self._closed = True
        with contextlib.suppress(OSError):
            self._close_stream()
        if self._output is None:
            return None
        if keep and self.failure is None:
            self._output.keep()
            return self._output.partial
        self._output.discard()
        return None

    def _close_stream(self) -> None:
        stream, self._stream = self._stream, None
        if stream is None:
            return
        try:
            if self._output is None:
                stream.close()
            else:  # a gzip stream ends here; the partial file itself is closed by commit/discard/keep
                if stream is not self._output.handle:
                    stream.close()
                self._output.handle.flush()
        except OSError as error:
            if self.failure is None:
                self.failure = OutputError(f"cannot write {str(self.path)!r}: {describe_os_error(error)}")

    def __enter__(self) -> TraceWriter:
        return self

    def __exit__(self, kind: type[BaseException] | None, *exc: object) -> None:
        if kind is None:
            self.close()
        else:
            self.abandon(keep=True)


def _shas_of(run: KernelRun) -> Iterator[str]:
    for sha in (run.kernel_file_sha256, run.input_ir, run.source_sha256):
        if sha:
            yield sha
    for record in run.passes:
        for sha in (record.ir_before, record.ir_after):
            if sha:
                yield sha


def with_machine_code(
    run: KernelRun, passes: Sequence[PassRecord], resources: Sequence[KernelResources]
) -> KernelRun:
    """``run`` with its machine-code stages and resources; a failed stage fails an ``ok`` run."""
    run = replace(
        run,
        passes=tuple(sorted((*run.passes, *passes), key=lambda p: p.index)),
        resources=tuple(resources) or run.resources,
    )
    failed = next((record for record in passes if record.failed), None)
    if failed is not None and run.status == STATUS_OK:
        run = replace(run, status=STATUS_FAILED, error=failed.error)
    return run


def merge_traces(paths: Iterable[str | os.PathLike[str]], output: str | os.PathLike[str]) -> Trace:
    """Join trace files into one; runs keep their order, IR texts are stored once.

    Every input is read before the output is touched, and the output is replaced only once it is
    complete, so ``merge A B -o A`` cannot lose A.
    """
    return write_merged([load_trace(path) for path in paths], output)


def write_merged(traces: Sequence[Trace], output: str | os.PathLike[str]) -> Trace:
    """Write the runs of loaded ``traces`` into one file, through ``NAME.partial``."""
    writer = TraceWriter(output, partial=True)
    try:
        for trace in traces:
            for run in trace.runs:
                writer.add_run(run, trace.texts)
    except BaseException:
        writer.abandon(keep=False)
        raise
    writer.close()
    return writer.trace()


def merge_warnings(traces: Sequence[Trace]) -> list[str]:
    """What a user merging ``traces`` should know: repeated kernel x target pairs, mixed versions."""
    runs = [run for trace in traces for run in trace.runs]
    warnings = []
    counts = Counter(run.key for run in runs)
    for (kernel, target), count in counts.items():
        if count > 1:
            labels = ", ".join(f"{kernel}#{n}" for n in range(1, count + 1))
            warnings.append(
                f"{kernel} on {target} is in the merged trace {count} times; select them as {labels}"
            )
    versions: dict[str, list[str]] = {}
    for trace in traces:
        for run in trace.runs:
            versions.setdefault(run.tilelang_version, [])
            name = Path(trace.path).name if trace.path else "?"
            if name not in versions[run.tilelang_version]:
                versions[run.tilelang_version].append(name)
    if len(versions) > 1:
        listed = "; ".join(f"{version} ({', '.join(files)})" for version, files in versions.items())
        warnings.append(f"the runs were lowered by different tilelang versions: {listed}")
    return warnings


def with_end(run: KernelRun, end: EndRecord) -> KernelRun:
    """``run`` with the outcome its ``end`` record gives, passes in index order."""
    return replace(
        run,
        passes=tuple(sorted(run.passes, key=lambda p: p.index)),
        status=end.status,
        error=end.error,
        total_s=end.total_s,
        input_ir=end.input_ir,
        source_sha256=end.source_sha256,
        running=end.running,
        stopped_by=end.stopped_by,
    )


def _resources_of(record: MachineRecord) -> list[KernelResources]:
    return [
        KernelResources(
            function=function,
            arch=counts.arch,
            dynamic_smem=counts.dynamic_smem,
            **{name: getattr(counts, name) for name in RESOURCE_COUNTS},
        )
        for function, counts in record.resources.items()
    ]


def _bench_of(record: BenchRecord) -> BenchResult:
    return BenchResult(
        latency_ms=record.latency_ms,
        device=record.device,
        source_sha256=record.source_sha256,
        backend=record.backend,
        warmup=record.warmup,
        repeat=record.repeat,
        error=record.error,
    )


# ----------------------------------------------------------------------------- reading

_IR_PREFIX = '{"record":"ir","sha256":"'
_SHA_END = len(_IR_PREFIX) + 64
_SHA = re.compile(r"[0-9a-f]{64}\Z")
MAX_DECOMPRESSED = 8 << 30
"""Largest text a ``.gz`` trace may decompress to."""
_AT = re.compile(r" - at `\$(?P<path>[^`]*)`$")
_MISSING = re.compile(r"Object missing required field `(?P<key>[^`]+)`")


class _Unknown(Exception):
    """A record of a kind this reader does not know (skipped: readers stay forward-tolerant)."""


def _plain_json(line: str) -> Any:
    """The line as plain JSON, for error messages only (``None`` when it is not JSON)."""
    try:
        return json.loads(line)
    except (ValueError, RecursionError):
        return None


def decode_record(line: str, where: str, number: int) -> Record:
    """One record line, decoded and validated; a ``TraceFormatError`` names the line and field.

    Raises ``_Unknown`` for a record kind of the same schema this reader does not know.
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
    if kind not in RECORD_KINDS:
        return _Unknown(kind)
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
    expected = expected_text(_RECORD_TYPES[kind], path)
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


_RECORD_TYPES: dict[str, type[msgspec.Struct]] = {
    "run": KernelRun,
    "start": StartRecord,
    "pass": PassRecord,
    "end": EndRecord,
    "machine": MachineRecord,
    "bench": BenchRecord,
    "ir": IrRecord,
    "footer": FooterRecord,
}


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
        return "a SHA-256 (64 lowercase hex digits)" if info.pattern else "a string"
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
    try:
        with open(file, "rb") as handle:
            data = handle.read()
    except OSError as error:
        raise TraceFormatError(
            f"{str(file)!r} is not a readable trace file: {describe_os_error(error)}"
        ) from None
    cut = False
    if data[:2] == b"\x1f\x8b":
        data, cut = _gunzip(data, str(file))
    decoder = codecs.getincrementaldecoder("utf-8")()
    try:
        text = decoder.decode(data, final=False)
    except UnicodeDecodeError as error:
        raise TraceFormatError(f"{str(file)!r} is not a trace: not UTF-8 text ({error.reason})") from None
    if decoder.getstate()[0]:
        cut = True  # the file ends inside a character: cut short
    text = text.removeprefix("\ufeff")  # a byte-order mark, added by some Windows editors
    return parse_trace_lines(text.split("\n"), str(file), cut=cut)


def _gunzip(data: bytes, where: str) -> tuple[bytes, bool]:
    """Decompress every gzip member; a stream that stops early (a killed writer) is not an error."""
    parts: list[bytes] = []
    total = 0
    while data:
        stream = zlib.decompressobj(16 + zlib.MAX_WBITS)
        try:
            chunk = stream.decompress(data, MAX_DECOMPRESSED - total + 1)
        except zlib.error as error:
            if parts or total:
                return b"".join(parts), True
            raise TraceFormatError(f"{where!r} is not a readable trace file: {error}") from None
        total += len(chunk)
        if total > MAX_DECOMPRESSED:
            raise TraceFormatError(f"{where!r} decompresses to more than {MAX_DECOMPRESSED >> 30} GiB")
        parts.append(chunk)
        if not stream.eof:
            if stream.unconsumed_tail:
                raise TraceFormatError(f"{where!r} decompresses to more than {MAX_DECOMPRESSED >> 30} GiB")
            return b"".join(parts), True  # no end-of-stream marker: the writer was killed
        data = stream.unused_data
    return b"".join(parts), False


@dataclass
class _Parsed:
    """What ``parse_trace_lines`` has read so far."""

    raw_texts: dict[str, str] = field(default_factory=dict)
    runs: dict[int, KernelRun] = field(default_factory=dict)
    passes: dict[int, dict[int, PassRecord]] = field(default_factory=dict)
    starts: dict[int, dict[int, StartRecord]] = field(default_factory=dict)
    ended: set[int] = field(default_factory=set)
    created: str = ""
    footer_expected: bool = False
    footer_line: int | None = None
    """The line of the footer record, once read."""
    last_line: int = 0
    """The line of the last record read."""


def parse_trace_lines(lines: list[str], where: str = "<trace>", *, cut: bool = False) -> Trace:
    """Build a ``Trace`` from the file's lines (see ``load_trace``); ``cut``: the file itself was
    found cut short (a ``.gz`` stream without its end)."""
    parsed = _Parsed()
    truncated = cut
    last = len(lines) - 1
    while last >= 0 and not lines[last].strip():
        last -= 1
    if last < 0:
        raise TraceFormatError(f"{where} is empty; it is not an irtrace trace")
    first = next(number for number, line in enumerate(lines) if line.strip())
    _read_header(lines[first], where, parsed)
    # Lines are written whole with their newline: only a last line without one can be a cut write.
    cut_candidate = lines[last] if last == len(lines) - 1 and last > first else None
    numbers: list[int] = []
    records: list[str] = []
    for number in range(first + 1, last + 1 if cut_candidate is None else last):
        line = lines[number]
        if (
            line.startswith(_IR_PREFIX)
            and line.endswith('"}')
            and line[_SHA_END : _SHA_END + 2] == '",'
            and _SHA.match(line[len(_IR_PREFIX) : _SHA_END])
        ):
            # IR texts are most of a trace: keep the line, decode the text when it is read.
            parsed.raw_texts[line[len(_IR_PREFIX) : _SHA_END]] = line
            parsed.last_line = number + 1
        elif line.strip():
            numbers.append(number + 1)
            records.append(line)
    for number, record in zip(numbers, _decode_all(records, numbers, where), strict=True):
        if record is not None:
            _read_record(record, where, number, parsed)
    if cut_candidate is not None:
        try:
            record = decode_record(cut_candidate, where, last + 1)
        except _Unknown:
            record = None
        except TraceFormatError:
            if _plain_json(cut_candidate) is not None:
                raise
            truncated = True  # a write cut short by a kill: keep what came before
            record = None
        if record is not None:
            _read_record(record, where, last + 1, parsed)
        elif not truncated and cut_candidate.startswith(_IR_PREFIX):
            parsed.last_line = last + 1
    if parsed.footer_line is not None and parsed.last_line > parsed.footer_line:
        raise TraceFormatError(f"{where}:{parsed.last_line}: a record after the trace's footer")
    return _finish(parsed, where, truncated)


_bulk_decoder = msgspec.json.Decoder(list[Record])


def _decode_all(lines: list[str], numbers: list[int], where: str) -> list[Record | None]:
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
        except _Unknown:
            decoded.append(None)
    return decoded


def _read_header(line: str, where: str, parsed: _Parsed) -> None:
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


def _read_record(record: Record, where: str, number: int, parsed: _Parsed) -> None:
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
    elif isinstance(record, StartRecord):
        if record.run not in parsed.starts or record.run in parsed.ended:
            _orphan(record, where, number, parsed)
        parsed.starts[record.run][record.index] = record
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
            parsed.runs[run_id] = replace(run, bench=_bench_of(record))
            return
        for item in record.passes:
            if item.index in parsed.passes[run_id]:
                raise TraceFormatError(
                    f"{where}:{number}: run {run_id} has two passes with index {item.index}"
                )
            parsed.passes[run_id][item.index] = replace(item, run=run_id)
        parsed.runs[run_id] = with_machine_code(run, record.passes, _resources_of(record))


def _orphan(
    record: StartRecord | PassRecord | EndRecord | MachineRecord | BenchRecord,
    where: str,
    number: int,
    parsed: _Parsed,
) -> None:
    """Raise for a record whose run has no run record before it, or has ended already."""
    kind = type(record).__struct_config__.tag
    if record.run in parsed.runs:
        raise TraceFormatError(f"{where}:{number}: {kind} record of run {record.run} after its end")
    raise TraceFormatError(
        f"{where}:{number}: {kind} record of run {record.run}, which has no run record before it"
    )


def _finish(parsed: _Parsed, where: str, truncated: bool) -> Trace:
    finished = []
    if parsed.footer_expected and parsed.footer_line is None:
        truncated = True  # cut between two records: after a run, or before the first
    for run_id, run in parsed.runs.items():
        passes = parsed.passes[run_id]
        # Passes that started and never finished were running when the recording stopped: they
        # are kept as failed records, so a reader sees where it stopped and the IR they received.
        unfinished = {
            i: unfinished_pass(start) for i, start in parsed.starts[run_id].items() if i not in passes
        }
        passes = {**passes, **unfinished}
        ended = run_id in parsed.ended
        records = _forest(run_id, [passes[index] for index in sorted(passes)], ended, where)
        for sha in _shas_of(replace(run, passes=records)):
            if sha not in parsed.raw_texts:
                raise TraceFormatError(
                    f"{where}: run {run_id} refers to IR {sha[:12]} that the trace does not hold"
                )
        running = run.running
        if unfinished and running is None:
            running = unfinished[max(unfinished)].name
        if run.status == STATUS_INCOMPLETE:
            truncated = True
        finished.append(replace(run, passes=records, running=running))
    return Trace(tuple(finished), LazyTexts(parsed.raw_texts, where), parsed.created, where, truncated)


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
