"""A server's side of its long-lived worker: start it, send one request at a time, cut it off,
restart it. The language server and the MCP server use this one client.

Messages are ``irtrace.edge.worker_protocol``'s, one per line: the only definition of what goes
over the pipes; each server names its worker module and its requests. The worker leads a session
of its own, so whatever a kernel file forks is found and killed with it. A request that outlives
its time limit kills the worker; so does memory, when a limit is set: a watcher polls the resident
memory of the worker's whole session while it lives. A worker that dies is replaced on the next
request. Each restart is reported once through ``on_restart``.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import psutil

from irtrace.edge.worker_protocol import (
    Call,
    Cancel,
    Failure,
    Progress,
    ProtocolError,
    Ready,
    Request,
    Result,
    Warm,
    decode_body,
    decode_from_worker,
    encode,
    message_id,
    method_of,
)

log = logging.getLogger(__name__)

START_TIMEOUT_S = 180.0
"""Importing tilelang and warming up; generous because a loaded machine is slow."""
CANCEL_GRACE_S = 5.0
"""How long a cancelled request may take to finish its current pass before the worker is killed."""
WATCH_BUSY_S = 0.1
"""How often the memory watcher looks while a request runs (a scan costs about half a millisecond)."""
WATCH_IDLE_S = 0.5
"""How often it looks while the worker waits (what a kernel file forked may still be growing)."""


@dataclass
class Building:
    """The kernel a request is working on, from the worker's progress events."""

    kernel: str | None = None
    line: int | None = None


class WorkerError(Exception):
    """The worker could not answer: it died, hung past the time limit, or failed to start."""


class WorkerKilled(WorkerError):
    """The server killed the worker during a request; ``progress`` says which kernel it was building."""

    def __init__(self, message: str, progress: Building | None = None) -> None:
        super().__init__(message)
        self.progress = progress or Building()


class WorkerTimeout(WorkerKilled):
    """The request ran past its time limit; the worker was killed."""


class WorkerOutOfMemory(WorkerKilled):
    """The worker's session grew past the memory limit; the worker was killed."""


class RequestFailed(Exception):
    """The worker answered with an error (a bug in analysis, not in the user's kernel), or with a
    message that does not follow the protocol."""


class RequestCancelled(Exception):
    """The worker stopped the request because a newer edit asked it to."""


STREAM_LIMIT = 64 * 2**20
"""Longest protocol line the server reads from the worker (results can be large)."""

_NEUTRAL_FOLDER: str | None = None


def neutral_folder() -> str:
    """A private empty folder for the worker to start in: ``python -m`` puts the current folder
    first on ``sys.path``, and the server's is often the workspace, whose ``tilelang/`` (or any
    module) must not shadow the installed one before trust is known."""
    global _NEUTRAL_FOLDER
    if _NEUTRAL_FOLDER is None or not os.path.isdir(_NEUTRAL_FOLDER):
        _NEUTRAL_FOLDER = tempfile.mkdtemp(prefix="tilelang-worker-")
    return _NEUTRAL_FOLDER


def discard(process: subprocess.Popen[bytes]) -> None:
    """Stop a worker process started outside a client, and what it forked."""
    if process.poll() is None:
        kill_session(process.pid)
        process.wait()
    kill_session(process.pid)


def session_members(leader: int) -> list[int]:
    """The processes of the session ``leader`` leads (the worker is started with ``setsid``): the
    worker and whatever it forked, also the children it no longer parents (orphans keep the session)."""
    members = []
    for pid in psutil.pids():
        with contextlib.suppress(OSError):
            if os.getsid(pid) == leader:
                members.append(pid)
    return members


def session_rss_mb(leader: int) -> float:
    """Resident memory of the whole session, in MiB (pages a fork shares count in each process)."""
    total = 0
    for pid in session_members(leader):
        with contextlib.suppress(psutil.Error):
            total += psutil.Process(pid).memory_info().rss
    return total / 2**20


def kill_session(leader: int) -> None:
    """SIGKILL every process of the worker's session, its process group first."""
    with contextlib.suppress(OSError):
        os.killpg(leader, signal.SIGKILL)
    for _ in range(3):  # a member may fork while it is being killed
        members = session_members(leader)
        if not members:
            return
        for pid in members:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)


class _AdoptedProcess:
    """An already running ``Popen`` behind the parts of ``asyncio.subprocess.Process`` we use."""

    def __init__(
        self,
        popen: subprocess.Popen[bytes],
        stdin: asyncio.StreamWriter,
        stdout: asyncio.StreamReader,
        stderr: asyncio.StreamReader,
    ) -> None:
        self.popen = popen
        self.stdin = stdin
        self.stdout = stdout
        self.stderr = stderr
        self.pid = popen.pid

    @property
    def returncode(self) -> int | None:
        return self.popen.poll()

    def kill(self) -> None:
        self.popen.kill()

    async def wait(self) -> int:
        return await asyncio.get_running_loop().run_in_executor(None, self.popen.wait)


async def adopt(popen: subprocess.Popen[bytes]) -> Any:
    """An already running worker process (started before the event loop ran) as a client's process."""
    loop = asyncio.get_running_loop()
    assert popen.stdin is not None and popen.stdout is not None and popen.stderr is not None
    readers = []
    for pipe in (popen.stdout, popen.stderr):
        reader = asyncio.StreamReader(limit=STREAM_LIMIT)
        await loop.connect_read_pipe(functools.partial(asyncio.StreamReaderProtocol, reader), pipe)
        readers.append(reader)
    transport, protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin, popen.stdin)
    writer = asyncio.StreamWriter(transport, protocol, None, loop)
    return _AdoptedProcess(popen, writer, readers[0], readers[1])


class WorkerClient:
    """An asyncio client for a worker process, ``python -m MODULE``."""

    def __init__(
        self,
        module: str,
        python: str | None = None,
        *,
        memory_limit_mb: float | None = None,
        env: Mapping[str, str] | None = None,
        start_timeout_s: float = START_TIMEOUT_S,
        on_restart: Callable[[str], None] | None = None,
    ) -> None:
        self.module = module
        self.python = python or sys.executable
        self.memory_limit_mb = memory_limit_mb
        """The worker session's resident memory past which it is killed; ``None``: no limit here
        (the MCP server's jobs are each limited in their own child)."""
        self.env = dict(env) if env is not None else None
        """The worker's environment; ``None``: this process's."""
        self.start_timeout_s = start_timeout_s
        self.on_restart = on_restart
        self.process: asyncio.subprocess.Process | None = None
        self.ready: asyncio.Future[Ready] | None = None
        self.pending: dict[int, asyncio.Future[Result | Failure]] = {}
        self.progress: dict[int, Building] = {}
        self.next_id = 0
        self.lock = asyncio.Lock()
        """One request in flight at a time."""
        self.starting = asyncio.Lock()
        """One start at a time: an early start races the first request."""
        self.restarts = 0
        self.ready_info: Ready | None = None
        """What the running worker reported once tilelang was imported."""
        self.warmup_s: float | None = None
        """How long its warm-up lowering took, once done."""
        self._reader: asyncio.Task[None] | None = None
        self._stderr: asyncio.Task[None] | None = None
        self._watcher: asyncio.Task[None] | None = None
        self._kill_error: WorkerError | None = None
        """Why the server killed the running worker: what its request in flight fails with."""
        self.current: int | None = None
        """The request in flight, if any."""
        self._restart_reason: str | None = None

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None and self.process.returncode is None else None

    async def start(self) -> None:
        """Start the worker if none is running (it warms up on its own)."""
        async with self.starting:
            await self._start()

    async def spawn(self) -> Any:
        """A new worker process: ``python -m MODULE`` leading a session of its own, started in an
        empty folder (``python -m`` puts the current folder first on ``sys.path``)."""
        try:
            return await asyncio.create_subprocess_exec(
                self.python,
                "-m",
                self.module,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env=self.env,
                limit=STREAM_LIMIT,
                start_new_session=True,
                cwd=neutral_folder(),
            )
        except OSError as error:  # a `python` option naming no interpreter
            reason = error.strerror or str(error)
            raise WorkerError(f"cannot start the TileLang worker with {self.python}: {reason}") from None

    async def _start(self) -> None:
        if self.process is not None and self.process.returncode is None:
            return
        self.process = await self.spawn()
        self._kill_error = None
        self.ready = asyncio.get_running_loop().create_future()
        self.ready.add_done_callback(_retrieve)
        self._reader = asyncio.create_task(self._read(self.process))
        self._stderr = asyncio.create_task(self._forward_stderr(self.process))
        self._watcher = asyncio.create_task(self._watch(self.process))
        if self._restart_reason is not None:
            self.restarts += 1
            if self.on_restart is not None:
                self.on_restart(self._restart_reason)
            self._restart_reason = None

    async def _forward_stderr(self, process: asyncio.subprocess.Process) -> None:
        assert process.stderr is not None
        while line := await process.stderr.readline():
            sys.stderr.write("[worker] " + line.decode("utf-8", "replace"))

    async def _read(self, process: asyncio.subprocess.Process) -> None:
        assert process.stdout is not None
        while True:
            line = await process.stdout.readline()
            if not line:
                break
            if line.strip():
                self._receive(line)
        await process.wait()
        self._fail_all(
            self._kill_error or WorkerError(f"the TileLang worker exited (code {process.returncode})")
        )
        if self._restart_reason is None:
            self._restart_reason = f"the TileLang worker exited unexpectedly (code {process.returncode})"

    def _receive(self, line: bytes) -> None:
        """One line from the worker: an event, or the answer to a pending request. A line that does
        not follow the protocol fails the request it names, if any; the reader carries on."""
        try:
            message = decode_from_worker(line)
        except ProtocolError as error:
            log.warning("%s: %r", error, line[:200])
            request_id = message_id(line)
            future = self.pending.pop(request_id, None) if request_id is not None else None
            if future is not None and not future.done():
                future.set_exception(RequestFailed(str(error)))
            return
        if isinstance(message, Ready):
            self.ready_info, self.warmup_s = message, None
            if self.ready is not None and not self.ready.done():
                self.ready.set_result(message)
        elif isinstance(message, Warm):
            self.warmup_s = message.warmup_s
        elif isinstance(message, Progress):
            self.progress[message.request] = Building(message.kernel, message.line)
        else:
            future = self.pending.pop(message.id, None)
            if future is not None and not future.done():
                future.set_result(message)

    def _fail_all(self, error: Exception) -> None:
        if self.ready is not None and not self.ready.done():
            self.ready.set_exception(error)
        for future in self.pending.values():
            if not future.done():
                future.set_exception(error)
        self.pending.clear()

    async def _watch(self, process: asyncio.subprocess.Process) -> None:
        """Kill the worker as soon as its session's resident memory passes the limit (not only when
        a request answers: a kernel file can allocate without end before it answers), and kill
        what it forked once it has exited. Exit is read from the return code, not from its pipes:
        a forked child holds them open after the worker is gone."""
        limit = self.memory_limit_mb
        while process.returncode is None:
            await asyncio.sleep(WATCH_BUSY_S if self.current is not None else WATCH_IDLE_S)
            if process.returncode is not None or limit is None:
                continue
            used = session_rss_mb(process.pid)
            if used <= limit:
                continue
            current = self.current
            progress = self.progress.get(current, Building()) if current is not None else Building()
            where = f" while building {progress.kernel}" if progress.kernel else ""
            await self.kill(
                f"the TileLang worker grew to {used:.0f} MB{where}, past its limit of {limit:g} MB "
                "(workerMemoryLimitMb), and was restarted",
                WorkerOutOfMemory(
                    f"analysis stopped: the worker grew to {used:.0f} MB{where}, past the "
                    f"{limit:g} MB limit (workerMemoryLimitMb)",
                    progress,
                ),
            )
        kill_session(process.pid)  # what the worker forked dies with it, and lets go of its pipes

    async def kill(self, reason: str, error: WorkerError | None = None) -> None:
        """Kill the worker and everything it forked; the request in flight fails with ``error``;
        the next request starts a new worker and reports ``reason``."""
        process = self.process
        if process is None or process.returncode is not None:
            return
        self._restart_reason = reason
        self._kill_error = error or WorkerError(reason)
        kill_session(process.pid)
        with contextlib.suppress(Exception):
            await asyncio.wait_for(process.wait(), 10)
        if self._reader is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._reader, 10)
        # Only now, with the worker reaped: the next request must not find it still running.
        self._fail_all(self._kill_error)

    async def request(self, request: Request, *, timeout: float) -> Any:
        """Send one request once the worker is ready; at most one is in flight at a time. The
        answer is decoded as the type the request names (its ``answer``).

        Raises ``WorkerTimeout`` (worker killed), ``WorkerError`` (worker died),
        ``RequestCancelled`` or ``RequestFailed`` (also for an answer that does not follow the
        protocol). An asyncio cancellation of the caller asks the worker to stop after its
        current pass and waits for that before letting the next one in.
        """
        async with self.lock:
            await self.start()
            ready = self.ready
            assert ready is not None and self.process is not None
            self.next_id += 1
            request_id = self.next_id
            future: asyncio.Future[Result | Failure] = asyncio.get_running_loop().create_future()
            future.add_done_callback(_retrieve)
            self.pending[request_id] = future
            self.current = request_id
            # Written at once, also while the worker still imports tilelang: its reader thread
            # queues the call, so the first analysis starts the moment the import is done, not
            # after the warm-up lowering the worker begins when it finds nothing waiting.
            self._write(Call(id=request_id, request=request))
            try:
                await self._started(ready)
                message = await asyncio.wait_for(asyncio.shield(future), timeout)  # timed from ready
            except asyncio.TimeoutError:
                progress = self.progress.pop(request_id, Building())
                where = f" while building {progress.kernel}" if progress.kernel else ""
                error = WorkerTimeout(f"analysis stopped after {timeout:g} s{where}", progress)
                await self.kill(f"the TileLang worker ran past {timeout:g} s{where} and was restarted", error)
                raise error from None
            except asyncio.CancelledError:
                self._write(Cancel(id=request_id))
                # A worker still importing answers the cancelled call as soon as it is ready.
                grace = CANCEL_GRACE_S if ready.done() else self.start_timeout_s + CANCEL_GRACE_S
                try:
                    await asyncio.wait_for(asyncio.shield(future), grace)
                except (asyncio.TimeoutError, WorkerError):
                    await self.kill("the TileLang worker did not stop a cancelled analysis and was restarted")
                raise
            finally:
                self.progress.pop(request_id, None)
                self.current = None
        if isinstance(message, Failure):
            raise (RequestCancelled if message.cancelled else RequestFailed)(message.error)
        try:
            return decode_body(message.body, type(request).answer, method_of(request))
        except ProtocolError as error:
            raise RequestFailed(str(error)) from None

    async def _started(self, ready: asyncio.Future[Ready]) -> None:
        """Wait for the worker to have imported tilelang; one that takes past ``START_TIMEOUT_S``
        is killed (the request fails with ``WorkerError``)."""
        try:
            await asyncio.wait_for(asyncio.shield(ready), self.start_timeout_s)
        except asyncio.TimeoutError:
            error = WorkerError(f"the TileLang worker did not start within {self.start_timeout_s:g} s")
            await self.kill(f"{error} and was restarted", error)
            raise error from None

    def _write(self, message: Call[Any] | Cancel) -> None:
        process = self.process
        if process is None or process.stdin is None or process.returncode is not None:
            return
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            process.stdin.write(encode(message))

    async def stop(self) -> None:
        """End the worker and everything it forked at shutdown (no restart is reported)."""
        process = self.process
        if process is None:
            return
        if process.returncode is None and process.stdin is not None:
            process.stdin.close()  # the worker ends its process group when its input closes
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(process.wait(), 3)
        kill_session(process.pid)
        self._restart_reason = None


def _retrieve(future: asyncio.Future[Any]) -> None:
    """Mark a failure as seen: a request abandoned at its time limit fails later, unawaited."""
    if not future.cancelled():
        future.exception()
