"""What several tools share: their argument fields (with the descriptions agents read in the
input schemas) and the records of their results (a run's summary, a pass row, an instance)."""

from __future__ import annotations

from typing import Annotated, Any

import msgspec
from msgspec import UNSET, Meta, UnsetType

from irtrace.targets.backends import DEFAULT_TARGET
from irtrace.trace.resources import BenchResult, KernelResources
from irtrace.trace.schema import LaunchSignature
from tilelang_mcp import backend
from tilelang_mcp.answers import MAX_LINES

# ----------------------------------------------------------------------------- arguments

Spec = Annotated[
    str,
    Meta(
        description="Kernel spec: path.py::factory(args), path.py::jit_kernel(kw=...), or path.py for its "
        "module-level PrimFuncs; path.py::name alone takes the arguments the project's irtrace.toml "
        "records. Relative paths start at the first allowed root.",
        max_length=backend.MAX_SPEC_CHARS,
    ),
]
OptionalSpec = Annotated[
    Annotated[str, Meta(max_length=backend.MAX_SPEC_CHARS)] | None,
    Meta(description="Kernel spec to lower first (instead of `trace`): path.py::factory(args)."),
]
TraceRef = Annotated[
    str | None,
    Meta(
        description="A trace this session recorded (`t1`, from lower_kernel) or a trace file under the roots."
    ),
]
Target = Annotated[
    str | None,
    Meta(
        description=f"Target, e.g. {DEFAULT_TARGET}, hip:gfx942, metal, ascend "
        f"(default: {DEFAULT_TARGET}, ascend for tilelang.ascend kernels)."
    ),
]
Targets = Annotated[
    list[str] | None,
    Meta(description=f"Targets to lower for (default: {DEFAULT_TARGET}, or ascend); `all` for every target."),
]
Configs = Annotated[
    dict[str, Any] | None,
    Meta(description='Pass configs on top of the kernel\'s own, e.g. {"tl.disable_warp_specialized": true}.'),
]
Kernel = Annotated[str | None, Meta(description="Kernel name, when the trace or spec holds several.")]
Timeout = Annotated[
    Annotated[float, Meta(gt=0)] | None,
    Meta(description="Seconds this call may take (at most the server's --timeout)."),
]
Offset = Annotated[int, Meta(ge=0, description="First line to return (0-based), to page through long texts.")]
Limit = Annotated[int, Meta(ge=1, le=MAX_LINES, description=f"Lines to return (at most {MAX_LINES}).")]
Normalize = Annotated[
    bool, Meta(description="Mask target JSON, object addresses and metadata indices before comparing.")
]
Context = Annotated[int, Meta(ge=0, le=50, description="Lines of context around each change.")]


class Arguments(msgspec.Struct, frozen=True, kw_only=True):
    """A tool's arguments: decoded from the call's JSON object through this schema; a field it
    does not know is ignored, as MCP clients may send more."""


# ----------------------------------------------------------------------------- results


class Instance(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The instance a kernel was lowered or analyzed with, in the resolver's words (the
    language server's hover)."""

    call: str
    """The call, ``matmul(1024, 1024, 1024, block_M=128)``."""
    origin: str
    """Where its arguments came from: ``__main__``, ``the spec``, ``defaults``, a directive, ..."""
    symbolic: list[str] | UnsetType = UNSET
    autotune: dict[str, str] | UnsetType = UNSET
    from_project: list[str] | UnsetType = UNSET
    instances: list[str] | UnsetType = UNSET


class PassRow(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One pass of a run: label, self time, whether it changed the IR, +/- lines."""

    pass_: str = msgspec.field(name="pass")
    """``NAME`` or ``NAME#N`` (the Nth time it ran)."""
    ms: float
    changed: bool
    lines: str | UnsetType = UNSET
    """``+A -R`` for a pass that changed the IR; the new stage's name where a new one begins."""
    depth: int | UnsetType = UNSET
    phase: str | UnsetType = UNSET
    failed: bool | UnsetType = UNSET


class RunSummary(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A run's header facts: status, time, pass counts, and where and why it failed."""

    kernel: str
    target: str
    spec: str
    status: str
    total_ms: float | None
    passes: int
    changed: int
    pass_configs: dict[str, Any]
    failed_pass: str | UnsetType | None = UNSET
    running: str | UnsetType | None = UNSET
    stopped_by: str | UnsetType | None = UNSET
    error: str | UnsetType | None = UNSET
    resources: list[KernelResources] | UnsetType = UNSET
    """Per kernel function, ptxas's counts (``irtrace record --machine-code``)."""
    bench: BenchResult | UnsetType = UNSET
    """The measured latency (``irtrace record --bench``)."""
    launches: list[LaunchSignature] | UnsetType = UNSET
    """What a captured program passed at launch, by distinct signature."""


def run_summary(data: dict[str, Any]) -> RunSummary:
    """``backend.run_summary``'s JSON as its record (a key it does not know is an error)."""
    return msgspec.convert(data, type=RunSummary)


def run_line(run: RunSummary) -> str:
    """A run's summary in one line: status, passes, time, and where and why it failed."""
    line = f"{run.kernel} on {run.target}: {run.status}"
    line += f", {run.passes} passes ({run.changed} changed)"
    if run.total_ms is not None:
        line += f" in {run.total_ms:g} ms"
    if run.status != "ok":
        where = run.failed_pass or run.running or "building the kernel"
        line += f"; failed in {where}: {run.error}"
    return line
