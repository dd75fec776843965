"""``machine_code``: a kernel's CUDA source compiled with nvcc, and what ptxas reports per kernel
function (and, with ``bench``, its latency on the GPU)."""

from __future__ import annotations

from typing import Annotated

import msgspec
from msgspec import Meta

from irtrace.targets.backends import DEFAULT_TARGET
from tilelang_mcp import backend, fields
from tilelang_mcp.answers import Answer
from tilelang_mcp.fields import Configs, RunSummary, Spec, Timeout
from tilelang_mcp.session import Session

NAME = "machine_code"
DESCRIPTION = (
    "Compile a kernel's CUDA source with nvcc (ptxas -v) and report per kernel function its "
    "registers, spilled bytes, static and dynamic shared memory, barriers and stack; with bench, "
    "its measured latency on the GPU."
)


class Arguments(fields.Arguments, frozen=True, kw_only=True):
    """Which kernel, for which CUDA target, and whether to measure it."""

    spec: Spec
    target: Annotated[str, Meta(description="A CUDA target, e.g. cuda:sm_90a.")] = DEFAULT_TARGET
    bench: Annotated[
        bool, Meta(description="Also launch the kernel and measure its latency (needs a CUDA GPU).")
    ] = False
    pass_configs: Configs = None
    timeout_s: Timeout = None


class Result(msgspec.Struct, frozen=True, kw_only=True):
    """The session trace and its runs, each with ``resources`` (and ``bench``)."""

    trace: str
    stopped: str | None
    """Why the job stopped early (its child was killed); ``None`` when it finished."""
    runs: list[RunSummary]


async def handle(context: Session, arguments: Arguments) -> Answer[Result]:
    """Record with machine code and read each run's resources."""
    trace_id, trace, recorded = await context.record(
        arguments.spec,
        [arguments.target],
        arguments.pass_configs,
        arguments.timeout_s,
        machine_code=True,
        bench=arguments.bench,
    )
    stopped = recorded.stopped
    runs = [fields.run_summary(backend.run_summary(trace, run)) for run in trace.runs]
    lines = []
    for run, summary in zip(trace.runs, runs, strict=True):
        lines.append(fields.run_line(summary))
        lines.extend(f"  {text}" for text in backend.resource_lines(run))
        if run.status == "ok" and not run.resources:
            lines.append("  no machine code: only CUDA targets are compiled with nvcc")
    if stopped:
        lines.append(f"stopped early: {stopped}")
    return Answer("\n".join(lines), Result(trace=trace_id, stopped=stopped, runs=runs))
