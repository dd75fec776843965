"""One executor for every recording: tasks run in this process, or in a pool of forked workers.

A task records into the ``TraceWriter`` it is given. In this process that is the output's
writer. In a worker (``irtrace record --jobs N``; ``--isolate`` and ``--timeout`` are a pool of
one; every tilelang-mcp job) it is the writer redirected to a scratch file of the task's own,
flushed line by line, and the parent copies each task's lines into the output in task order
(``TraceWriter.adopt``) however the task ended: a crash mid-pass keeps the passes done. A worker
that dies (a segmentation fault in a pass) or outlives ``timeout`` is killed and replaced; each
run it left open is ended as failed by ``end_stopped_runs``, the one place that words why, and
the next task goes on. Workers are forked once the tasks exist, so they start with TileLang and
the kernels' modules imported and share them with the parent copy-on-write (no worker pays the
imports; the parent has started no TVM thread pool then: it has lowered nothing). ``order`` says
which task a free worker takes next (longest first, ``irtrace.perf.schedule``); records are still
adopted in task order. A worker dies with its parent, even one killed by SIGKILL mid-lowering.

Why our own pool and not pebble's ``ProcessPool``, which has per-task timeouts and replaces
crashed workers too: pebble pickles each task and its result through a pipe, and our tasks hold
loaded kernel modules and TVM objects, so it would carry an index into a list the workers
inherit anyway; a result comes back only when its task ends, so a worker's records would still
need our scratch file and ``adopt`` to survive a crash mid-pass; it runs three threads in the
parent and forks replacement workers from one of them, next to TVM's threads (a fork taken
while another thread holds a lock can hang the child); and it stops a timed-out worker with
SIGTERM first, which our interrupt handlers, inherited by the worker, would turn into a
``KeyboardInterrupt`` inside the pass. What pebble would still do for us is the select loop
below, so we keep it: one thread, no new dependency.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import json
import os
import select
import shutil
import signal
import sys
import tempfile
import threading
import time
import traceback
from collections import deque
from collections.abc import Callable, Generator, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from irtrace.base import interrupts, native_log
from irtrace.base.errors import ExitCode, IrtraceError, OutputError
from irtrace.base.output import create_empty
from irtrace.lowering.recorder import set_crash_safe
from irtrace.lowering.snapshots import share_cores
from irtrace.trace.model import (
    STATUS_FAILED,
    STATUS_INCOMPLETE,
    STOPPED_BY_CRASH,
    STOPPED_BY_TIMEOUT,
    KernelRun,
)
from irtrace.trace.writer import TraceWriter

Task = Callable[[TraceWriter], Any]
"""Records into the writer it is given; what it returns comes home as JSON from a worker."""
TaskEvent = Callable[[int, bool], None]
"""Told, in the parent, that task N started (``True``) or ended (``False``): a progress display."""
StandIn = Callable[[int, TraceWriter], KernelRun]
"""Begins, in the parent, the run of task N for a worker that was stopped before it began one."""

INTERRUPTED_EXIT = 130
"""How a worker that was interrupted exits, so the parent tells it from a crash."""


class TaskError(IrtraceError):
    """An ``IrtraceError`` a task raised in a worker: its message and exit code, come home."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = ExitCode(exit_code)


@dataclass(frozen=True)
class Stopped:
    """Why a task did not finish in its worker: the worker died, or was killed at the timeout."""

    by: str
    """``crash`` or ``timeout`` (a run's ``stopped_by``)."""
    death: str
    """What killed it, in words (``SIGSEGV (Segmentation fault)``); empty for a timeout."""
    elapsed_s: float
    timeout: float | None

    def describe(self, where: str) -> str:
        """The one wording of a stopped task: ``where`` says what it was doing."""
        if self.by == STOPPED_BY_TIMEOUT:
            return f"timed out after {self.timeout or 0:g} s {where}; the lowering process was killed"
        return f"the lowering process died {where}: {self.death}"


@dataclass
class TaskResult:
    """How one task ended, and the runs it left in the writer (stopped ones ended as failed)."""

    runs: list[KernelRun]
    value: Any = None
    """What the task returned (from a worker, as decoded from JSON)."""
    error: IrtraceError | None = None
    """The ``IrtraceError`` it raised; the runs it wrote before are kept."""
    stopped: Stopped | None = None


def run_tasks(
    tasks: Iterable[Task],
    writer: TraceWriter,
    *,
    workers: int | None = None,
    timeout: float | None = None,
    stand_in: StandIn | None = None,
    in_worker: Callable[[], None] | None = None,
    on_task: TaskEvent | None = None,
    order: Sequence[int] | None = None,
) -> Generator[TaskResult, None, None]:
    """Run ``tasks`` and yield their results in order, as each one's records are in ``writer``.

    With ``workers`` None they run here, one after the other, as they are drawn from ``tasks``;
    else in that many forked workers (``tasks`` is drawn first), each calling ``in_worker`` once
    when it starts, with ``timeout`` seconds per task. An ``OutputError`` and an interrupt stop
    everything; an interrupt keeps the records of the tasks begun so far, open runs left open.
    ``on_task`` hears when each task starts and ends (in a worker: when the parent sends it and
    when its answer or its worker's death comes back). ``order``, a permutation of the task
    numbers, is the order workers take them in (default: task order); it changes no result.
    """
    if workers is None:
        yield from _in_process(tasks, writer, on_task)
    else:
        pool = WorkerPool(list(tasks), writer, workers, timeout, stand_in, in_worker, on_task)
        pool.order = list(order) if order is not None else None
        yield from pool.results()


def _in_process(
    tasks: Iterable[Task], writer: TraceWriter, on_task: TaskEvent | None
) -> Iterator[TaskResult]:
    for index, task in enumerate(tasks):
        first = writer.next_run_id
        result = TaskResult([])
        if on_task is not None:
            on_task(index, True)
        try:
            result.value = task(writer)
        except OutputError:
            raise
        except IrtraceError as error:
            interrupts.raise_if_requested()  # a Ctrl-C that TVM turned into an error
            result.error = error
        interrupts.raise_if_requested()
        if on_task is not None:
            on_task(index, False)
        result.runs = [writer.run(run_id) for run_id in range(first, writer.next_run_id)]
        yield result


def end_stopped_runs(
    writer: TraceWriter, runs: Sequence[KernelRun], stopped: Stopped, stand_in: Callable[[], KernelRun] | None
) -> list[KernelRun]:
    """The runs of a stopped task: those it ended as they are, each one it left open ended as
    failed, naming the pass that was running. With none open, ``stand_in`` begins the run that
    the task was building."""
    ended = [run for run in runs if run.status != STATUS_INCOMPLETE]
    open_runs: list[tuple[KernelRun, str | None]] = [
        (run, None) for run in runs if run.status == STATUS_INCOMPLETE
    ]
    if not open_runs and stand_in is not None:
        open_runs = [(stand_in(), "while the kernel was being built")]
    for run, building in open_runs:
        running = _running_pass(writer, run)
        where = building or (f"while pass {running} was running" if running else "before its first pass")
        ended.append(
            writer.end_run(
                run.run_id,
                status=STATUS_FAILED,
                error=stopped.describe(where),
                total_s=stopped.elapsed_s,
                input_ir=run.passes[0].ir_before if run.passes else None,
                source_sha256=None,
                running=running,
                stopped_by=stopped.by,
            )
        )
    return ended


def _running_pass(writer: TraceWriter, run: KernelRun) -> str | None:
    done = {record.index for record in writer.run(run.run_id).passes}
    started = {i: name for i, name in writer.started_passes(run.run_id).items() if i not in done}
    return started[max(started)] if started else None


# ----------------------------------------------------------------------------- worker processes


@dataclass
class _Worker:
    """One forked worker: a pipe it reads task numbers from, a pipe it answers on."""

    pid: int
    commands: int
    replies: int
    task: int | None = None
    started: float = 0.0
    buffer: bytes = b""


@dataclass
class _Ended:
    """How one task ended in its worker, before its lines are adopted."""

    value: Any = None
    error: IrtraceError | None = None
    failure: str | None = None
    """A bug or a ``MemoryError`` in the task, in words: it stops the caller too."""
    stopped: Stopped | None = None


@dataclass
class WorkerPool:
    """Run ``tasks`` in ``size`` forked workers; their records are adopted into ``writer`` in order."""

    tasks: Sequence[Task]
    writer: TraceWriter
    size: int
    timeout: float | None = None
    stand_in: StandIn | None = None
    in_worker: Callable[[], None] | None = None
    on_task: TaskEvent | None = None
    order: list[int] | None = None
    """The order workers take tasks in (a permutation of their numbers); None: task order."""
    _pending: deque[int] = field(default_factory=deque)
    _started: set[int] = field(default_factory=set)
    _ended: dict[int, _Ended] = field(default_factory=dict)
    _adopted: int = 0
    _workers: list[_Worker] = field(default_factory=list)
    _scratch_dir: Path | None = None
    _scratch_prefix: str | None = None
    _crash_safe: set[int] = field(default_factory=set)
    """Tasks whose worker crashed once: run again crash-safe (``recorder.crash_safe``), so the
    trace holds every pass that finished and the one that crashed, not what the print pool had
    written by then."""

    def results(self) -> Iterator[TaskResult]:
        if not self.tasks:
            return
        if self.order is not None and sorted(self.order) != list(range(len(self.tasks))):
            raise ValueError("order must hold every task number once")
        self._pending = deque(self.order if self.order is not None else range(len(self.tasks)))
        self._scratch(0)
        # Workers share the parent's objects copy-on-write; a collection in a worker would touch
        # (and so copy) every one of them. Frozen objects are left out of collections.
        gc.freeze()
        try:
            for _ in range(min(max(self.size, 1), len(self.tasks))):
                self._workers.append(self._spawn())
            for worker in self._workers:
                self._assign(worker)
            while self._adopted < len(self.tasks):
                while self._adopted not in self._ended:
                    self._step()
                    interrupts.raise_if_requested()
                index = self._adopted
                self._adopted += 1
                yield self._adopt(index, self._ended.pop(index))
        except KeyboardInterrupt:
            self._stop_all()
            self._adopt_begun()
            raise
        finally:
            self._stop_all()
            gc.unfreeze()
            self._remove_scratch()

    # --- scheduling ------------------------------------------------------------------------

    def _spawn(self) -> _Worker:
        command_read, command_write = os.pipe()
        reply_read, reply_write = os.pipe()
        sys.stdout.flush()
        sys.stderr.flush()
        parent = os.getpid()
        pid = os.fork()
        if pid == 0:  # the worker: never returns
            die_with_parent(parent)
            share_cores(self.size)
            os.close(command_write)
            os.close(reply_read)
            for other in self._workers:  # their pipes: a worker must see EOF when the parent closes
                for fd in (other.commands, other.replies):
                    if fd >= 0:
                        with contextlib.suppress(OSError):
                            os.close(fd)
            _worker_main(self.tasks, self.writer, self._scratch, command_read, reply_write, self.in_worker)
        os.close(command_read)
        os.close(reply_write)
        return _Worker(pid, command_write, reply_read)

    def _scratch(self, index: int) -> Path:
        """Where task ``index`` writes: beside ``NAME.partial``, where a user watching it looks."""
        if self._scratch_prefix is None:  # chosen before the first fork: workers redirect the writer
            partial = self.writer.partial_path
            if partial is not None:
                self._scratch_prefix = f"{partial}.task-"
            else:
                self._scratch_dir = Path(tempfile.mkdtemp(prefix="irtrace-tasks-"))
                self._scratch_prefix = f"{self._scratch_dir}{os.sep}task-"
        return Path(f"{self._scratch_prefix}{index}")

    def _assign(self, worker: _Worker) -> None:
        if not self._pending:
            worker.task = None
            return
        worker.task = self._pending.popleft()
        create_empty(self._scratch(worker.task))  # there before the worker starts, and never a link
        self._started.add(worker.task)
        worker.started = time.monotonic()
        mode = " crash-safe" if worker.task in self._crash_safe else ""
        os.write(worker.commands, f"{worker.task}{mode}\n".encode())
        if self.on_task is not None:
            self.on_task(worker.task, True)

    def _step(self) -> None:
        busy = [worker for worker in self._workers if worker.task is not None]
        wait = None
        if self.timeout is not None:
            wait = max(0.0, min(worker.started + self.timeout for worker in busy) - time.monotonic())
        ready, _, _ = select.select([worker.replies for worker in busy], [], [], wait)
        for worker in busy:
            if worker.replies in ready:
                self._read_replies(worker)
            elif self.timeout is not None and time.monotonic() - worker.started >= self.timeout:
                self._replace(worker, STOPPED_BY_TIMEOUT, "")

    def _read_replies(self, worker: _Worker) -> None:
        chunk = os.read(worker.replies, 65536)
        if not chunk:  # the worker died
            _, status = os.waitpid(worker.pid, 0)
            worker.pid = 0
            if os.WIFEXITED(status) and os.WEXITSTATUS(status) == INTERRUPTED_EXIT:
                raise KeyboardInterrupt
            if os.WIFSIGNALED(status) and os.WTERMSIG(status) in (signal.SIGINT, signal.SIGTERM):
                raise KeyboardInterrupt
            self._replace(worker, STOPPED_BY_CRASH, describe_status(status))
            return
        worker.buffer += chunk
        while b"\n" in worker.buffer:
            line, worker.buffer = worker.buffer.split(b"\n", 1)
            reply = json.loads(line)
            ended = _Ended(value=reply.get("value"), failure=reply.get("failure"))
            if "error" in reply:
                ended.error = TaskError(str(reply["error"]), int(reply.get("exit_code", ExitCode.USAGE)))
            self._ended[int(reply["index"])] = ended
            if self.on_task is not None:
                self.on_task(int(reply["index"]), False)
            self._assign(worker)

    def _replace(self, worker: _Worker, stopped_by: str, death: str) -> None:
        """End a dead or timed-out worker's task as stopped and start a fresh worker in its place."""
        assert worker.task is not None
        self._kill(worker)
        elapsed = time.monotonic() - worker.started
        if stopped_by == STOPPED_BY_CRASH and worker.task not in self._crash_safe:
            self._crash_safe.add(worker.task)  # once more, crash-safe: first in line, same scratch
            self._started.discard(worker.task)
            self._pending.appendleft(worker.task)
        else:
            if worker.task in self._crash_safe:
                death += "; again when run crash-safe"
            self._ended[worker.task] = _Ended(stopped=Stopped(stopped_by, death, elapsed, self.timeout))
            if self.on_task is not None:
                self.on_task(worker.task, False)
        fresh = self._spawn()
        worker.pid, worker.commands, worker.replies, worker.buffer = (
            fresh.pid,
            fresh.commands,
            fresh.replies,
            b"",
        )
        self._assign(worker)

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
        # closed numbers are reused by the next pipes: a worker must not close them again
        worker.commands = worker.replies = -1

    def _stop_all(self) -> None:
        for worker in self._workers:
            self._kill(worker)
        self._workers = []

    # --- bringing records home, in task order ------------------------------------------------

    def _adopt(self, index: int, ended: _Ended) -> TaskResult:
        runs = self._adopt_lines(index)
        if ended.failure is not None:
            raise RuntimeError(f"the lowering process failed: {ended.failure}")
        if ended.stopped is not None:
            native_log.show_run_log(_log_path(self._scratch(index)))  # what it said as it died
            stand_in = self.stand_in
            begin = (lambda: stand_in(index, self.writer)) if stand_in is not None else None
            runs = end_stopped_runs(self.writer, runs, ended.stopped, begin)
        return TaskResult(runs, ended.value, ended.error, ended.stopped)

    def _adopt_lines(self, index: int) -> list[KernelRun]:
        scratch = self._scratch(index)
        try:
            data = scratch.read_bytes()
        except OSError:
            return []
        finally:
            scratch.unlink(missing_ok=True)
        lines = data.decode("utf-8", errors="replace").split("\n")[:-1]  # a line cut by a death is dropped
        return self.writer.adopt(lines, str(scratch))

    def _adopt_begun(self) -> None:
        """After an interrupt: the records of every task begun, in order, open runs left open
        (taken longest first, the tasks begun need not be the first ones)."""
        for index in sorted(self._started):
            if index >= self._adopted:
                self._adopt_lines(index)
        self._adopted = len(self.tasks)

    def _remove_scratch(self) -> None:
        for index in self._started:
            with contextlib.suppress(OSError):
                self._scratch(index).unlink(missing_ok=True)
                _log_path(self._scratch(index)).unlink(missing_ok=True)
        if self._scratch_dir is not None:
            shutil.rmtree(self._scratch_dir, ignore_errors=True)


PR_SET_PDEATHSIG = 1
"""``prctl`` option (linux/prctl.h): the signal this process gets when its parent dies."""


def die_with_parent(parent: int) -> None:
    """In a forked worker: be killed when ``parent`` dies, however it dies.

    A parent that gets SIGKILL cannot stop its workers, and a worker busy in a long lowering
    would not read the EOF on its command pipe until that lowering ends (the pipe is how an
    idle worker learns it). On Linux the kernel sends SIGKILL on the parent's death
    (``PR_SET_PDEATHSIG``); elsewhere, or if ``prctl`` fails, a daemon thread watches the parent
    id. A parent that died before either was set up is caught by the first check.
    """
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            libc = ctypes.CDLL(None, use_errno=True)
            if libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0) == 0:
                if os.getppid() != parent:  # it died between the fork and the prctl
                    os._exit(1)
                return
    threading.Thread(target=_watch_parent, args=(parent,), name="irtrace-parent-watch", daemon=True).start()


def _watch_parent(parent: int) -> None:
    while os.getppid() == parent:  # an orphan is re-parented: its parent id changes
        time.sleep(0.5)
    os._exit(1)


def _log_path(scratch: Path) -> Path:
    """Where a task's lowering logs native stderr (``native_log.capture_run_log``) in a worker."""
    return Path(f"{scratch}.log")


def _worker_main(
    tasks: Sequence[Task],
    writer: TraceWriter,
    scratch: Callable[[int], Path],
    commands: int,
    replies: int,
    in_worker: Callable[[], None] | None,
) -> None:
    """A worker's life: run the tasks it is sent, each into its own scratch file, until its pipe closes."""
    code = 0
    try:
        if in_worker is not None:
            in_worker()
        with os.fdopen(commands, "r") as orders:
            for line in orders:
                number, _, mode = line.strip().partition(" ")
                index = int(number)
                set_crash_safe(mode == "crash-safe")  # else prints on a pool: a crash is retried
                writer.redirect(scratch(index))
                native_log.run_log_path = _log_path(scratch(index))
                reply: dict[str, Any] = {"index": index}
                try:
                    reply["value"] = tasks[index](writer)
                except IrtraceError as error:
                    reply.update(error=error.message, exit_code=int(error.exit_code))
                except Exception as error:  # a bug: say what it was, as the parent would have
                    traceback.print_exc()
                    reply["failure"] = f"{type(error).__name__}: {error}"
                interrupts.raise_if_requested()
                try:
                    text = json.dumps(reply)
                except (TypeError, ValueError) as error:
                    text = json.dumps({"index": index, "failure": f"a result that is not JSON: {error}"})
                data = (text + "\n").encode("utf-8")
                while data:
                    data = data[os.write(replies, data) :]
    except KeyboardInterrupt:
        code = INTERRUPTED_EXIT
    except BaseException:
        traceback.print_exc()
        code = 1
    finally:
        with contextlib.suppress(BaseException):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)  # no atexit handlers or finalizers: the parent's files stay as they are


def describe_status(status: int) -> str:
    """How a worker ended, in words, from its ``waitpid`` status."""
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        try:
            name = signal.Signals(number).name
        except ValueError:
            name = f"signal {number}"
        return f"{name} ({signal.strsignal(number) or 'signal'})"
    if os.WIFEXITED(status):
        return f"it exited with code {os.WEXITSTATUS(status)} without reporting"
    return f"status {status}"
