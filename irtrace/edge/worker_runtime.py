"""The one worker runtime both servers' workers run: the language server's analysis worker and the
MCP server's lowering worker.

A worker reads the protocol of ``irtrace.edge.worker_protocol`` on stdin, one JSON object per line,
and answers on a copy of the original stdout (file descriptor 1 is pointed at stderr, so whatever
TileLang, TVM or a kernel prints goes there). What differs between the two workers is only their
requests and the handler of each: a ``WorkerRuntime`` is given a table from request type to
handler and does the rest the same way for both:

- ``Ready`` once tilelang is imported, ``Warm`` after the one warm-up lowering;
- each ``Call`` dispatched by its request's type; a ``Result`` or a ``Failure`` for each; a line
  that does not follow the protocol answered with a ``Failure`` naming the field;
- one cancel path: while a call runs, a timer looks at stdin every ``CANCEL_POLL_S`` for its
  ``Cancel`` (``CancelWatch``). A handler polls ``context.should_stop()`` between steps, or waits
  inside ``context.interruptible()``, where the cancel raises ``KeyboardInterrupt``;
- when stdin closes (the server stopped, exited or was killed) a worker that leads its own session
  kills its whole process group, so nothing a kernel file forked outlives the server.

The worker has one thread: the MCP worker forks a child per job, and forking from a process with
other threads is unsafe. Imports no tilelang: the warm-up is given by the caller.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import sys
import time
import traceback
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from types import FrameType
from typing import Any, Generic, Protocol, TypeVar

import msgspec

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
    WorkerCodec,
    encode,
    message_id,
    raw,
    resident_mb,
)

CANCEL_POLL_S = 0.1
"""How often a running call's worker looks at stdin for its ``Cancel``."""

R = TypeVar("R", bound=Request)
R_contra = TypeVar("R_contra", bound=Request, contravariant=True)


class StdinLines:
    """The worker's stdin as lines, read from the descriptor by hand, so that a call's
    ``CancelWatch`` can take what came in meanwhile and leave the rest for the main loop."""

    def __init__(self, fd: int = 0) -> None:
        self.fd = fd
        self._partial = b""
        self._lines: deque[bytes] = deque()
        self.closed = False

    def _take(self, chunk: bytes) -> None:
        if not chunk:  # end of input: a last line without its newline still counts
            self.closed = True
            chunk, self._partial = self._partial + b"\n", b""
        *complete, self._partial = (self._partial + chunk).split(b"\n")
        self._lines.extend(line for line in complete if line.strip())

    def __iter__(self) -> Iterator[bytes]:
        while True:
            while self._lines:
                yield self._lines.popleft()
            if self.closed:
                return
            self._take(os.read(self.fd, 65536))

    def take_first(self, match: Callable[[bytes], bool]) -> bool:
        """Read what came meanwhile, without waiting, and take out the first complete line that
        ``match``es; whether there was one. The other lines stay, in order."""
        while not self.closed and select.select([self.fd], [], [], 0)[0]:
            self._take(os.read(self.fd, 65536))
        for line in self._lines:
            if match(line):
                self._lines.remove(line)
                return True
        return False


class CancelWatch:
    """While a call runs (``running``), looks at stdin every ``CANCEL_POLL_S`` for its ``Cancel``;
    inside ``interruptible`` a cancel raises ``KeyboardInterrupt`` there, once. Other lines wait
    for the main loop. When stdin closes meanwhile, ``on_closed`` runs (the server is gone)."""

    def __init__(
        self, stdin: StdinLines, codec: WorkerCodec[Any], call_id: int, on_closed: Callable[[], None]
    ):
        self.stdin = stdin
        self.codec = codec
        self.call_id = call_id
        self.on_closed = on_closed
        self.cancelled = False
        self._armed = False

    def _is_mine(self, line: bytes) -> bool:
        try:
            message = self.codec.decode_to_worker(line)
        except ProtocolError:
            return False
        return isinstance(message, Cancel) and message.id == self.call_id

    def look(self) -> bool:
        """Whether the call was cancelled, reading stdin first (no waiting)."""
        if not self.cancelled and self.stdin.take_first(self._is_mine):
            self.cancelled = True
        if self.stdin.closed:
            self.on_closed()
        return self.cancelled

    def _on_timer(self, signum: int, frame: FrameType | None) -> None:
        if self.look() and self._armed:
            self._armed = False  # once: the call's cleanup must not be interrupted in turn
            raise KeyboardInterrupt("cancelled by the client")

    @contextlib.contextmanager
    def running(self) -> Iterator[None]:
        """Look for the cancel while the call runs (a timer: the worker has one thread)."""
        previous = signal.signal(signal.SIGALRM, self._on_timer)
        # native code reading a file is not cut short by the timer (its call restarts); a wait for
        # a child (select) is never restarted, so a cancel still ends it
        signal.siginterrupt(signal.SIGALRM, False)
        signal.setitimer(signal.ITIMER_REAL, CANCEL_POLL_S, CANCEL_POLL_S)
        try:
            yield
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)

    @contextlib.contextmanager
    def interruptible(self) -> Iterator[None]:
        """Where a cancel may interrupt the call (``KeyboardInterrupt``): while it waits for a child."""
        if self.cancelled:
            raise KeyboardInterrupt("cancelled by the client")
        self._armed = True
        try:
            yield
        finally:
            self._armed = False


@dataclass
class CallContext:
    """What a handler gets besides its request: its call's id, its cancel and its events."""

    call_id: int
    watch: CancelWatch
    send: Callable[[msgspec.Struct], None]
    protocol_fds: tuple[int, ...] = field(default=())
    """The worker's protocol descriptors: a child forked for the call closes them."""

    def should_stop(self) -> bool:
        """Whether the client cancelled this call (polled between steps)."""
        return self.watch.look()

    def interruptible(self) -> contextlib.AbstractContextManager[None]:
        """A context where a cancel raises ``KeyboardInterrupt`` (a wait for a child)."""
        return self.watch.interruptible()

    def progress(self, kernel: str, line: int) -> None:
        """Say that the call starts building ``kernel`` (defined at ``line``)."""
        self.send(Progress(request=self.call_id, kernel=kernel, line=line))


class Handler(Protocol[R_contra]):
    """Runs one request; returns its answer (encoded as the ``Result``'s body)."""

    def __call__(self, request: R_contra, context: CallContext, /) -> Any: ...


class CallFailed(Exception):
    """A handler's failure to report as is: its message is the ``Failure``'s text."""

    def __init__(self, message: str, *, cancelled: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.cancelled = cancelled


@dataclass
class WorkerRuntime(Generic[R]):
    """One worker: its name (in messages), its codec, and a handler per request type."""

    name: str
    codec: WorkerCodec[R]
    handlers: Mapping[type[Request], Handler[Any]]
    describe_error: Callable[[Exception], CallFailed | None] = lambda error: None
    """Turns a handler's expected errors into the ``Failure`` to send; ``None``: a bug of ours."""

    def answer(self, call: Call[R], context: CallContext) -> Result | Failure:
        """Run ``call``'s handler, found by its request's type, and say how it went."""
        handler = self.handlers.get(type(call.request))
        try:
            if handler is None:
                raise CallFailed(f"{self.name}: no handler for {type(call.request).__name__}")
            if context.should_stop():  # cancelled before it started
                raise CallFailed("cancelled by the client", cancelled=True)
            with context.watch.running():
                body = handler(call.request, context)
            return Result(id=call.id, body=raw(body), rss_mb=resident_mb())
        except Exception as error:
            if context.watch.cancelled:  # whatever the handler raised on its way out
                return Failure(
                    id=call.id, error="cancelled by the client", cancelled=True, rss_mb=resident_mb()
                )
            failed = error if isinstance(error, CallFailed) else self.describe_error(error)
            if failed is None:  # a bug of ours: say what it was, keep serving
                traceback.print_exc()
                failed = CallFailed(f"internal error in the {self.name}: {type(error).__name__}: {error}")
            return Failure(id=call.id, error=failed.message, cancelled=failed.cancelled, rss_mb=resident_mb())

    def serve(
        self, prepare: Callable[[], tuple[str, str]], warm_up: Callable[[], float], *, warm_before_ready: bool
    ) -> None:
        """``prepare`` the process (it imports tilelang and says from which folder, which version),
        say ``Ready``, ``warm_up``, then answer stdin until it closes.

        ``warm_before_ready``: the MCP worker forks a child per job, so it warms up before it takes
        any (every child starts warm); the language server's worker says ``Ready`` first, so the
        editor shows it, and warms up unless a request is already waiting (that one warms it)."""
        protocol_fd = os.dup(1)
        protocol = os.fdopen(protocol_fd, "wb")
        os.dup2(2, 1)
        sys.stdout = sys.stderr

        def send(message: msgspec.Struct) -> None:
            protocol.write(encode(message))
            protocol.flush()

        started = time.perf_counter()
        try:
            tilelang_folder, tilelang_version = prepare()
        except Exception as error:
            print(f"{self.name}: cannot import tilelang: {type(error).__name__}: {error}", file=sys.stderr)
            sys.exit(1)
        ready = Ready(
            pid=os.getpid(),
            import_s=time.perf_counter() - started,
            prefix=sys.prefix,
            tilelang=tilelang_folder,
            tilelang_version=tilelang_version,
        )
        stdin = StdinLines(sys.stdin.fileno())
        if warm_before_ready:
            warmup_s = warm_up()
            send(ready)
            send(Warm(warmup_s=warmup_s))
        else:
            send(ready)
            if not select.select([stdin.fd], [], [], IDLE_BEFORE_WARMUP_S)[0]:
                send(Warm(warmup_s=warm_up()))
        for line in stdin:
            reply = self.reply(line, stdin, send, protocol_fd)
            if reply is not None:
                send(reply)
        end_process_group()
        # nothing is left to flush: skip the interpreter's slow teardown of tilelang and TVM
        os._exit(0)

    def reply(
        self, line: bytes, stdin: StdinLines, send: Callable[[msgspec.Struct], None], protocol_fd: int
    ) -> Result | Failure | None:
        """What answers ``line``: its call's ``Result`` or a ``Failure`` saying why (a request that
        does not follow the schema names the field and runs nothing); ``None`` for a ``Cancel`` or
        a line without a readable id. Events go out through ``send``."""
        try:
            message = self.codec.decode_to_worker(line)
        except ProtocolError as error:
            print(f"{self.name}: {error}", file=sys.stderr)
            request_id = message_id(line)
            return Failure(id=request_id, error=str(error)) if request_id is not None else None
        if isinstance(message, Cancel):
            return None  # its call has ended already
        watch = CancelWatch(stdin, self.codec, message.id, on_closed=end_process_group)
        return self.answer(message, CallContext(message.id, watch, send, (protocol_fd,)))


IDLE_BEFORE_WARMUP_S = 0.05
"""How long the language server's worker waits for a first request before its warm-up."""


def end_process_group() -> None:
    """SIGKILL the worker's process group, itself included, when the worker leads its own session
    (the servers start it so). Started by hand, it may lead a shell job's group: that is left alone."""
    if os.getsid(0) == os.getpid():
        os.killpg(0, signal.SIGKILL)
