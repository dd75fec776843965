"""The lowering worker: ``python -m tilelang_mcp.worker``, one per server, restarted when it dies.

It runs the runtime both servers' workers share (``irtrace.edge.worker_runtime``: protocol on a
copy of stdout, ``Ready``/``Warm``, one cancel path, a ``Failure`` naming the field of a request
that does not follow the schema) with the MCP server's jobs (``tilelang_mcp.protocol``) as its
requests. Each job runs in a child forked for it (``backend.run_job``), so kernel code never runs
here and a hang or a crash ends only that child; a job's ``Cancel`` kills its child and the job is
answered as cancelled at once, the worker kept warm for the next one. It warms up before it says
``Ready``, so every child is forked warm.
"""

from __future__ import annotations

from typing import Any

from irtrace.edge.worker_runtime import CallContext, CallFailed, Handler, WorkerRuntime
from tilelang_mcp.protocol import CODEC, Diagnostics, Facts, JobRequest, Record

WARMUP_TARGET = "cuda:sm_90"


def run_job(request: JobRequest, context: CallContext) -> Any:
    """Any job: in a forked child under the request's limits (``backend.run_job``)."""
    from tilelang_mcp.backend import run_job

    return run_job(request, context.protocol_fds, context.interruptible)


HANDLERS: dict[type, Handler[Any]] = {Record: run_job, Facts: run_job, Diagnostics: run_job}


def _describe(error: Exception) -> CallFailed | None:
    """A job's expected errors, in the words ``describe_job_error`` gives them; others are bugs."""
    from tilelang_mcp.backend import IrtraceError, JobError, describe_job_error

    if isinstance(error, (JobError, IrtraceError)):
        return CallFailed(describe_job_error(error))
    return None


RUNTIME: WorkerRuntime[JobRequest] = WorkerRuntime(
    "tilelang-mcp worker", CODEC, HANDLERS, describe_error=_describe
)


def main() -> None:
    from irtrace.lowering.worker_start import prepare_process, warm_up

    RUNTIME.serve(prepare_process, lambda: warm_up(WARMUP_TARGET), warm_before_ready=True)


if __name__ == "__main__":
    main()
