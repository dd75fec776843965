"""The lowering worker: ``python -m tilelang_mcp.worker``, one per server, restarted when it dies.

It imports tilelang once and warms up on a bundled kernel, then answers the worker protocol the
language server's worker speaks (``irtrace.core.worker_protocol``), with the MCP server's jobs as
its requests (``tilelang_mcp.protocol``): each ``Call`` gets a ``Result`` or a ``Failure``; a
request that does not follow the schema is refused with the field that is wrong. Each job runs in
a child forked for it (``backend.run_job``), so kernel code never runs here and a hang or a crash
ends only that child. The protocol keeps a copy of the original stdout; file descriptor 1 is
pointed at stderr, so whatever TileLang, TVM or a kernel prints goes there.

The worker has one thread (forking from a process with other threads is unsafe), so while a job
runs a timer looks at stdin every ``CANCEL_POLL_S`` (``CancelWatch``): the job's ``Cancel`` kills
its child and the job is answered as cancelled at once, the worker kept warm for the next one.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import sys
import tempfile
import time
import traceback
from collections import deque
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType
from typing import IO

from irtrace.core.worker_protocol import (
    Call,
    Cancel,
    Failure,
    ProtocolError,
    Ready,
    Result,
    Warm,
    encode,
    message_id,
    raw,
    resident_mb,
)
from tilelang_mcp.protocol import CODEC, JobRequest


def send(out: IO[bytes], message: bytes) -> None:
    out.write(message)
    out.flush()


def warm_up() -> float:
    """Lower the bundled warm-up kernel for the default target; seconds it took."""
    from irtrace.core.specs import parse_spec
    from irtrace.core.trace_writer import TraceWriter
    from irtrace.recording.api import RecordRequest, record_kernels
    from irtrace.recording.resolve.entry_point import warm_meta_tensors
    from irtrace.recording.warmup import WARMUP_KERNEL

    began = time.perf_counter()
    warm_meta_tensors()  # what the resolver's entry-point runs use
    with tempfile.TemporaryDirectory(prefix="tilelang-mcp-warmup-") as folder:
        path = Path(folder) / "tilelang_mcp_warmup.py"
        path.write_text(WARMUP_KERNEL, encoding="utf-8")
        try:
            record_kernels(
                [RecordRequest(parse_spec(f"{path}::warmup()"), ("cuda:sm_90",))], TraceWriter(None)
            )
        except Exception:
            traceback.print_exc()
    return time.perf_counter() - began


CANCEL_POLL_S = 0.1
"""How often a running job's worker looks for its ``Cancel``."""


class StdinLines:
    """The worker's stdin as lines, read from the descriptor by hand, so that a job's
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
    """While a job runs (``running``), looks at stdin every ``CANCEL_POLL_S`` for its ``Cancel``;
    inside ``armed`` (the job waiting for its child) a cancel raises ``KeyboardInterrupt`` there,
    once, which the job turns into killing its child. Other lines wait for the main loop."""

    def __init__(self, stdin: StdinLines, call_id: int) -> None:
        self.stdin = stdin
        self.call_id = call_id
        self.cancelled = False
        self._armed = False

    def _is_mine(self, line: bytes) -> bool:
        message = _decoded(line)
        return isinstance(message, Cancel) and message.id == self.call_id

    def _look(self, signum: int, frame: FrameType | None) -> None:
        if self.stdin.take_first(self._is_mine):
            self.cancelled = True
        if self.cancelled and self._armed:
            self._armed = False  # once: the job's cleanup must not be interrupted in turn
            raise KeyboardInterrupt("cancelled by the client")

    @contextlib.contextmanager
    def running(self) -> Iterator[None]:
        """Look for the cancel while the job runs (a timer: the worker has one thread)."""
        previous = signal.signal(signal.SIGALRM, self._look)
        # native code reading a file is not cut short by the timer (its call restarts); the wait
        # for the child (select) is never restarted, so a cancel still ends it
        signal.siginterrupt(signal.SIGALRM, False)
        signal.setitimer(signal.ITIMER_REAL, CANCEL_POLL_S, CANCEL_POLL_S)
        try:
            yield
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)

    @contextlib.contextmanager
    def armed(self) -> Iterator[None]:
        """Where a cancel may interrupt the job: while it waits for its child."""
        if self.cancelled:
            raise KeyboardInterrupt("cancelled by the client")
        self._armed = True
        try:
            yield
        finally:
            self._armed = False


def _decoded(line: bytes) -> object:
    try:
        return CODEC.decode_to_worker(line)
    except ProtocolError:
        return None


def answer(line: bytes, protocol_fd: int, stdin: StdinLines) -> bytes | None:
    """The protocol line answering ``line``: the job's ``Result``, or a ``Failure`` saying why (a
    request that does not follow the schema names the field, and runs nothing); ``None`` for a
    ``Cancel`` or a line without a readable id. The job's ``Cancel`` is looked for on ``stdin``
    while it runs."""
    try:
        message = CODEC.decode_to_worker(line)
    except ProtocolError as error:
        print(f"tilelang-mcp worker: {error}", file=sys.stderr)
        request_id = message_id(line)
        return encode(Failure(id=request_id, error=str(error))) if request_id is not None else None
    if isinstance(message, Cancel):
        return None  # its job has ended already
    return encode(handle(message, protocol_fd, stdin))


def handle(call: Call[JobRequest], protocol_fd: int, stdin: StdinLines) -> Result | Failure:
    from tilelang_mcp.backend import IrtraceError, JobError, describe_job_error, run_job

    watch = CancelWatch(stdin, call.id)
    try:
        with watch.running():
            body = run_job(call.request, (protocol_fd,), watch.armed)
        return Result(id=call.id, body=raw(body), rss_mb=resident_mb())
    except (JobError, IrtraceError) as error:
        if watch.cancelled:
            return Failure(id=call.id, error="cancelled by the client", cancelled=True)
        return Failure(id=call.id, error=describe_job_error(error))
    except Exception as error:  # a bug of ours: say what it was, keep serving
        traceback.print_exc()
        return Failure(id=call.id, error=f"internal error in the worker: {type(error).__name__}: {error}")


def main() -> None:
    protocol_fd = os.dup(1)
    protocol = os.fdopen(protocol_fd, "wb")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    started = time.perf_counter()
    try:
        import tilelang
    except Exception as error:
        print(
            f"tilelang-mcp worker: cannot import tilelang: {type(error).__name__}: {error}", file=sys.stderr
        )
        sys.exit(1)
    import_s = time.perf_counter() - started
    warmup_s = warm_up()  # before Ready: every job's child is forked warm
    folder = os.path.dirname(tilelang.__file__ or "")
    version = str(getattr(tilelang, "__version__", "?"))
    ready = Ready(
        pid=os.getpid(), import_s=import_s, prefix=sys.prefix, tilelang=folder, tilelang_version=version
    )
    send(protocol, encode(ready))
    send(protocol, encode(Warm(warmup_s=warmup_s)))
    stdin = StdinLines(sys.stdin.fileno())
    for line in stdin:
        reply = answer(line, protocol_fd, stdin)
        if reply is not None:
            send(protocol, reply)
    # nothing is left to flush: skip the interpreter's slow teardown of tilelang and TVM
    os._exit(0)


if __name__ == "__main__":
    main()
