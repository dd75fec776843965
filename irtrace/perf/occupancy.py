"""Theoretical occupancy of a CUDA kernel function: how many warps of its blocks one SM holds at
once, given its registers per thread, shared memory per block and threads per block, against the
architecture's limits. It follows the CUDA runtime's own calculation (``cuda_occupancy.h``:
registers allocated per warp in units of 256 and per sub-partition, shared memory in units of 128
bytes plus 1 KiB the driver reserves per block from sm_80 on), assuming the largest shared-memory
carveout. No tilelang here: the inputs are ptxas's numbers and the kernel source.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from irtrace.trace.resources import KernelResources

WARP_SIZE = 32
REGISTERS_PER_SM = 64 * 1024
"""32-bit registers per SM, and the most one block may use, on every architecture from sm_70 on."""
REGISTER_UNIT = 256
"""Registers are allocated to a warp in multiples of this."""
SUB_PARTITIONS = 4
"""An SM's register file is split in four; a warp's registers come from one quarter."""
MAX_REGISTERS_PER_THREAD = 255
MAX_THREADS_PER_BLOCK = 1024


@dataclass(frozen=True)
class ArchLimits:
    """What one SM of a compute capability holds (the CUDA Programming Guide's technical
    specifications; block limits and allocation units as ``cuda_occupancy.h`` of CUDA 13 has them)."""

    max_warps: int
    """Resident warps per SM (resident threads / 32)."""
    max_blocks: int
    """Resident blocks per SM."""
    smem_per_sm: int
    """Bytes of shared memory per SM with the largest carveout."""
    smem_per_block: int
    """The most shared memory one block may use (opt-in), in bytes."""
    smem_unit: int
    """Shared memory is allocated to a block in multiples of this."""
    reserved_smem: int
    """Bytes the driver reserves in every block's shared memory (sm_80 on)."""


_KIB = 1024
_VOLTA = ArchLimits(64, 32, 96 * _KIB, 96 * _KIB, 256, 0)
_AMPERE_DC = ArchLimits(64, 32, 164 * _KIB, 163 * _KIB, 128, _KIB)
_HOPPER = ArchLimits(64, 32, 228 * _KIB, 227 * _KIB, 128, _KIB)

ARCH_LIMITS: Mapping[str, ArchLimits] = {
    "sm_70": _VOLTA,
    "sm_72": _VOLTA,
    "sm_75": ArchLimits(32, 16, 64 * _KIB, 64 * _KIB, 256, 0),
    "sm_80": _AMPERE_DC,
    "sm_86": ArchLimits(48, 16, 100 * _KIB, 99 * _KIB, 128, _KIB),
    "sm_87": ArchLimits(48, 16, 164 * _KIB, 163 * _KIB, 128, _KIB),
    "sm_89": ArchLimits(48, 24, 100 * _KIB, 99 * _KIB, 128, _KIB),
    "sm_90": _HOPPER,
    "sm_100": _HOPPER,
    "sm_103": _HOPPER,
    "sm_110": ArchLimits(48, 24, 228 * _KIB, 227 * _KIB, 128, _KIB),
    "sm_120": ArchLimits(48, 24, 100 * _KIB, 99 * _KIB, 128, _KIB),
    "sm_121": ArchLimits(48, 24, 100 * _KIB, 99 * _KIB, 128, _KIB),
}
"""Per compute capability; ``sm_90a``/``sm_100f`` share their base's row (feature suffixes change
instructions, not the SM's size)."""

_ARCH = re.compile(r"(sm_\d+)[a-z]?\Z")


def arch_limits(arch: str) -> ArchLimits | None:
    """The limits of ``sm_90a`` (as ptxas names it), or ``None`` for an architecture not in the table."""
    match = _ARCH.match(arch.strip())
    return ARCH_LIMITS.get(match.group(1)) if match else None


@dataclass(frozen=True)
class Occupancy:
    """How many of a kernel function's blocks fit on one SM, and what stops more."""

    blocks: int
    """Resident blocks per SM (0: the block cannot launch)."""
    warps: int
    """Resident warps per SM."""
    max_warps: int
    limiter: str
    """``warps``, ``blocks``, ``registers`` or ``shared memory``: the limit reached first."""

    @property
    def fraction(self) -> float:
        """Resident warps over the SM's maximum (0 to 1)."""
        return self.warps / self.max_warps

    def describe(self) -> str:
        """``occupancy 25% (2 blocks of 4 warps, limited by registers)``."""
        if self.blocks == 0:
            return f"occupancy 0% (a block does not fit: too many {self.limiter})"
        per_block = self.warps // self.blocks
        return (
            f"occupancy {self.fraction:.0%} ({self.blocks} block{'s' if self.blocks != 1 else ''} "
            f"of {per_block} warp{'s' if per_block != 1 else ''}, limited by {self.limiter})"
        )


def _round_up(value: int, unit: int) -> int:
    return -(-value // unit) * unit


def occupancy(limits: ArchLimits, registers: int, smem: int, threads: int) -> Occupancy:
    """Theoretical occupancy of blocks of ``threads`` threads using ``registers`` per thread and
    ``smem`` bytes of shared memory (static and dynamic) each."""
    warps_per_block = -(-threads // WARP_SIZE)
    caps: dict[str, int] = {
        "warps": limits.max_warps // warps_per_block if threads <= MAX_THREADS_PER_BLOCK else 0,
        "blocks": limits.max_blocks,
    }
    per_warp = _round_up(max(registers, 1) * WARP_SIZE, REGISTER_UNIT)
    # The hardware checks a block's registers as if its warps filled all four sub-partitions alike.
    fits = registers <= MAX_REGISTERS_PER_THREAD and (
        per_warp * _round_up(warps_per_block, SUB_PARTITIONS) <= REGISTERS_PER_SM
    )
    warps_by_registers = (REGISTERS_PER_SM // SUB_PARTITIONS // per_warp) * SUB_PARTITIONS
    caps["registers"] = warps_by_registers // warps_per_block if fits else 0
    allocated = _round_up(smem + limits.reserved_smem, limits.smem_unit)
    if allocated > 0:  # the driver's reserved KiB counts even for a block with no shared memory
        too_big = allocated > limits.smem_per_block + limits.reserved_smem
        caps["shared memory"] = 0 if too_big else limits.smem_per_sm // allocated
    limiter = min(caps, key=lambda name: caps[name])  # first of equals: warps before blocks before ...
    blocks = caps[limiter]
    return Occupancy(blocks, blocks * warps_per_block, limits.max_warps, limiter)


_LAUNCH_BOUNDS = re.compile(r"__launch_bounds__\(\s*(\d+)[^)]*\)\s*(\w+)\s*\(")


def launch_threads(source: str) -> dict[str, int]:
    """Threads per block of each kernel function, from the ``__launch_bounds__(N, ...)`` TileLang's
    CUDA code generator writes on every ``__global__`` function."""
    return {match.group(2): int(match.group(1)) for match in _LAUNCH_BOUNDS.finditer(source)}


def function_occupancy(
    resources: Sequence[KernelResources], source: str | None
) -> dict[str, Occupancy | None]:
    """Occupancy per kernel function: ``None`` where the arch is not in the table, the threads per
    block are unknown (no source) or the dynamic shared memory is symbolic."""
    threads = launch_threads(source) if source else {}
    found: dict[str, Occupancy | None] = {}
    for item in resources:
        limits = arch_limits(item.arch)
        count = threads.get(item.function)
        if limits is None or count is None or item.dynamic_smem is None:
            found[item.function] = None
        else:
            found[item.function] = occupancy(limits, item.registers, item.smem, count)
    return found
