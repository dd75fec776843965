"""Writing traces: ``TraceWriter`` appends runs line by line (each flushed, so a killed recording
leaves a readable file), and ``merge_traces`` joins files. The line format is
``irtrace.trace.schema``'s; ``docs/trace-format.md`` is generated from it.
"""

from __future__ import annotations

import contextlib
import gzip
import os
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, Any, cast

import msgspec
from msgspec.structs import replace

from irtrace.base.errors import OutputError, TraceFormatError
from irtrace.base.output import PartialFile, describe_os_error
from irtrace.trace.digest_index import DigestIndex
from irtrace.trace.model import (
    FORMAT_NAME,
    PHASE_MACHINE,
    SCHEMA_VERSION,
    Trace,
    bench_of,
    resources_of,
    shas_of,
    text_sha256,
    with_end,
    with_machine_code,
)
from irtrace.trace.reader import UnknownRecord, decode_record, load_trace
from irtrace.trace.resources import RESOURCE_COUNTS, BenchResult, KernelResources
from irtrace.trace.schema import (
    RUN_HEADER_FIELDS,
    STATUS_FAILED,
    STATUS_INCOMPLETE,
    STATUS_OK,
    BenchRecord,
    EndRecord,
    FooterRecord,
    HeaderRecord,
    IrRecord,
    KernelRun,
    LaunchesRecord,
    LaunchSignature,
    LayoutRecord,
    MachineLines,
    MachineRecord,
    PassRecord,
    ResourceCounts,
    SourceMapRecord,
    StartRecord,
    encoder,
    start_of,
)

_IR_PREFIX = '{"record":"ir","sha256":"'
"""How every IR text line begins as ``encoder`` writes it (``IrRecord``'s tag, then its key)."""


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
        keep_texts: bool = True,
        keep_runs: bool = True,
    ) -> None:
        from datetime import datetime, timezone

        self.path = Path(path) if path is not None else None
        self.created = created or datetime.now(timezone.utc).isoformat(timespec="seconds")
        self._texts: dict[str, str] = {}
        self._keep_texts = keep_texts
        """Keep each text written for ``trace()``; without, only its digest (a merge of a corpus)."""
        self._written = DigestIndex()
        """Digests of the texts written, without kept texts: in a file once a corpus outgrows memory."""
        self._runs: dict[int, KernelRun] = {}
        """Each run's header and outcome; its passes, layouts and maps grow in ``_growing``."""
        self._growing: dict[int, _GrowingRun] = {}
        self._keep_runs = keep_runs
        """Keep each run ``add_run`` copied for ``trace()``; without, a merge holds one run at a time."""
        self._next_run_id = 0
        self._output: PartialFile | None = None
        self._stream: IO[bytes] | None = None
        self._closed = False
        self._adopted_starts: dict[int, dict[int, str]] = {}
        self._redirected: IO[bytes] | None = None
        self._batch: list[bytes] | None = None
        """Lines held back inside ``batched``: written and flushed at once."""
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
        if self._batch is not None:
            self._batch.append(line)
            return
        self._write_lines([line])

    def _write_lines(self, lines: list[bytes]) -> None:
        if self._stream is None:
            return
        try:
            self._stream.write(b"".join(lines))
            self._stream.flush()
        except OSError as error:
            where = self.partial_path or self.path
            self.failure = OutputError(f"cannot write {str(where)!r}: {describe_os_error(error)}")
            raise self.failure from None

    def _write_encoded(self, line: bytes) -> None:
        """Write a line already encoded by ``encoder`` (``adopt``), as ``_write`` would."""
        if self.failure is not None:
            raise self.failure
        if self._batch is not None:
            self._batch.append(line)
        else:
            self._write_lines([line])

    def add_text(self, text: str, sha: str | None = None) -> str:
        """Store an IR text once; returns its key."""
        key = sha or text_sha256(text)
        if not self._keep_texts:  # a merge of a corpus: which texts are written, as 32-byte digests
            digest = bytes.fromhex(key)
            if digest not in self._written:
                self._write(IrRecord(sha256=key, text=text))
                self._written.add(digest)
        elif key not in self._texts:
            self._write(IrRecord(sha256=key, text=text))
            self._texts[key] = text
        return key

    def begin_run(self, run: KernelRun) -> KernelRun:
        """Start a run; the returned copy carries its ``run_id``."""
        run = replace(
            run,
            run_id=self._next_run_id,
            passes=(),
            layouts=(),
            source_maps=(),
            status=STATUS_INCOMPLETE,
            running=None,
            stopped_by=None,
        )
        self._next_run_id += 1
        self._runs[run.run_id] = run
        self._growing[run.run_id] = _GrowingRun()
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
        self._growing[run_id].add_pass(record)
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
        warnings: Sequence[str] = (),
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
            warnings=tuple(warnings),
        )
        self._end(end)
        return self.run(run_id)

    def _end(self, end: EndRecord) -> None:
        self._write(end)
        self._runs[end.run] = with_end(self._runs[end.run], end)

    def add_machine_code(
        self,
        run_id: int,
        passes: Sequence[PassRecord],
        resources: Sequence[KernelResources],
        line_maps: Sequence[MachineLines] = (),
    ) -> KernelRun:
        """Add a run's machine-code stages (phase ``machine``) and resources, after its ``end``.

        A separate record, so the compile can finish after later runs began; a failed stage
        makes an ``ok`` run ``failed`` with its error.
        """
        self._machine_code(run_id, passes, resources, line_maps)
        return self.run(run_id)

    def _machine_code(
        self,
        run_id: int,
        passes: Sequence[PassRecord],
        resources: Sequence[KernelResources],
        line_maps: Sequence[MachineLines],
    ) -> None:
        passes = [replace(record, run=run_id) for record in passes]
        counts = {
            item.function: ResourceCounts(
                arch=item.arch,
                dynamic_smem=item.dynamic_smem,
                **{name: getattr(item, name) for name in RESOURCE_COUNTS},
            )
            for item in resources
        }
        self._write(MachineRecord(run=run_id, passes=passes, resources=counts, line_maps=list(line_maps)))
        run = replace(with_machine_code(self._runs[run_id], passes, resources), passes=())
        self._runs[run_id] = replace(run, machine_lines=tuple(line_maps)) if line_maps else run
        for record in passes:
            self._growing[run_id].add_pass(record)

    def add_layouts(self, run_id: int, record: LayoutRecord) -> None:
        """Add the buffers' layouts after one of the run's passes (before the run's ``end``)."""
        record = replace(record, run=run_id)
        self._write(record)
        self._growing[run_id].layouts.append(record)

    def add_source_map(self, run_id: int, record: SourceMapRecord) -> None:
        """Add which IR lines of a recorded module come from which Python line (before ``end``)."""
        record = replace(record, run=run_id)
        self._write(record)
        self._growing[run_id].source_maps.append(record)

    def add_bench(self, run_id: int, bench: BenchResult) -> KernelRun:
        """Add a run's measured latency (``irtrace record --bench``), after its ``end``."""
        self._bench(run_id, bench)
        return self.run(run_id)

    def _bench(self, run_id: int, bench: BenchResult) -> None:
        self._write({"record": "bench", "run": run_id, **bench.to_json()})
        self._runs[run_id] = replace(self._runs[run_id], bench=bench)

    def add_launches(self, run_id: int, signatures: Sequence[LaunchSignature], dropped: int = 0) -> KernelRun:
        """Add what the program passed at a captured kernel's launches, after the run's ``end``;
        ``KeyError`` for a run this writer does not hold."""
        if run_id not in self._runs:
            raise KeyError(run_id)
        self._launches(run_id, signatures, dropped)
        return self.run(run_id)

    def _launches(self, run_id: int, signatures: Sequence[LaunchSignature], dropped: int) -> None:
        self._write(LaunchesRecord(run=run_id, signatures=list(signatures), dropped=dropped))
        self._runs[run_id] = replace(self._runs[run_id], launches=tuple(signatures))

    def add_run(self, run: KernelRun, texts: Mapping[str, str]) -> KernelRun:
        """Copy a run (and the texts it needs) from another trace."""
        for sha in shas_of(run):
            self.add_text(texts[sha], sha)
        started = self.begin_run(run)
        machine = [record for record in run.passes if record.phase == PHASE_MACHINE]
        layouts_after: dict[int, list[LayoutRecord]] = {}
        for layout in run.layouts:
            layouts_after.setdefault(layout.after, []).append(layout)
        for record in run.passes:
            if record.phase != PHASE_MACHINE:
                self.add_pass(started.run_id, record)
                for layout in layouts_after.pop(record.index, []):
                    self.add_layouts(started.run_id, layout)
        for left in layouts_after.values():  # after a pass the run does not hold: kept, at the end
            for layout in left:
                self.add_layouts(started.run_id, layout)
        for source_map in run.source_maps:
            self.add_source_map(started.run_id, source_map)
        status, error = run.status, run.error
        if machine and status == STATUS_FAILED and any(r.failed for r in machine):
            status, error = STATUS_OK, None  # the lowering's own outcome; the stage fails it again
        self._end(
            EndRecord(
                run=started.run_id,
                status=status,  # type: ignore[arg-type]
                error=error,
                total_s=run.total_s,
                input_ir=run.input_ir,
                source_sha256=run.source_sha256,
                running=run.running,
                stopped_by=run.stopped_by,
                warnings=tuple(run.warnings),
            )
        )
        if machine or run.resources:
            self._machine_code(started.run_id, machine, run.resources, run.machine_lines)
        if run.bench is not None:
            self._bench(started.run_id, run.bench)
        if run.launches:
            self._launches(started.run_id, run.launches, 0)
        ended = self.run(started.run_id)
        if not self._keep_runs:
            del self._runs[started.run_id], self._growing[started.run_id]
        return ended

    @property
    def next_run_id(self) -> int:
        """The number the next run begun will get: the runs so far are numbered below it."""
        return self._next_run_id

    def run(self, run_id: int) -> KernelRun:
        """The run as written so far."""
        return self._growing[run_id].build(self._runs[run_id])

    def trace(self) -> Trace:
        """What has been written so far, as a ``Trace``."""
        path = str(self.path) if self.path else None
        return Trace(tuple(self.run(run_id) for run_id in self._runs), dict(self._texts), self.created, path)

    # --- worker processes (``irtrace.lowering.executor``) --------------------------------------

    def redirect(self, path: str | os.PathLike[str]) -> None:
        """In a forked worker: write every further line to ``path`` (plain JSON Lines, no header),
        as a trace of its own: run numbers from 0, every IR text a run needs written there.

        The parent's file stays untouched; the parent copies the worker's lines with ``adopt``.
        """
        if self._redirected is not None:  # the last task's file; the parent's own is never closed here
            with contextlib.suppress(OSError):
                self._redirected.close()
        elif self._stream is not None:
            # The parent's stream, inherited: dropped here, a gzip stream would write its trailer
            # through the shared descriptor into the parent's file (a .jsonl.gz cut after its
            # header). Point the descriptor at /dev/null first, as ``restart_in_child`` does.
            with contextlib.suppress(OSError, ValueError):
                null = os.open(os.devnull, os.O_WRONLY)
                os.dup2(null, self._stream.fileno())
                os.close(null)
        self._output = None
        self._stream = self._redirected = open(path, "wb")  # noqa: SIM115 - closed by the next redirect
        self._texts, self._runs, self._adopted_starts, self._written = {}, {}, {}, DigestIndex()
        self._growing = {}
        self._next_run_id, self.failure = 0, None

    def adopt(self, lines: list[str], where: str) -> list[KernelRun]:
        """Copy lines a worker wrote after ``redirect`` (a cut last line is dropped), numbering
        its runs after this writer's; returns them.

        Runs the worker did not end stay open here; ``started_passes`` says what they were running.
        """
        with self.batched():
            return self._adopt(lines, where)

    @contextlib.contextmanager
    def batched(self) -> Iterator[None]:
        """Hold the lines written inside, and write them in one call at the end: one system call
        (and, on a writer thread, one wait to win the GIL back) instead of one a record."""
        if self._batch is not None:  # already inside one
            yield
            return
        self._batch = []
        try:
            yield
        finally:
            batch, self._batch = self._batch, None
            if batch:
                self._write_lines(batch)

    def _adopt(self, lines: list[str], where: str) -> list[KernelRun]:
        numbers: dict[int, int] = {}
        complete = [line for line in lines if line.strip()]
        for number, line in enumerate(complete, start=1):
            if line.startswith(_IR_PREFIX) and number < len(complete):
                # Most of a task's bytes are IR texts, and most of those the trace has already
                # (each task writes every text its runs need): known ones are not decoded, new
                # ones are copied as the worker encoded them, with this same encoder.
                sha = line[len(_IR_PREFIX) : len(_IR_PREFIX) + 64]
                if sha in self._texts:
                    continue
                record = decode_record(line, where, number)
                if isinstance(record, IrRecord) and record.sha256 == sha:
                    self._texts[sha] = record.text
                    self._write_encoded(line.encode("utf-8") + b"\n")
                    continue
            try:
                record = decode_record(line, where, number)
            except UnknownRecord:
                continue
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
            elif isinstance(record, LayoutRecord):
                self.add_layouts(run_id, record)
            elif isinstance(record, SourceMapRecord):
                self.add_source_map(run_id, record)
            elif isinstance(record, EndRecord):
                self._end(replace(record, run=run_id))
            elif isinstance(record, MachineRecord):
                self._machine_code(run_id, record.passes, resources_of(record), record.line_maps)
            elif isinstance(record, BenchRecord):
                self._bench(run_id, bench_of(record))
        return [self.run(run_id) for run_id in numbers.values()]

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
        self._texts, self._runs, self._adopted_starts, self._written = {}, {}, {}, DigestIndex()
        self._growing = {}
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
            self._write(FooterRecord(runs=len(self._runs) if self._keep_runs else self._next_run_id))
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


class _GrowingRun:
    """What a run gains a record at a time, in lists appended once (a tuple rebuilt per record is
    quadratic in their count); ``build`` makes the run's tuples, cached until the next record."""

    def __init__(self) -> None:
        self.passes: list[PassRecord] = []
        self.layouts: list[LayoutRecord] = []
        self.source_maps: list[SourceMapRecord] = []
        self._sorted = True

    def add_pass(self, record: PassRecord) -> None:
        if self.passes and record.index < self.passes[-1].index:
            self._sorted = False
        self.passes.append(record)

    def build(self, run: KernelRun) -> KernelRun:
        """``run`` (its header and outcome) with the records so far, passes in index order."""
        if not self._sorted:
            self.passes.sort(key=lambda p: p.index)
            self._sorted = True
        return replace(
            run, passes=tuple(self.passes), layouts=tuple(self.layouts), source_maps=tuple(self.source_maps)
        )


def merge_traces(paths: Iterable[str | os.PathLike[str]], output: str | os.PathLike[str]) -> Trace:
    """Join trace files into one; runs keep their order, IR texts are stored once.

    Every input is read before the output is touched, and the output is replaced only once it is
    complete, so ``merge A B -o A`` cannot lose A.
    """
    return write_merged([load_trace(path) for path in paths], output)


def write_merged(
    traces: Sequence[Trace], output: str | os.PathLike[str], *, keep_texts: bool = True
) -> Trace:
    """Write the runs of loaded ``traces`` into one file, through ``NAME.partial``."""
    writer = TraceWriter(output, partial=True, keep_texts=keep_texts)
    _copy_runs(traces, writer)
    return writer.trace()


def stream_merged(traces: Sequence[Trace], output: str | os.PathLike[str]) -> int:
    """``write_merged`` holding one run at a time: each run is read (from a streamed trace,
    ``trace_stream.open_trace``), written and dropped, and each text is read from its file when
    written. Returns the number of runs written."""
    writer = TraceWriter(output, partial=True, keep_texts=False, keep_runs=False)
    _copy_runs(traces, writer)
    return writer.next_run_id


def _copy_runs(traces: Sequence[Trace], writer: TraceWriter) -> None:
    try:
        for trace in traces:
            for run in trace.runs:
                writer.add_run(run, trace.texts)
    except BaseException:
        writer.abandon(keep=False)
        raise
    writer.close()


def merge_warnings(traces: Sequence[Trace]) -> list[str]:
    """What a user merging ``traces`` should know: repeated kernel x target pairs, mixed versions."""
    warnings = []
    counts = Counter(run.key for trace in traces for run in trace.headers())
    for (kernel, target), count in counts.items():
        if count > 1:
            labels = ", ".join(f"{kernel}#{n}" for n in range(1, count + 1))
            warnings.append(
                f"{kernel} on {target} is in the merged trace {count} times; select them as {labels}"
            )
    versions: dict[str, list[str]] = {}
    for trace in traces:
        for run in trace.headers():
            versions.setdefault(run.tilelang_version, [])
            name = Path(trace.path).name if trace.path else "?"
            if name not in versions[run.tilelang_version]:
                versions[run.tilelang_version].append(name)
    if len(versions) > 1:
        listed = "; ".join(f"{version} ({', '.join(files)})" for version, files in versions.items())
        warnings.append(f"the runs were lowered by different tilelang versions: {listed}")
    return warnings
