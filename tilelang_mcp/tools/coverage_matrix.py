"""``coverage_matrix``: a kernel on every target, where it lowers and where not, failures grouped
by root cause."""

from __future__ import annotations

from typing import Annotated

import msgspec
from msgspec import Meta

from tilelang_mcp import backend, fields
from tilelang_mcp.answers import Answer
from tilelang_mcp.fields import Configs, Spec, Timeout
from tilelang_mcp.session import Session

NAME = "coverage_matrix"
DESCRIPTION = (
    "Lower a kernel for every target and say where it lowers and where not: one cell per kernel x "
    "target, failures grouped by root cause (failing pass and error)."
)


class Arguments(fields.Arguments, frozen=True, kw_only=True):
    """Which kernel, for which targets."""

    spec: Spec
    targets: Annotated[
        list[str] | None, Meta(description="Targets (default: all targets of the kernel's dialect).")
    ] = None
    pass_configs: Configs = None
    timeout_s: Timeout = None


class Cell(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One kernel on one target."""

    kernel: str
    target: str
    status: str
    """``ok``, ``failed`` or ``incomplete`` (the recording was cut short)."""
    failed_pass: str | None
    cause: int | None
    """The number of the cause, for failures."""
    lower_ms: float | None


class Pair(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    kernel: str
    target: str


class Cause(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One root cause of failures: a pass and an error headline, with where it struck."""

    number: int
    failed_pass: str | None
    """The innermost pass that failed; ``None`` when the kernel could not be built."""
    headline: str
    cells: list[Pair]


class Result(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The session trace and its matrix (``irtrace coverage --json``)."""

    trace: str
    stopped: str | None
    kernels: list[str]
    targets: list[str]
    cells: list[Cell]
    causes: list[Cause]


async def handle(context: Session, arguments: Arguments) -> Answer[Result]:
    """Record for every target and build the matrix."""
    trace_id, trace, recorded = await context.record(
        arguments.spec, arguments.targets or ["all"], arguments.pass_configs, arguments.timeout_s
    )
    stopped = recorded.stopped
    document, markdown = backend.coverage_document(trace)
    document = {"trace": trace_id, "stopped": stopped, **document}
    failures = sum(cell["status"] != "ok" for cell in document["cells"])
    summary = f"{len(document['cells']) - failures} ok, {failures} failed (trace {trace_id})"
    if stopped:
        summary += f"; stopped early: {stopped}"
    return Answer(summary, msgspec.convert(document, type=Result), markdown)
