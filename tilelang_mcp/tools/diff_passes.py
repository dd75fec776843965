"""``diff_passes``: what a span of passes did together, as a unified diff."""

from __future__ import annotations

from typing import Annotated

import msgspec
from msgspec import Meta

from tilelang_mcp import backend, fields
from tilelang_mcp.answers import DEFAULT_LINES, Answer, PageInfo, page
from tilelang_mcp.fields import (
    Context,
    Kernel,
    Limit,
    Normalize,
    Offset,
    OptionalSpec,
    Target,
    Timeout,
    TraceRef,
)
from tilelang_mcp.session import Session

NAME = "diff_passes"
DESCRIPTION = (
    "What the passes from_pass through to_pass did together: the IR before from_pass against the "
    "IR after to_pass, as a unified diff (paged with offset/limit)."
)


class Arguments(fields.Arguments, frozen=True, kw_only=True):
    """Which passes of which lowering, and which page of the diff."""

    from_pass: Annotated[str, Meta(description="First pass, NAME or NAME#N.")]
    to_pass: Annotated[
        str | None, Meta(description="Last pass (default: from_pass, i.e. what that one pass did).")
    ] = None
    trace: TraceRef = None
    spec: OptionalSpec = None
    target: Target = None
    kernel: Kernel = None
    normalize: Normalize = True
    context: Context = 3
    offset: Offset = 0
    limit: Limit = DEFAULT_LINES
    timeout_s: Timeout = None


class Result(PageInfo, frozen=True, kw_only=True):
    """A page of the diff, and its counts."""

    trace: str
    kernel: str
    target: str
    from_pass: str
    to_pass: str
    equal: bool
    added: int
    """Lines the span added."""
    removed: int
    diff: str


async def handle(context: Session, arguments: Arguments) -> Answer[Result]:
    """A page of the diff across the passes."""
    from_pass, offset, limit = arguments.from_pass, arguments.offset, arguments.limit
    trace_id, loaded = await context.trace_or_spec(
        arguments.trace, arguments.spec, arguments.target, arguments.timeout_s
    )
    run = context.run_of(loaded, arguments.kernel, arguments.target)
    last = arguments.to_pass or from_pass
    diff = backend.pass_span_diff(loaded, run, from_pass, last, arguments.normalize)
    text = diff.unified(f"before {from_pass}", f"after {last}", arguments.context)
    how = (
        f"call diff_passes(trace={trace_id!r}, kernel={run.kernel!r}, target={run.target!r}, "
        f"from_pass={from_pass!r}, to_pass={last!r})"
    )
    shown, info = page(text, offset, limit, how)
    result = Result(
        trace=trace_id,
        kernel=run.kernel,
        target=run.target,
        from_pass=from_pass,
        to_pass=last,
        equal=diff.is_empty,
        added=diff.added,
        removed=diff.removed,
        **msgspec.structs.asdict(info),
        diff=shown,
    )
    summary = f"{run.kernel} on {run.target}: {from_pass}..{last} " + (
        "changed nothing" if diff.is_empty else f"+{diff.added} -{diff.removed} lines"
    )
    return Answer(summary, result, shown or "(no change)")
