"""The analysis worker: ``python -m tilelang_lsp.worker``, one long-lived process per server.

It imports tilelang once, warms up with a small kernel and answers the messages of
``tilelang_lsp.protocol``, one JSON object per line on stdin and stdout: each ``Call`` gets a
``Result`` or a ``Failure``; a ``Cancel`` asks a call to stop after the pass it is in; ``Ready``
(tilelang imported), ``Warm`` and ``Progress`` (before each kernel is built) are events. A request
that does not follow the protocol is answered with a ``Failure`` saying which field is wrong.
tilelang's own prints go to stderr: stdout carries only the protocol.

The server starts the worker as the leader of a new session and process group. When its stdin
closes (the server stopped it, exited, or was killed, even by SIGKILL) the worker kills its
whole process group, itself included, so nothing a kernel file forked outlives the server.
"""

from __future__ import annotations

import os
import queue
import signal
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path
from typing import IO

import msgspec

from irtrace.core.targets import DEFAULT_TARGET
from irtrace.core.worker_protocol import resident_mb
from tilelang_lsp.protocol import (
    Analyze,
    Call,
    Cancel,
    Failure,
    IrAfterPass,
    LineMaps,
    Progress,
    ProtocolError,
    Ready,
    Result,
    Trace,
    TraceResult,
    Warm,
    WorkerRequest,
    decode_to_worker,
    encode,
    message_id,
    raw,
)

IDLE_BEFORE_WARMUP_S = 0.05
"""How long the worker waits for a first request before lowering its warm-up kernel."""


class Worker:
    """Reads requests on a thread (so cancellations arrive while analyzing) and runs them in order."""

    def __init__(self, out: IO[bytes]) -> None:
        self.out = out
        self.lock = threading.Lock()
        self.requests: queue.Queue[Call[WorkerRequest] | None] = queue.Queue()
        self.cancelled: set[int] = set()
        self.current: int | None = None

    def send(self, message: msgspec.Struct) -> None:
        with self.lock:
            self.out.write(encode(message))
            self.out.flush()

    def read(self, stream: IO[bytes]) -> None:
        for line in stream:
            if not line.strip():
                continue
            try:
                message = decode_to_worker(line)
            except ProtocolError as error:
                print(f"tilelang-lsp worker: {error}", file=sys.stderr)
                request_id = message_id(line)
                if request_id is not None:
                    self.send(Failure(id=request_id, error=str(error)))
                continue
            if isinstance(message, Cancel):
                self.cancelled.add(message.id)
            else:
                self.requests.put(message)
        end_process_group()
        self.requests.put(None)

    def run(self) -> None:
        started = time.perf_counter()
        import tilelang  # the slow import, once

        from irtrace.recording.resolve.entry_point import warm_meta_tensors

        # before Ready, so that no request's time limit pays it: entry-point runs use meta tensors,
        # and PyTorch imports torch._dynamo on the first meta operation (1-6 s)
        warm_meta_tensors()
        import_s = time.perf_counter() - started
        default = os.environ.get("TILELANG_LSP_WARMUP_TARGET", DEFAULT_TARGET)
        self.send(
            Ready(
                pid=os.getpid(),
                import_s=import_s,
                prefix=sys.prefix,
                tilelang=os.path.dirname(tilelang.__file__ or ""),
            )
        )
        warm = False
        while True:
            try:
                # Warm up only while idle: a request already waiting warms the process itself.
                message = self.requests.get(timeout=IDLE_BEFORE_WARMUP_S if not warm else None)
            except queue.Empty:
                warm = True
                self.send(Warm(warmup_s=self.warm_up(default)))
                continue
            if message is None:
                return
            warm = True
            self.handle(message)

    def warm_up(self, target: str) -> float:
        """Lower a tiny GEMM once: the first lowering in a process costs about a second more."""
        from irtrace.recording.warmup import WARMUP_KERNEL
        from tilelang_lsp.worker.analysis import analyze

        began = time.perf_counter()
        with tempfile.TemporaryDirectory() as folder:
            try:
                analyze(
                    Analyze(
                        path=str(Path(folder) / "tilelang_lsp_warmup.py"),
                        text=WARMUP_KERNEL,
                        default_target=target,
                    )
                )
            except Exception:
                traceback.print_exc()
        return time.perf_counter() - began

    def handle(self, call: Call[WorkerRequest]) -> None:
        request_id = call.id
        self.current = request_id
        try:
            if request_id in self.cancelled:
                raise _cancelled()
            body = self.dispatch(request_id, call.request)
            self.send(Result(id=request_id, body=raw(body), rss_mb=resident_mb()))
        except Exception as error:
            from tilelang_lsp.worker.analysis import Cancelled

            cancelled = isinstance(error, Cancelled)
            if not cancelled:
                traceback.print_exc()
            self.send(Failure(id=request_id, error=str(error), cancelled=cancelled, rss_mb=resident_mb()))
        finally:
            self.cancelled.discard(request_id)
            self.current = None

    def dispatch(self, request_id: int, request: WorkerRequest) -> msgspec.Struct:
        """Run one request: the analysis gets it whole (``AnalysisJob``), with this call's
        cancellation and progress."""
        from tilelang_lsp.worker import analysis

        def should_stop() -> bool:
            return request_id in self.cancelled

        def on_kernel(name: str, line: int) -> None:
            self.send(Progress(request=request_id, kernel=name, line=line))

        if isinstance(request, IrAfterPass):
            return analysis.ir_after_pass(request)
        if isinstance(request, LineMaps):
            from tilelang_lsp.worker.source_lines import source_lines

            return source_lines(request, should_stop)
        result = analysis.analyze(
            analysis.AnalysisJob.of(request, should_stop=should_stop, on_kernel=on_kernel)
        )
        if isinstance(request, Trace):
            return TraceResult(output=request.output, kernels=result.kernels)
        return result


def end_process_group() -> None:
    """SIGKILL the worker's process group, itself included, when the worker leads its own session
    (the server starts it so). Started by hand, it may lead a shell job's group: that is left alone."""
    if os.getsid(0) == os.getpid():
        os.killpg(0, signal.SIGKILL)


def _cancelled() -> Exception:
    from tilelang_lsp.worker.analysis import Cancelled

    return Cancelled("cancelled before it started")


def main() -> None:
    """Keep the protocol on the original stdout; everything else printed goes to stderr."""
    protocol = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    worker = Worker(protocol)
    reader = threading.Thread(target=worker.read, args=(sys.stdin.buffer,), daemon=True)
    reader.start()
    worker.run()
