"""What a CUDA run became past its kernel source: resource usage per kernel function (from
ptxas) and the kernel's measured latency. Plain records; ``irtrace.lowering.machine_code`` makes them,
``irtrace.trace.model`` stores them (``machine`` and ``bench`` records). No tilelang here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

RESOURCE_COUNTS = (
    "registers",
    "spill_stores",
    "spill_loads",
    "static_smem",
    "barriers",
    "stack",
)
"""The integer fields of ``KernelResources`` that ptxas reports (``dynamic_smem`` may be null)."""


@dataclass(frozen=True)
class KernelResources:
    """What one kernel function of a run uses, as ``ptxas -v`` reports it."""

    function: str
    """The kernel function (``gemm_kernel``)."""
    arch: str
    """The architecture ptxas compiled it for (``sm_90a``)."""
    registers: int
    """Registers per thread."""
    spill_stores: int
    """Bytes per thread stored to local memory because registers ran out."""
    spill_loads: int
    """Bytes per thread loaded back from those spills."""
    static_smem: int
    """Bytes of static shared memory (``__shared__`` arrays, barriers, alignment padding)."""
    dynamic_smem: int | None
    """Bytes of dynamic shared memory TileLang launches the kernel with (``dyn_shared_memory_buf``);
    ``None`` when it is symbolic."""
    barriers: int
    """Named barriers (``bar.sync`` ids) the kernel uses."""
    stack: int
    """Bytes of stack frame per thread."""

    @property
    def smem(self) -> int:
        """Shared memory one block needs: static plus dynamic (dynamic counted 0 when symbolic)."""
        return self.static_smem + (self.dynamic_smem or 0)

    @property
    def spills(self) -> int:
        """Spilled bytes per thread, stores and loads together."""
        return self.spill_stores + self.spill_loads

    def to_json(self) -> dict[str, Any]:
        """The record's JSON object (the function name is its key in ``resources``)."""
        data: dict[str, Any] = {"arch": self.arch}
        for name in RESOURCE_COUNTS:
            data[name] = getattr(self, name)
        data["dynamic_smem"] = self.dynamic_smem
        return data


def resources_to_json(resources: Iterable[KernelResources]) -> dict[str, dict[str, Any]]:
    """``{function: {arch, registers, ...}}`` in the order of the functions."""
    return {item.function: item.to_json() for item in resources}


@dataclass(frozen=True)
class BenchResult:
    """The compiled kernel's latency on a GPU, measured by TileLang's profiler on random inputs."""

    latency_ms: float | None
    """Mean latency of one launch in milliseconds; ``None`` when the benchmark failed."""
    device: str
    """The GPU it ran on (``NVIDIA H200``)."""
    source_sha256: str | None = None
    """SHA-256 of the kernel source that was measured (the run's own, unless lowering differed)."""
    backend: str = ""
    """TileLang's execution backend that launched it (``tvm_ffi``, ``cython``)."""
    warmup: int = 0
    """Milliseconds of warm-up launches before timing (TileLang's ``do_bench(warmup=...)``)."""
    repeat: int = 0
    """Milliseconds of timed launches (``do_bench(rep=...)``)."""
    error: str | None = None
    """Why the benchmark failed."""
    samples_ms: tuple[float, ...] = ()
    """Each repetition's mean launch latency; ``latency_ms`` is their median, their range the noise."""
    shape: Mapping[str, int] = field(default_factory=dict)
    """The size bound to each symbolic dimension for the measurement."""
    shape_from: str = ""
    """``--bench-shape``, ``manifest``, ``captured`` or ``""`` (no symbolic dimension)."""
    driver: str = ""
    """The NVIDIA driver version."""
    clocks_mhz: Mapping[str, int] = field(default_factory=dict)
    """The GPU's clocks when measured (``sm``, ``memory``, ``sm_max``)."""

    @property
    def spread_ms(self) -> tuple[float, float] | None:
        """The fastest and slowest repetition, or ``None`` with fewer than two."""
        if len(self.samples_ms) < 2:
            return None
        return min(self.samples_ms), max(self.samples_ms)

    def to_json(self) -> dict[str, Any]:
        return {
            "latency_ms": self.latency_ms,
            "device": self.device,
            "source_sha256": self.source_sha256,
            "backend": self.backend,
            "warmup": self.warmup,
            "repeat": self.repeat,
            "error": self.error,
            "samples_ms": list(self.samples_ms),
            "shape": dict(self.shape),
            "shape_from": self.shape_from,
            "driver": self.driver,
            "clocks_mhz": dict(self.clocks_mhz),
        }


def format_bytes(count: int | None) -> str:
    """``48.0 KiB``, ``512 B``; ``?`` when unknown."""
    if count is None:
        return "?"
    if count < 1024:
        return f"{count} B"
    return f"{count / 1024:.1f} KiB"


def resource_summary(resources: Sequence[KernelResources]) -> str:
    """``regs 240 · spills 0 · smem 49.0 KiB`` for one kernel function; the worst of several
    (most registers, most spilled bytes, most shared memory), as a lens has room for one line."""
    if not resources:
        return ""
    registers = max(item.registers for item in resources)
    spills = max(item.spills for item in resources)
    smem = max(item.smem for item in resources)
    symbolic = any(item.dynamic_smem is None for item in resources)
    text = f"regs {registers} · spills {spills} · smem {format_bytes(smem)}"
    return text + " + symbolic" if symbolic else text
