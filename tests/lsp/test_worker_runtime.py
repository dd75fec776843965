"""The language server's worker on the runtime both servers share (``irtrace.edge.worker_runtime``),
spoken to directly on its pipes: a cancelled analysis is answered as cancelled, the next one is
answered in full by the same process, and a malformed line fails only itself."""

from __future__ import annotations

import os
import select
import subprocess
import sys
import time

import msgspec

from irtrace.edge.worker_protocol import Call, Cancel, Failure, Ready, Result, decode_from_worker, encode
from tests.lsp.conftest import EXAMPLES
from tilelang_lsp.protocol import AnalysisResult, Analyze


def _next(worker: subprocess.Popen[bytes], timeout: float = 120) -> msgspec.Struct:
    """The next answer or event from the worker (``Warm`` and ``Progress`` included)."""
    assert worker.stdout is not None
    ready, _, _ = select.select([worker.stdout], [], [], timeout)
    assert ready, "the worker said nothing in time"
    return decode_from_worker(worker.stdout.readline())


def _answer(worker: subprocess.Popen[bytes], call_id: int) -> Result | Failure:
    while True:
        message = _next(worker)
        if isinstance(message, (Result, Failure)):
            assert message.id == call_id
            return message


def test_a_cancelled_analysis_ends_and_the_worker_serves_the_next() -> None:
    worker = subprocess.Popen(
        [sys.executable, "-m", "tilelang_lsp.worker"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        env={**os.environ, "TILELANG_LSP_WARMUP_TARGET": "cuda:sm_80"},
    )
    assert worker.stdin is not None
    try:
        assert isinstance(_next(worker), Ready)
        path = EXAMPLES / "gemm.py"
        request = Analyze(path=str(path), text=path.read_text())
        worker.stdin.write(encode(Call(id=1, request=request)) + encode(Cancel(id=1)))
        worker.stdin.write(b'{"kind": "call", "id": 2, "request": {"method": "analyze"}}\n')
        worker.stdin.write(encode(Call(id=3, request=request)))
        worker.stdin.flush()
        began = time.monotonic()
        cancelled = _answer(worker, 1)
        assert isinstance(cancelled, Failure) and cancelled.cancelled, cancelled
        assert time.monotonic() - began < 30
        malformed = _answer(worker, 2)
        assert isinstance(malformed, Failure) and not malformed.cancelled
        assert "missing required field `path`" in malformed.error
        done = _answer(worker, 3)
        assert isinstance(done, Result), done
        kernels = msgspec.json.decode(done.body, type=AnalysisResult).kernels
        assert [kernel.name for kernel in kernels] == ["matmul"] and kernels[0].buffers
    finally:
        worker.stdin.close()  # the runtime kills its process group when its input ends
        worker.wait(timeout=30)
