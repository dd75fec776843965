"""``lower_kernel``: a kernel through TileLang's real pipeline for one or more targets, into a
session trace the other tools read."""

from __future__ import annotations

from typing import Annotated, Any

import msgspec
from msgspec import UNSET, Meta, UnsetType

from tilelang_mcp import backend, fields
from tilelang_mcp.answers import MAX_STRING_CHARS, Answer, page
from tilelang_mcp.fields import Configs, Instance, PassRow, RunSummary, Spec, Targets, Timeout
from tilelang_mcp.session import Session

NAME = "lower_kernel"
DESCRIPTION = (
    "Lower a kernel through TileLang's real pipeline for one or more targets. Returns each run's "
    "status, time and pass counts, and for one target (or pass_list=true) its passes with their "
    "time, whether they changed the IR and +/- lines; for a failure, the failing pass, its error "
    "and the IR it received. Returns a trace id for get_ir, diff_passes and check_trace."
)
FAILURE_IR_LINES = 60
"""Lines of a failing pass's input shown in the answer."""
MAX_PASS_ROWS = 400
"""Pass rows one answer lists in all; past it the rows are cut, with a note."""


class Arguments(fields.Arguments, frozen=True, kw_only=True):
    """What to lower, for which targets."""

    spec: Spec
    targets: Targets = None
    pass_configs: Configs = None
    timeout_s: Timeout = None
    pass_list: Annotated[
        bool | None,
        Meta(
            description="List each run's passes (time, changed, +/- lines). Default: only when "
            "one run was lowered; for several targets each run is a one-line summary."
        ),
    ] = None


class ReceivedInfo(msgspec.Struct, frozen=True, kw_only=True):
    """Which lines of the failing pass's input the run shows; only the note (the ``get_ir``
    call that shows it) when the passes are not listed."""

    offset: int | UnsetType = UNSET
    lines: int | UnsetType = UNSET
    total_lines: int | UnsetType = UNSET
    complete: bool | UnsetType = UNSET
    note: str | UnsetType = UNSET


class LoweredRun(RunSummary, frozen=True, kw_only=True):
    """A run's summary, its instance, and its passes when they are listed."""

    instance: Instance | UnsetType = UNSET
    pass_list: list[PassRow] | UnsetType = UNSET
    pass_list_note: str | UnsetType = UNSET
    ir_received: str | UnsetType = UNSET
    """The first lines of the IR a failing pass received."""
    ir_received_info: ReceivedInfo | UnsetType = UNSET


class Result(msgspec.Struct, frozen=True, kw_only=True):
    """The session trace and its runs."""

    trace: str
    """The trace id (``t1``) the other tools take."""
    resource: str
    """The trace as a resource, ``trace://t1``."""
    stopped: str | None
    """Why the job stopped early (its child was killed); ``None`` when it finished."""
    runs: list[LoweredRun]
    pass_list_note: str | UnsetType = UNSET


async def handle(context: Session, arguments: Arguments) -> Answer[Result]:
    """Record the kernel for its targets and summarize every run."""
    trace_id, trace, recorded = await context.record(
        arguments.spec, arguments.targets or [], arguments.pass_configs, arguments.timeout_s
    )
    stopped = recorded.stopped
    instances = {(found.kernel, found.target): found for found in recorded.instances}
    runs = []
    lines = []
    rows_left = MAX_PASS_ROWS
    listed = arguments.pass_list if arguments.pass_list is not None else len(trace.runs) == 1
    for run in trace.runs:
        data: dict[str, Any] = backend.run_summary(trace, run)
        instance = instances.get((run.kernel, run.target))
        if instance is not None:  # the resolver's words, as the language server's hover says them
            data["instance"] = backend.instance_document(instance)
        if listed:
            rows = backend.pass_rows(trace, run)
            data["pass_list"] = rows[:rows_left]
            if len(rows) > rows_left:
                data["pass_list_note"] = (
                    f"{len(rows) - rows_left} more passes not listed; call lower_kernel for fewer targets"
                )
            rows_left = max(0, rows_left - len(rows))
        received = backend.failure_input(trace, run)
        if received is not None:
            label, text = received
            ask = (
                f"call get_ir(trace={trace_id!r}, kernel={run.kernel!r}, target={run.target!r}, "
                f"pass_name={label!r}, side='before')"
            )
            if listed:
                shown, info = page(text, 0, FAILURE_IR_LINES, ask, max_chars=MAX_STRING_CHARS // 2)
                data["ir_received"] = shown
                data["ir_received_info"] = msgspec.to_builtins(info)
            else:
                data["ir_received_info"] = {"note": f"the IR it received: {ask}"}
        runs.append(msgspec.convert(data, type=LoweredRun))
        lines.append(fields.run_line(runs[-1]))
        if instance is not None:
            lines.append(f"  analyzed `{instance.call}`: arguments from {instance.origin}")
    if stopped:
        lines.append(f"stopped early: {stopped}")
    note: str | UnsetType = UNSET
    if not listed:
        note = (
            f"{len(runs)} runs, so their passes are not listed: call lower_kernel again with "
            f"pass_list=true or with one target, or get_ir(trace={trace_id!r}, target=..., pass_name=...)"
        )
        lines.append(note)
    result = Result(
        trace=trace_id, resource=f"trace://{trace_id}", stopped=stopped, runs=runs, pass_list_note=note
    )
    return Answer("\n".join([*lines, f"trace {trace_id} (resource trace://{trace_id})"]), result)
