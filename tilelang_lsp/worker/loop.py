"""The analysis worker: ``python -m tilelang_lsp.worker``, one long-lived process per server.

It runs the runtime both servers' workers share (``irtrace.edge.worker_runtime``: protocol on a
copy of stdout, ``Ready``/``Warm``, one cancel path, the process group killed when stdin closes)
with the language server's requests (``tilelang_lsp.protocol``) and a handler for each, below.
A new request is a ``Request`` subtype in the protocol and one handler here. ``Progress`` events
say which kernel a call starts building; a ``Cancel`` stops a call after the pass it is in.
"""

from __future__ import annotations

import os
import traceback
from typing import Any

import msgspec

from irtrace.edge.worker_runtime import CallContext, CallFailed, Handler, WorkerRuntime
from irtrace.targets.backends import DEFAULT_TARGET
from tilelang_lsp.protocol import (
    CODEC,
    Analyze,
    IrAfterPass,
    LineMaps,
    Request,
    Trace,
    TraceResult,
    WorkerRequest,
)


def _analysis_job(request: Analyze | Trace, context: CallContext) -> Any:
    from tilelang_lsp.worker.analysis import AnalysisJob

    return AnalysisJob.of(request, should_stop=context.should_stop, on_kernel=context.progress)


def analyze(request: Analyze, context: CallContext) -> msgspec.Struct:
    """The document's kernels up to layout inference (or fully lowered, ``full``)."""
    from tilelang_lsp.worker.analysis import analyze

    return analyze(_analysis_job(request, context))


def trace(request: Trace, context: CallContext) -> TraceResult:
    """Record the document's kernels into a trace file (``tilelang.trace``)."""
    from tilelang_lsp.worker.analysis import analyze

    return TraceResult(output=request.output, kernels=analyze(_analysis_job(request, context)).kernels)


def ir_after_pass(request: IrAfterPass, context: CallContext) -> msgspec.Struct:
    """One kernel's IR after one pass."""
    from tilelang_lsp.worker.analysis import ir_after_pass

    return ir_after_pass(request)


def line_maps(request: LineMaps, context: CallContext) -> msgspec.Struct:
    """What a source line became through the passes (the hover of a tile operation)."""
    from tilelang_lsp.worker.source_lines import source_lines

    return source_lines(request, context.should_stop)


HANDLERS: dict[type[Request], Handler[Any]] = {
    Analyze: analyze,
    Trace: trace,
    IrAfterPass: ir_after_pass,
    LineMaps: line_maps,
}


def _describe(error: Exception) -> CallFailed:
    """Every analysis error is reported with its message (and its traceback on stderr); a cancel
    as cancelled."""
    from tilelang_lsp.worker.analysis import Cancelled

    cancelled = isinstance(error, Cancelled)
    if not cancelled:
        traceback.print_exc()
    return CallFailed(str(error), cancelled=cancelled)


RUNTIME: WorkerRuntime[WorkerRequest] = WorkerRuntime(
    "tilelang-lsp worker", CODEC, HANDLERS, describe_error=_describe
)


def main() -> None:
    from irtrace.lowering.worker_start import prepare_process, warm_up

    target = os.environ.get("TILELANG_LSP_WARMUP_TARGET", DEFAULT_TARGET)
    RUNTIME.serve(prepare_process, lambda: warm_up(target), warm_before_ready=False)
