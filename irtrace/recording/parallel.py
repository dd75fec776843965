"""Recording at scale: ``--shard I/N`` records one slice of the work, ``--jobs N`` lowers kernels in
N worker processes, ``--repeat N`` keeps the fastest of N lowerings.

The work is planned first, in order: every kernel of every request for every target (a request
whose file cannot be loaded is one item that reports its error). A shard is a contiguous slice of
that list, so ``irtrace merge`` of shards 1..N, in that order, holds the same runs in the same
order as one unsharded recording. Workers are forked once the kernels' modules are loaded and
take one item at a time; each writes the item's run to a scratch trace of its own, flushed line
by line, and the parent copies the runs into the output in plan order. A worker that dies (a
crash in a pass) or outlives ``--timeout`` ends that run only, which names the pass that was
running, and a fresh worker takes its place.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import re
import select
import shutil
import signal
import sys
import tempfile
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from msgspec.structs import replace

from irtrace.core import interrupts
from irtrace.core.errors import IrtraceError, OutputError, UsageError
from irtrace.core.trace import (
    STATUS_FAILED,
    STATUS_INCOMPLETE,
    STOPPED_BY_CRASH,
    STOPPED_BY_TIMEOUT,
    KernelRun,
    PassRecord,
)
from irtrace.core.trace_reader import load_trace
from irtrace.core.trace_writer import TraceWriter
from irtrace.recording.api import (
    AfterRun,
    LoweringUnit,
    PreparedLowering,
    RecordRequest,
    bind_unit,
    build_unit,
    lowering_units,
    record_prepared,
    record_requests,
)
from irtrace.recording.isolation import ChildError, _describe_status, record_in_child
from irtrace.recording.loader import KernelCall
from irtrace.recording.recorder import RecordedLowering, begin_run_record

_SHARD = re.compile(r"\s*(\d+)\s*/\s*(\d+)\s*\Z")
INTERRUPTED_EXIT = 130
"""How a worker that was interrupted exits, so the parent tells it from a crash."""


@dataclass(frozen=True)
class Shard:
    """``I/N``: the Ith of N contiguous slices of the planned work (1-based)."""

    index: int
    count: int

    @classmethod
    def parse(cls, text: str) -> Shard:
        match = _SHARD.match(text)
        if match is None or not 1 <= int(match.group(1)) <= int(match.group(2)):
            raise UsageError(f"--shard {text!r}: write I/N with 1 <= I <= N, such as 1/4")
        return cls(int(match.group(1)), int(match.group(2)))

    def take(self, items: Sequence[WorkItem]) -> list[WorkItem]:
        """This shard's slice: sizes differ by at most one item."""
        total = len(items)
        return list(items[(self.index - 1) * total // self.count : self.index * total // self.count])


@dataclass(frozen=True)
class WorkItem:
    """One kernel for one target with its arguments evaluated, or a request that failed to load."""

    unit: LoweringUnit | None = None
    call: KernelCall | None = None
    error: IrtraceError | None = None
    """Why the request's file or arguments could not be loaded (then there is no unit)."""


def record_all(
    requests: Sequence[RecordRequest],
    writer: TraceWriter,
    *,
    jobs: int = 1,
    shard: Shard | None = None,
    repeat: int = 1,
    isolate: bool = False,
    timeout: float | None = None,
    after_run: AfterRun | None = None,
) -> tuple[list[KernelRun], list[IrtraceError]]:
    """``irtrace record``'s recording: plainly (``api.record_requests``) unless asked for jobs,
    a shard or repeats, else planned first (``plan_work``) and recorded by ``record_work``."""
    if jobs <= 1 and shard is None and repeat <= 1:
        return record_requests(requests, writer, isolate=isolate, timeout=timeout, after_run=after_run)
    items = plan_work(requests)
    if shard is not None:
        items = shard.take(items)
    return record_work(
        items, writer, jobs=jobs, repeat=repeat, isolate=isolate, timeout=timeout, after_run=after_run
    )


def plan_work(requests: Iterable[RecordRequest]) -> list[WorkItem]:
    """Every kernel x target of every request, in the order a plain recording lowers them.

    As in ``record_requests``, a request that cannot be loaded is one error item, and an argument
    that cannot be evaluated for a target ends that request there.
    """
    items: list[WorkItem] = []
    for request in requests:
        try:
            for unit in lowering_units(request):
                items.append(WorkItem(unit, bind_unit(unit)))
        except OutputError:
            raise
        except IrtraceError as error:
            interrupts.raise_if_requested()
            items.append(WorkItem(error=error))
    return items


def record_work(
    items: Sequence[WorkItem],
    writer: TraceWriter,
    *,
    jobs: int = 1,
    repeat: int = 1,
    isolate: bool = False,
    timeout: float | None = None,
    after_run: AfterRun | None = None,
) -> tuple[list[KernelRun], list[IrtraceError]]:
    """Record ``items`` into ``writer`` in their order; the runs written and the load errors met.

    With ``jobs`` > 1 (or ``repeat`` with ``isolate``/``timeout``) the items are lowered by
    worker processes, which also contain crashes and enforce ``timeout``; ``after_run`` is then
    called without the built kernel, which stays in the worker.
    """
    isolate = isolate or timeout is not None
    if jobs > 1 or (isolate and repeat > 1):
        pool = WorkerPool(items, writer, jobs=jobs, repeat=repeat, timeout=timeout, after_run=after_run)
        return pool.run()
    runs: list[KernelRun] = []
    errors: list[IrtraceError] = []
    for item in items:
        if item.error is not None:
            errors.append(item.error)
            continue
        assert item.unit is not None and item.call is not None
        prepared: PreparedLowering | None = None
        if isolate:
            recorded = record_in_child(item.unit, item.call, writer, timeout=timeout)
        else:
            run, prepared = record_unit(item.unit, item.call, writer, repeat=repeat)
            recorded = [run]
        runs.extend(recorded)
        interrupts.raise_if_requested()
        if after_run is not None:
            for run in recorded:
                after_run(run, prepared)
    return runs, errors


def record_unit(
    unit: LoweringUnit, call: KernelCall, writer: TraceWriter, *, repeat: int = 1
) -> tuple[KernelRun, PreparedLowering]:
    """Build and lower one unit into ``writer``; with ``repeat`` > 1, lower it that many times and
    keep the last lowering with each pass's (and the total's) smallest time over all of them.

    Repeated lowerings are made in memory and the kept one is copied once they are done.
    """
    prepared = build_unit(unit, call)
    if repeat <= 1:
        return _run_of(record_prepared(prepared, writer)), prepared
    lowered: list[KernelRun] = []
    scratch = TraceWriter()
    for attempt in range(repeat):
        if attempt:
            prepared = build_unit(unit, call)  # lowering changes its PrimFunc in place
        scratch = TraceWriter()  # memory only
        lowered.append(_run_of(record_prepared(prepared, scratch)))
    return writer.add_run(fastest_times(lowered[-1], lowered), scratch.trace().texts), prepared


def _run_of(result: RecordedLowering | KernelRun) -> KernelRun:
    return result.run if isinstance(result, RecordedLowering) else result


def fastest_times(kept: KernelRun, runs: Sequence[KernelRun]) -> KernelRun:
    """``kept`` with each pass's wall and self time, and the total, at their minimum over ``runs``.

    A pass takes the minimum over the runs that have a pass of the same name at its index (all
    of them, when lowering is deterministic).
    """
    passes = []
    for record in kept.passes:
        same = [
            other.passes[record.index]
            for other in runs
            if record.index < len(other.passes) and other.passes[record.index].name == record.name
        ]
        passes.append(_fastest(record, same))
    totals = [run.total_s for run in runs if run.total_s is not None]
    return replace(kept, passes=tuple(passes), total_s=min(totals) if totals else kept.total_s)


def _fastest(record: PassRecord, same: Sequence[PassRecord]) -> PassRecord:
    if not same:
        return record
    return replace(
        record,
        wall_s=min(other.wall_s for other in same),
        self_s=min(other.self_s for other in same),
    )


# ----------------------------------------------------------------------------- worker processes


@dataclass
class _Worker:
    """One forked worker: a pipe it reads item numbers from, a pipe it answers on."""

    pid: int
    commands: int
    replies: int
    item: int | None = None
    started: float = 0.0
    buffer: bytes = b""


@dataclass
class _Done:
    """How one item ended in a worker."""

    scratch: Path
    error: IrtraceError | None = None
    stopped_by: str | None = None
    death: str = ""
    elapsed_s: float = 0.0


@dataclass
class WorkerPool:
    """Lower ``items`` in ``jobs`` forked workers, writing runs into ``writer`` in item order."""

    items: Sequence[WorkItem]
    writer: TraceWriter
    jobs: int
    repeat: int = 1
    timeout: float | None = None
    after_run: AfterRun | None = None
    runs: list[KernelRun] = field(default_factory=list)
    errors: list[IrtraceError] = field(default_factory=list)
    _done: dict[int, _Done] = field(default_factory=dict)
    _flushed: int = 0
    _workers: list[_Worker] = field(default_factory=list)
    _scratch_dir: Path | None = None

    def run(self) -> tuple[list[KernelRun], list[IrtraceError]]:
        pending = deque(i for i, item in enumerate(self.items) if item.error is None)
        self._scratch_dir = Path(tempfile.mkdtemp(prefix="irtrace-jobs-"))
        # Workers share the parent's objects copy-on-write; a collection in a worker would touch
        # (and so copy) every one of them. Frozen objects are left out of collections.
        gc.freeze()
        try:
            for _ in range(min(max(self.jobs, 1), len(pending))):
                self._workers.append(self._spawn())
            for worker in self._workers:
                self._assign(worker, pending)
            while any(worker.item is not None for worker in self._workers):
                self._step(pending)
                self._flush()
                interrupts.raise_if_requested()
            self._flush()
        except BaseException:
            self._stop_all()
            self._flush(everything=True)
            raise
        finally:
            self._stop_all()
            gc.unfreeze()
            shutil.rmtree(self._scratch_dir, ignore_errors=True)
        return self.runs, self.errors

    # --- scheduling ------------------------------------------------------------------------

    def _spawn(self) -> _Worker:
        command_read, command_write = os.pipe()
        reply_read, reply_write = os.pipe()
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:  # the worker: never returns
            os.close(command_write)
            os.close(reply_read)
            for other in self._workers:  # their pipes: a worker must see EOF when the parent closes
                for fd in (other.commands, other.replies):
                    if fd >= 0:
                        with contextlib.suppress(OSError):
                            os.close(fd)
            _worker_main(self.items, self._scratch_path, command_read, reply_write, self.repeat)
        os.close(command_read)
        os.close(reply_write)
        return _Worker(pid, command_write, reply_read)

    def _scratch_path(self, index: int) -> Path:
        assert self._scratch_dir is not None
        return self._scratch_dir / f"item-{index}.jsonl"

    def _assign(self, worker: _Worker, pending: deque[int]) -> None:
        if not pending:
            worker.item = None
            return
        worker.item = pending.popleft()
        worker.started = time.monotonic()
        os.write(worker.commands, f"{worker.item}\n".encode())

    def _step(self, pending: deque[int]) -> None:
        busy = [worker for worker in self._workers if worker.item is not None]
        wait = None
        if self.timeout is not None:
            now = time.monotonic()
            wait = max(0.0, min(worker.started + self.timeout for worker in busy) - now)
        ready, _, _ = select.select([worker.replies for worker in busy], [], [], wait)
        for worker in busy:
            if worker.replies in ready:
                self._read_replies(worker, pending)
            elif self.timeout is not None and time.monotonic() - worker.started >= self.timeout:
                self._replace(worker, pending, STOPPED_BY_TIMEOUT, "")

    def _read_replies(self, worker: _Worker, pending: deque[int]) -> None:
        chunk = os.read(worker.replies, 65536)
        if not chunk:  # the worker died
            _, status = os.waitpid(worker.pid, 0)
            if os.WIFEXITED(status) and os.WEXITSTATUS(status) == INTERRUPTED_EXIT:
                raise KeyboardInterrupt
            if os.WIFSIGNALED(status) and os.WTERMSIG(status) in (signal.SIGINT, signal.SIGTERM):
                raise KeyboardInterrupt
            worker.pid = 0
            self._replace(worker, pending, STOPPED_BY_CRASH, _describe_status(status))
            return
        worker.buffer += chunk
        while b"\n" in worker.buffer:
            line, worker.buffer = worker.buffer.split(b"\n", 1)
            reply = json.loads(line)
            index = int(reply["index"])
            error = None
            if "error" in reply:
                error = ChildError(str(reply["error"]), int(reply.get("exit_code", 2)))
            self._done[index] = _Done(self._scratch_path(index), error)
            self._assign(worker, pending)

    def _replace(self, worker: _Worker, pending: deque[int], stopped_by: str, death: str) -> None:
        """End a dead or timed-out worker's item as failed and start a fresh worker."""
        assert worker.item is not None
        self._kill(worker)
        elapsed = time.monotonic() - worker.started
        self._done[worker.item] = _Done(self._scratch_path(worker.item), None, stopped_by, death, elapsed)
        fresh = self._spawn()
        worker.pid, worker.commands, worker.replies, worker.buffer = (
            fresh.pid,
            fresh.commands,
            fresh.replies,
            b"",
        )
        self._assign(worker, pending)

    def _kill(self, worker: _Worker) -> None:
        if worker.pid:
            with contextlib.suppress(OSError):
                os.kill(worker.pid, signal.SIGKILL)
            with contextlib.suppress(OSError):
                os.waitpid(worker.pid, 0)
            worker.pid = 0
        for fd in (worker.commands, worker.replies):
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
        # closed numbers are reused by the next pipes: a child must not close them again
        worker.commands = worker.replies = -1

    def _stop_all(self) -> None:
        for worker in self._workers:
            self._kill(worker)
        self._workers = []

    # --- writing in plan order -----------------------------------------------------------

    def _flush(self, *, everything: bool = False) -> None:
        """Copy finished items into the output in plan order (``everything``: skip unfinished ones)."""
        while self._flushed < len(self.items):
            index = self._flushed
            item = self.items[index]
            if item.error is not None:
                self.errors.append(item.error)
            elif index in self._done:
                written = len(self.runs)
                self._copy(index, self._done.pop(index))
                if self.after_run is not None:
                    for run in self.runs[written:]:
                        self.after_run(run, None)
            elif not everything:
                return
            self._flushed += 1

    def _copy(self, index: int, done: _Done) -> None:
        if done.error is not None:
            self.errors.append(done.error)
        trace = load_trace(done.scratch) if done.scratch.exists() else None
        runs = list(trace.runs) if trace is not None else []
        if done.stopped_by is None:
            assert trace is not None
            self.runs += [self.writer.add_run(run, trace.texts) for run in runs]
            return
        ended = [run for run in runs if run.status != STATUS_INCOMPLETE]
        self.runs += [self.writer.add_run(run, trace.texts) for run in ended if trace is not None]
        open_runs = [run for run in runs if run.status == STATUS_INCOMPLETE]
        if not open_runs:
            self.runs.append(self._failed_before_lowering(index, done))
            return
        assert trace is not None
        for run in open_runs:
            where = f"while pass {run.running} was running" if run.running else "before its first pass"
            stopped = replace(
                run,
                status=STATUS_FAILED,
                error=_stopped_error(done, where, self.timeout),
                total_s=done.elapsed_s,
                input_ir=run.passes[0].ir_before if run.passes else None,
                source_sha256=None,
                stopped_by=done.stopped_by,
            )
            self.runs.append(self.writer.add_run(stopped, trace.texts))

    def _failed_before_lowering(self, index: int, done: _Done) -> KernelRun:
        """The run of a worker that died (or timed out) while building the kernel."""
        item = self.items[index]
        assert item.unit is not None and item.call is not None
        unit = item.unit
        name = unit.request.name or unit.kernel.name
        run = begin_run_record(
            self.writer,
            unit.target.name,
            name,
            unit.spec.text,
            item.call.args_json(),
            str(unit.tvm_target),
            {},
        )
        return self.writer.end_run(
            run.run_id,
            status=STATUS_FAILED,
            error=_stopped_error(done, "while the kernel was being built", self.timeout),
            total_s=done.elapsed_s,
            input_ir=None,
            source_sha256=None,
            stopped_by=done.stopped_by,
        )


def _stopped_error(done: _Done, where: str, timeout: float | None) -> str:
    if done.stopped_by == STOPPED_BY_TIMEOUT:
        return f"timed out after {timeout or 0:g} s {where}; the lowering process was killed"
    return f"the lowering process died {where}: {done.death}"


def _worker_main(
    items: Sequence[WorkItem], scratch_path: Callable[[int], Path], commands: int, replies: int, repeat: int
) -> None:
    """A worker's life: lower the items it is sent, one scratch trace each, until its pipe closes."""
    code = 0
    try:
        with os.fdopen(commands, "r") as orders:
            for line in orders:
                index = int(line)
                item = items[index]
                assert item.unit is not None and item.call is not None
                reply: dict[str, Any] = {"index": index}
                writer = TraceWriter(scratch_path(index))
                try:
                    record_unit(item.unit, item.call, writer, repeat=repeat)
                except IrtraceError as error:
                    reply.update(error=error.message, exit_code=int(error.exit_code))
                writer.close()
                interrupts.raise_if_requested()
                data = (json.dumps(reply) + "\n").encode("utf-8")
                while data:
                    data = data[os.write(replies, data) :]
    except KeyboardInterrupt:
        code = INTERRUPTED_EXIT
    except BaseException:
        import traceback

        traceback.print_exc()
        code = 1
    finally:
        with contextlib.suppress(BaseException):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)  # no atexit handlers or finalizers: the parent's files stay as they are
