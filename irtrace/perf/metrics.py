"""Per-kernel numbers kernel authors watch, read from a trace alone: IR size, shared memory, syncs,
barriers, and registers and spills where the trace holds them.

Everything but registers and spills is read from the device module codegen received (the IR
the run's ``codegen`` step started from) and from the kernel source. Counts are static: a sync
inside a loop counts once.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, fields

from irtrace.trace.model import PHASE_CODEGEN, KernelRun, PassRecord, Trace

SYNC_OPS = frozenset(
    {
        "tvm_storage_sync",
        "syncthreads_and",
        "syncthreads_or",
        "syncthreads_count",
        "sync_warp",
        "sync_grid",
        "cluster_sync",
        "pdl_sync",
        "ascend_pipe_barrier",
    }
)
"""Ops that make a group of threads (or an Ascend core's pipelines) wait for each other:
``__syncthreads()``, ``threadgroup_barrier``, ``s_barrier``, ``pipe_barrier`` in the source."""

SHARED_SCOPE = re.compile(r"shared(\.[\w.]+)?\Z")
_CALL = re.compile(r"\bT\.(\w+)\(")
_ALLOC = re.compile(r"\bT\.(?:sblock_)?alloc_buffer\((?P<args>[^\n]*)")
_SHAPE = re.compile(r"\((?P<shape>[^()]*)\),?\s*(?:\"(?P<dtype>\w+)\")?")
_SCOPE = re.compile(r"scope=\"(?P<scope>[\w.]+)\"")
_DTYPE_BITS = re.compile(r"[a-z_]*?(?P<bits>\d+)(?:_\w+)?(?:x(?P<lanes>\d+))?\Z")


@dataclass(frozen=True)
class KernelMetrics:
    """One run's numbers; ``None`` where the trace does not say (a run that failed before codegen)."""

    ir_lines: int | None = None
    """Lines of the device module codegen received."""
    source_lines: int | None = None
    """Lines of the final kernel source."""
    shared_bytes: int | None = None
    """Bytes of shared memory the device module allocates (``shared``, ``shared.dyn``,
    ``shared.barrier`` scopes); ``None`` when an allocation has a symbolic size."""
    syncs: int | None = None
    """Calls that synchronize a thread block (``tvm_storage_sync`` and the other ``SYNC_OPS``)."""
    barriers: int | None = None
    """Calls on memory barriers (mbarrier init, arrive, wait, expect-tx; named barriers)."""
    registers: int | None = None
    """Registers per thread (the most of its kernel functions), with ``--machine-code``."""
    spill_bytes: int | None = None
    """Bytes per thread spilled to local memory (stores and loads), with ``--machine-code``."""

    def as_dict(self) -> dict[str, int | None]:
        return {item.name: getattr(self, item.name) for item in fields(self)}


METRIC_NAMES: tuple[str, ...] = tuple(item.name for item in fields(KernelMetrics))
METRIC_TITLES: Mapping[str, str] = {
    "ir_lines": "IR lines",
    "source_lines": "source lines",
    "shared_bytes": "shared memory (bytes)",
    "syncs": "syncs",
    "barriers": "barrier ops",
    "registers": "registers",
    "spill_bytes": "spills (bytes)",
}


def codegen_input(run: KernelRun) -> PassRecord | None:
    """The run's top-level codegen step, whose input is the finished device module."""
    return next((p for p in run.passes if p.phase == PHASE_CODEGEN and p.depth == 0), None)


def run_metrics(trace: Trace, run: KernelRun) -> KernelMetrics:
    """The numbers of one run; a run that never reached codegen has only what it has."""
    step = codegen_input(run)
    device = trace.text(step.ir_before) if step is not None and step.ir_before else None
    source = trace.kernel_source(run)
    registers, spills = _resources(run)
    if device is None:
        return KernelMetrics(
            source_lines=_lines(source) if source is not None else None,
            registers=registers,
            spill_bytes=spills,
        )
    calls = [match.group(1) for match in _CALL.finditer(device)]
    return KernelMetrics(
        ir_lines=_lines(device),
        source_lines=_lines(source) if source is not None else None,
        shared_bytes=shared_bytes(device),
        syncs=sum(name in SYNC_OPS for name in calls),
        barriers=sum("barrier" in name and name not in SYNC_OPS for name in calls),
        registers=registers,
        spill_bytes=spills,
    )


def _lines(text: str) -> int:
    return len(text.splitlines())


def shared_bytes(ir_text: str) -> int | None:
    """Bytes of every shared-scope ``alloc_buffer`` in a TVMScript module; ``None`` if one is symbolic."""
    total = 0
    for match in _ALLOC.finditer(ir_text):
        args = match.group("args")
        scope = _SCOPE.search(args)
        if scope is None or not SHARED_SCOPE.match(scope.group("scope")):
            continue
        shape = _SHAPE.match(args)
        dims = [dim.strip() for dim in shape.group("shape").split(",")] if shape else ["?"]
        if not all(dim.isdigit() for dim in dims if dim):
            return None
        size = dtype_bytes((shape.group("dtype") if shape else None) or "float32")
        for dim in filter(None, dims):
            size *= int(dim)
        total += size
    return total


def dtype_bytes(dtype: str) -> int:
    """Bytes one element takes, as TVM counts allocations: whole bytes per lane (``bool`` is 1)."""
    if dtype == "bool":
        return 1
    if dtype == "handle":
        return 8
    match = _DTYPE_BITS.match(dtype)
    if match is None:
        return 4
    lanes = int(match.group("lanes") or 1)
    return math.ceil(int(match.group("bits")) / 8) * lanes


def _resources(run: KernelRun) -> tuple[int | None, int | None]:
    """Registers (the most any kernel function uses) and spilled bytes per thread (all functions),
    from the assembler's report that ``irtrace record --machine-code`` keeps."""
    if not run.resources:
        return None, None
    return max(r.registers for r in run.resources), sum(r.spills for r in run.resources)
