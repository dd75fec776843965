"""The analysis worker: ``python -m tilelang_lsp.worker``, one long-lived process per server.

It imports tilelang once, warms up with a small kernel and answers line-delimited JSON on stdin
and stdout. Requests are ``{"id": 1, "method": "analyze", "params": {...}}``; answers are
``{"id": 1, "result": {...}, "rss_mb": 812}`` or ``{"id": 1, "error": "...", "cancelled": false}``.
``{"cancel": 1}`` asks request 1 to stop after the pass it is in. Events without an id:
``{"event": "ready", ...}`` once warm, ``{"event": "progress", "request": 1, "kernel": ..., "line": ...}``
before each kernel is built. tilelang's own prints go to stderr: stdout carries only the protocol.

The server starts the worker as the leader of a new session and process group. When its stdin
closes (the server stopped it, exited, or was killed, even by SIGKILL) the worker kills its
whole process group, itself included, so nothing a kernel file forked outlives the server.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path
from typing import IO, Any

WARMUP_KERNEL = """
import tilelang.language as T


def warmup(M=64, N=64, K=32):
    @T.prim_func
    def main(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16), C: T.Tensor((M, N), T.float16)):
        with T.Kernel(1, 1, threads=128) as (bx, by):
            A_s = T.alloc_shared((M, K), T.float16)
            B_s = T.alloc_shared((K, N), T.float16)
            C_f = T.alloc_fragment((M, N), T.float32)
            T.clear(C_f)
            T.copy(A, A_s)
            T.copy(B, B_s)
            T.gemm(A_s, B_s, C_f)
            T.copy(C_f, C)

    return main
"""


def _rss_mb() -> float:
    try:
        with open("/proc/self/statm") as statm:
            pages = int(statm.read().split()[1])
        return pages * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, ValueError):
        import resource

        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


IDLE_BEFORE_WARMUP_S = 0.05
"""How long the worker waits for a first request before lowering its warm-up kernel."""


class Worker:
    """Reads requests on a thread (so cancellations arrive while analyzing) and runs them in order."""

    def __init__(self, out: IO[str]) -> None:
        self.out = out
        self.lock = threading.Lock()
        self.requests: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self.cancelled: set[int] = set()
        self.current: int | None = None

    def send(self, message: dict[str, Any]) -> None:
        with self.lock:
            self.out.write(json.dumps(message) + "\n")
            self.out.flush()

    def read(self, stream: IO[str]) -> None:
        for line in stream:
            try:
                message = json.loads(line)
            except json.JSONDecodeError:
                continue
            if "cancel" in message:
                self.cancelled.add(int(message["cancel"]))
            else:
                self.requests.put(message)
        end_process_group()
        self.requests.put(None)

    def run(self) -> None:
        started = time.perf_counter()
        import tilelang  # the slow import, once

        import_s = time.perf_counter() - started
        default = os.environ.get("TILELANG_LSP_WARMUP_TARGET", "cuda:sm_90")
        self.send(
            {
                "event": "ready",
                "pid": os.getpid(),
                "import_s": import_s,
                "warmup_s": None,
                "prefix": sys.prefix,
                "tilelang": os.path.dirname(tilelang.__file__ or ""),
            }
        )
        warm = False
        while True:
            try:
                # Warm up only while idle: a request already waiting warms the process itself.
                message = self.requests.get(timeout=None if warm else IDLE_BEFORE_WARMUP_S)
            except queue.Empty:
                warm = True
                self.send({"event": "warm", "warmup_s": self.warm_up(default)})
                continue
            if message is None:
                return
            warm = True
            self.handle(message)

    def warm_up(self, target: str) -> float:
        """Lower a tiny GEMM once: the first lowering in a process costs about a second more."""
        from tilelang_lsp.analysis import analyze

        began = time.perf_counter()
        with tempfile.TemporaryDirectory() as folder:
            try:
                analyze(str(Path(folder) / "tilelang_lsp_warmup.py"), WARMUP_KERNEL, default_target=target)
            except Exception:
                traceback.print_exc()
        return time.perf_counter() - began

    def handle(self, message: dict[str, Any]) -> None:
        request_id = int(message.get("id", -1))
        method = message.get("method")
        params = message.get("params") or {}
        self.current = request_id
        try:
            if request_id in self.cancelled:
                raise _cancelled()
            result = self.dispatch(request_id, method, params)
            self.send({"id": request_id, "result": result, "rss_mb": _rss_mb()})
        except Exception as error:
            from tilelang_lsp.analysis import Cancelled

            cancelled = isinstance(error, Cancelled)
            if not cancelled:
                traceback.print_exc()
            self.send({"id": request_id, "error": str(error), "cancelled": cancelled, "rss_mb": _rss_mb()})
        finally:
            self.cancelled.discard(request_id)
            self.current = None

    def dispatch(self, request_id: int, method: Any, params: dict[str, Any]) -> Any:
        from tilelang_lsp import analysis

        def should_stop() -> bool:
            return request_id in self.cancelled

        def on_kernel(name: str, line: int) -> None:
            self.send({"event": "progress", "request": request_id, "kernel": name, "line": line})

        if method == "analyze":
            return analysis.analyze(
                params["path"],
                params["text"],
                default_target=params.get("default_target", "cuda:sm_90"),
                override_target=params.get("target"),
                full=bool(params.get("full", False)),
                race_check=bool(params.get("race_check", True)),
                should_stop=should_stop,
                on_kernel=on_kernel,
            )
        if method == "trace":
            result = analysis.analyze(
                params["path"],
                params["text"],
                default_target=params.get("default_target", "cuda:sm_90"),
                override_target=params.get("target"),
                full=True,
                kernels_only=[params["kernel"]],
                trace_path=params["output"],
                on_kernel=on_kernel,
            )
            return {"output": params["output"], "kernels": result["kernels"]}
        if method == "irAfterPass":
            return analysis.ir_after_pass(
                params["path"],
                params["text"],
                params["kernel"],
                params["pass"],
                default_target=params.get("default_target", "cuda:sm_90"),
                target=params.get("target"),
            )
        raise ValueError(f"unknown worker method {method!r}")


def end_process_group() -> None:
    """SIGKILL the worker's process group, itself included, when the worker leads its own session
    (the server starts it so). Started by hand, it may lead a shell job's group: that is left alone."""
    if os.getsid(0) == os.getpid():
        os.killpg(0, signal.SIGKILL)


def _cancelled() -> Exception:
    from tilelang_lsp.analysis import Cancelled

    return Cancelled("cancelled before it started")


def main() -> None:
    """Keep the protocol on the original stdout; everything else printed goes to stderr."""
    protocol = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    worker = Worker(protocol)
    reader = threading.Thread(target=worker.read, args=(sys.stdin,), daemon=True)
    reader.start()
    worker.run()


if __name__ == "__main__":
    main()
