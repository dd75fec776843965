"""``source_line_ir``: what a line of the kernel's file became after each pass, from a lowering
with source maps; the answer is worked out by ``tilelang_mcp.line_tool`` in a child under the
job's limits, and comes back bounded."""

from __future__ import annotations

import functools
from typing import Annotated

import anyio
import msgspec
from msgspec import UNSET, Meta, UnsetType

from tilelang_mcp import backend, fields, line_tool
from tilelang_mcp.answers import Answer
from tilelang_mcp.fields import Kernel, OptionalSpec, Target, Timeout, TraceRef
from tilelang_mcp.session import Session, ToolError

NAME = "source_line_ir"
DESCRIPTION = (
    "The IR lines a line of the kernel's file (a T.gemm, T.copy call) became after each pass, from a "
    "lowering with source maps: `spec` lowers it so, or give a `trace` recorded with them."
)


class Arguments(fields.Arguments, frozen=True, kw_only=True):
    """Which line of which lowering, after which pass."""

    line: Annotated[
        int, Meta(ge=1, description="Line of the kernel's Python file (1-based), e.g. a T.gemm call's.")
    ]
    spec: OptionalSpec = None
    trace: TraceRef = None
    target: Target = None
    kernel: Kernel = None
    pass_name: Annotated[
        str | None,
        Meta(description="Only after this pass (NAME or NAME#N), e.g. tl.LowerTileOp; default every pass."),
    ] = None
    timeout_s: Timeout = None
    machine_code: Annotated[
        bool,
        Meta(
            description="With `spec` on a CUDA target: also compile the kernel with nvcc, so the answer "
            "holds the SASS instructions the line became, by class (machine_code); about 5-20 s more."
        ),
    ] = False


class LineGroup(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Consecutive passes that print the line's statements the same."""

    first: str
    first_index: int
    last: str
    last_index: int
    ir: str | None
    """The hash of the IR text after ``first`` in the trace."""
    ir_lines: list[int]
    """1-based lines of that IR text printing statements that carry the line's span."""
    carried: list[int] = []
    """Of ``ir_lines``, those whose statement has no span of the line but is provably its: carried
    over a pass that dropped its span, or inside a block of the line (docs/source-maps.md, "Carried
    lines")."""
    owned: list[int] = []
    """Of ``carried``, those inside a block of the line, not carried over a pass."""
    used_by: list[int] = []
    """For a line that made no statement of its own but binds a value (``tx =
    T.get_thread_binding()``), or whose bind this pass inlined (``inlined``): the lines reading
    that value, whose IR ``ir_lines`` are."""
    inlined: bool = False
    """Whether ``used_by`` stands for a bind of the line that a pass inlined into its readers
    (``s = ko % 3`` printed as ``A_shared[ko % 3, ...]``): the line has no IR line of its own here."""
    text: list[str]


class GeneratedLines(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The lines of generated code (kernel source, PTX, SASS) the line became."""

    lines: list[int]
    text: list[str]


class Result(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The ``irtrace-line/1`` document (``irtrace ir TRACE --line N --json``) and its trace."""

    trace: str
    format: str
    kernel: str
    target: str
    line: str
    passes: list[LineGroup]
    source: GeneratedLines | UnsetType = UNSET
    ptx: GeneratedLines | UnsetType = UNSET
    sass: GeneratedLines | UnsetType = UNSET
    machine_code: dict[str, int] | UnsetType = UNSET
    """The SASS instructions the line became, by class (``mma``, ``global``, ``shared``,
    ``barrier``, ``other``, ``total``), for a run recorded with machine code."""
    note: str | UnsetType = UNSET
    """Said when the groups were cut."""


async def handle(context: Session, arguments: Arguments) -> Answer[Result]:
    """Lower with source maps (or load the trace) and follow the line."""
    trace, spec, target, line = arguments.trace, arguments.spec, arguments.target, arguments.line
    if (trace is None) == (spec is None):
        raise ToolError("give either `trace` (recorded with source maps) or `spec` (a kernel to lower)")
    if spec is not None:
        file = context.config.roots.check(backend.spec_file(spec), "kernel file")
        line_tool.check_line(file, line)
        targets = [target] if target else []
        trace_id, _, _ = await context.record(
            spec, targets, None, arguments.timeout_s, source_map=True, machine_code=arguments.machine_code
        )
        path = context.traces[trace_id].path
    else:
        assert trace is not None
        trace_id, path = trace, context.trace_path(trace)
    # the answer is worked out in a child under the job's limits: the server relays it
    query = {"line": line, "kernel": arguments.kernel, "target": target, "pass_name": arguments.pass_name}
    config = context.config
    answer = functools.partial(
        line_tool.answer_in_child, path, trace_id, query, config.memory_mb, config.timeout_s
    )
    summary, data = await anyio.to_thread.run_sync(answer)
    return Answer(summary, msgspec.convert(data, type=Result))
