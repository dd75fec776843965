"""``buffer_facts``: a kernel's buffers after layout inference, as the language server's hover
shows them."""

from __future__ import annotations

from typing import Annotated

import msgspec
from msgspec import Meta

from irtrace.facts.buffer_facts import BufferFact
from tilelang_mcp import fields
from tilelang_mcp.answers import Answer
from tilelang_mcp.fields import Instance, Spec, Target, Timeout
from tilelang_mcp.protocol import Facts
from tilelang_mcp.session import Session

NAME = "buffer_facts"
DESCRIPTION = (
    "The buffers of a kernel as the compiler sees them after layout inference (as the language "
    "server's hover shows): shape, allocated shape (pipeline stages), dtype, scope, inferred layout "
    "(fragment threads and elements per thread, or the swizzle) and bytes."
)


class Arguments(fields.Arguments, frozen=True, kw_only=True):
    """Which kernel, which line's buffers, which target."""

    spec: Spec
    line: Annotated[
        Annotated[int, Meta(ge=1)] | None,
        Meta(description="Source line (1-based) to report buffers of; all when omitted."),
    ] = None
    target: Target = None
    timeout_s: Timeout = None


class KernelFacts(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One kernel of the spec, lowered up to layout inference, and its buffers."""

    kernel: str
    spec: str
    instance: Instance
    target: str
    stop_pass: str
    """The layout-inference pass the lowering stops after."""
    reached: bool
    error: str | None
    """Why it did not reach ``stop_pass``."""
    buffers: list[BufferFact]


class Result(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Each kernel of the spec and its buffers."""

    kernels: list[KernelFacts]


async def handle(context: Session, arguments: Arguments) -> Answer[Result]:
    """The worker's facts job, one line per buffer."""
    line = arguments.line
    answer = await context.job(
        Facts, arguments.spec, arguments.timeout_s, target=context.target(arguments.target), line=line
    )
    result = msgspec.convert(answer, type=Result)
    lines = []
    for kernel in result.kernels:
        head = f"{kernel.kernel} on {kernel.target}"
        if not kernel.reached:
            head += f": did not reach {kernel.stop_pass}: {kernel.error}"
        lines.append(head)
        lines.extend(f"  {_buffer_line(buffer)}" for buffer in kernel.buffers)
    if line is not None and not any(kernel.buffers for kernel in result.kernels):
        lines.append(f"no buffer is declared on line {line}")
    return Answer("\n".join(lines), result)


def _buffer_line(buffer: BufferFact) -> str:
    shape = "[" + ", ".join(str(d) for d in buffer.shape) + "]"
    allocated = buffer.allocated_shape
    if len(allocated) == len(buffer.shape) + 1 and allocated[1:] == buffer.shape:
        shape += f" x{allocated[0]}"
    text = f"{buffer.name} {shape} {buffer.dtype} {buffer.scope}"
    if buffer.layout_short:
        text += f" · {buffer.layout_short}"
    if buffer.line:
        text += f" (line {buffer.line})"
    return text
