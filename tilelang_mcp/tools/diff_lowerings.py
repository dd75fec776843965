"""``diff_lowerings``: two lowerings of a kernel (two targets, two pass configs, two specs)
aligned by the pipeline's structure, and where they first part."""

from __future__ import annotations

from typing import Annotated, Any

import msgspec
from msgspec import UNSET, Meta, UnsetType

from tilelang_mcp import backend, fields
from tilelang_mcp.answers import DEFAULT_LINES, Answer, PageInfo, page
from tilelang_mcp.fields import Configs, Context, Kernel, Limit, Normalize, Offset, RunSummary, Spec, Timeout
from tilelang_mcp.session import Session, ToolError

NAME = "diff_lowerings"
DESCRIPTION = (
    "Two lowerings compared pass by pass (two targets, two pass configs, or two specs): the first "
    "pass where their IR parts, the diff right after it, passes only one ran, and whether the "
    "kernel sources differ."
)


class Arguments(fields.Arguments, frozen=True, kw_only=True):
    """Lowering A (``spec`` on ``target_a`` with ``pass_configs_a``), what B changes, and how to
    show the diff."""

    spec: Spec
    target_a: Annotated[
        str | None, Meta(description="Target of lowering A (default: the kernel dialect's default).")
    ] = None
    target_b: Annotated[str | None, Meta(description="Target of lowering B (default target_a).")] = None
    pass_configs_a: Configs = None
    pass_configs_b: Configs = None
    spec_b: Annotated[
        Annotated[str, Meta(max_length=backend.MAX_SPEC_CHARS)] | None,
        Meta(description="Another spec for B (other arguments, another file); default spec."),
    ] = None
    kernel: Kernel = None
    normalize: Normalize = True
    context: Context = 3
    offset: Offset = 0
    limit: Limit = DEFAULT_LINES
    timeout_s: Timeout = None


class FirstDifference(msgspec.Struct, frozen=True, kw_only=True):
    """The first pass after which the two lowerings print different IR."""

    pass_a: str | None
    pass_b: str | None
    status: str
    """``changed``, or ``only_a`` / ``only_b`` for a pass one lowering ran alone."""
    input_differs: bool
    """Whether the IR the pass received already differed."""
    compared_with: str | None


class SourceChange(msgspec.Struct, frozen=True, kw_only=True):
    """Whether the final kernel sources differ, in lines."""

    equal: bool
    added: int
    removed: int


class Result(msgspec.Struct, frozen=True, kw_only=True):
    """The two lowerings (each a session trace) and where they part."""

    trace_a: str
    trace_b: str
    a: RunSummary
    b: RunSummary
    different: bool
    first_difference: FirstDifference | None
    passes_only_a: list[str]
    passes_only_b: list[str]
    passes_moved: list[str]
    notes: list[str]
    source: SourceChange | UnsetType = UNSET
    diff: str | UnsetType = UNSET
    """A page of the diff right after the first difference."""
    diff_info: PageInfo | UnsetType = UNSET


async def handle(context: Session, arguments: Arguments) -> Answer[Result]:
    """Lower A and B, align them and diff them where they first part."""
    spec, spec_b, kernel = arguments.spec, arguments.spec_b, arguments.kernel
    target_a, target_b = arguments.target_a, arguments.target_b
    if target_b is None and arguments.pass_configs_b is None and spec_b is None:
        raise ToolError("give what B changes: target_b, pass_configs_b or spec_b")
    targets_a = [target_a] if target_a else []
    targets_b = [target_b] if target_b else targets_a
    timeout_s = arguments.timeout_s
    trace_a_id, trace_a, _ = await context.record(spec, targets_a, arguments.pass_configs_a, timeout_s)
    trace_b_id, trace_b, _ = await context.record(
        spec_b or spec, targets_b, arguments.pass_configs_b, timeout_s
    )
    run_a = context.run_of(trace_a, kernel, target_a)
    run_b = context.run_of(trace_b, kernel if spec_b is None else None, target_b or target_a)
    comparison = backend.compare_lowerings(trace_a, run_a, trace_b, run_b, arguments.normalize)
    first = comparison.first_difference
    source: SourceChange | UnsetType = UNSET
    if comparison.source_diff is not None:
        source = SourceChange(
            equal=comparison.source_diff.is_empty,
            added=comparison.source_diff.added,
            removed=comparison.source_diff.removed,
        )
    difference = None
    shown = ""
    diff: str | UnsetType = UNSET
    diff_info: PageInfo | UnsetType = UNSET
    if first is not None:
        difference = FirstDifference(
            pass_a=first.label_a,
            pass_b=first.label_b,
            status=first.status,
            input_differs=comparison.input_differs,
            compared_with=comparison.compared_with_label,
        )
        if comparison.diff is not None:
            text = comparison.diff.unified(
                f"a/{first.label_a or comparison.compared_with_label}",
                f"b/{first.label_b or comparison.compared_with_label}",
                arguments.context,
            )
            shown, diff_info = page(
                text, arguments.offset, arguments.limit, "call diff_lowerings again with the same arguments"
            )
            diff = shown
    result = Result(
        trace_a=trace_a_id,
        trace_b=trace_b_id,
        a=fields.run_summary(backend.run_summary(trace_a, run_a)),
        b=fields.run_summary(backend.run_summary(trace_b, run_b)),
        different=comparison.different,
        first_difference=difference,
        passes_only_a=list(comparison.removed_passes),
        passes_only_b=list(comparison.added_passes),
        passes_moved=list(comparison.moved_passes),
        notes=list(comparison.notes),
        source=source,
        diff=diff,
        diff_info=diff_info,
    )
    if first is None:
        summary = "the two lowerings print the same IR after every pass they share"
    else:
        label = first.label_a or first.label_b
        only = {"only_a": " (only A ran it)", "only_b": " (only B ran it)"}.get(first.status, "")
        cause = "; its input already differed" if comparison.input_differs else ""
        summary = f"IR first differs after {label}{only}{cause}"
    if not isinstance(source, UnsetType):
        summary += "; kernel sources " + ("are equal" if source.equal else "differ")
    data: dict[str, Any] = msgspec.to_builtins(result)
    return Answer(
        summary, result, backend.dump({k: v for k, v in data.items() if k != "diff"}) + "\n" + shown
    )
