"""``get_ir``: the IR after (or before) one pass, or the final kernel source, as printed."""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec
from msgspec import Meta

from tilelang_mcp import backend, fields
from tilelang_mcp.answers import DEFAULT_LINES, Answer, PageInfo, page
from tilelang_mcp.fields import Kernel, Limit, Offset, OptionalSpec, Target, Timeout, TraceRef
from tilelang_mcp.session import Session

NAME = "get_ir"
DESCRIPTION = (
    "The IR after (or before) one pass of a lowering, or its final kernel source, exactly as the "
    "pipeline printed it; long texts come in pages (offset/limit)."
)


class Arguments(fields.Arguments, frozen=True, kw_only=True):
    """Which pass of which lowering, and which page of its text."""

    pass_name: Annotated[
        str,
        Meta(
            description="Pass as NAME or NAME#N (the Nth time it ran), e.g. tl.LayoutInference; "
            "`source` for the final kernel source."
        ),
    ]
    trace: TraceRef = None
    spec: OptionalSpec = None
    target: Target = None
    kernel: Kernel = None
    side: Annotated[
        Literal["after", "before"], Meta(description="The IR after the pass, or the IR it received.")
    ] = "after"
    offset: Offset = 0
    limit: Limit = DEFAULT_LINES
    timeout_s: Timeout = None


class Result(PageInfo, frozen=True, kw_only=True):
    """A page of the IR (or source) text, and whose it is."""

    trace: str
    kernel: str
    target: str
    pass_: str = msgspec.field(name="pass")
    """The pass's label (``NAME#N``), or ``source``."""
    side: str
    text: str


async def handle(context: Session, arguments: Arguments) -> Answer[Result]:
    """A page of one pass's IR text."""
    side = arguments.side
    trace_id, loaded = await context.trace_or_spec(
        arguments.trace, arguments.spec, arguments.target, arguments.timeout_s
    )
    run = context.run_of(loaded, arguments.kernel, arguments.target)
    label, text = backend.find_ir(loaded, run, arguments.pass_name, side)
    how = f"call get_ir(trace={trace_id!r}, kernel={run.kernel!r}, target={run.target!r}, pass_name={label!r}"
    shown, info = page(
        text, arguments.offset, arguments.limit, how + (", side='before')" if side == "before" else ")")
    )
    result = Result(
        trace=trace_id,
        kernel=run.kernel,
        target=run.target,
        pass_=label,
        side=side,
        **msgspec.structs.asdict(info),
        text=shown,
    )
    where = "kernel source" if label == backend.SOURCE else f"IR {side} {label}"
    summary = f"{where} of {run.kernel} on {run.target} (trace {trace_id})"
    if info.note:
        summary += f"; {info.note}"
    return Answer(summary, result, shown)
