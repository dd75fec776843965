"""A kernel's measured latency and resources, compared and written for people: the noise rule
``irtrace check`` gates latency with, and the lines ``irtrace show``, passviz and the report print.
No tilelang here.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from irtrace.perf.occupancy import Occupancy, function_occupancy, launch_threads
from irtrace.trace.resources import BenchResult, KernelResources, format_bytes


@dataclass(frozen=True)
class LatencyChange:
    """A kernel's median latency in the baseline and in the new trace, with each one's repetitions.

    A slowdown is *outside the noise* when the new run's fastest repetition is slower than the
    baseline's slowest: the two sets of repetitions do not overlap, so no choice of one sample from
    each could show the new kernel as fast as the old. With fewer than two repetitions on either
    side there is no spread to judge by (``outside_noise`` is ``None``) and the median alone counts.
    """

    baseline_ms: float
    new_ms: float
    baseline_samples: tuple[float, ...] = ()
    new_samples: tuple[float, ...] = ()

    @property
    def percent(self) -> float:
        """Growth of the median, in percent of the baseline's (negative: faster)."""
        if self.baseline_ms <= 0:
            return 0.0 if self.new_ms <= 0 else math.inf
        return (self.new_ms - self.baseline_ms) / self.baseline_ms * 100

    @property
    def outside_noise(self) -> bool | None:
        """Every new repetition is slower than every baseline one; ``None`` without spreads."""
        if len(self.baseline_samples) < 2 or len(self.new_samples) < 2:
            return None
        return min(self.new_samples) > max(self.baseline_samples)

    def regressed(self, threshold_percent: float) -> bool:
        """Slower by more than ``threshold_percent`` and outside the noise (when it is measured)."""
        return self.percent > threshold_percent and self.outside_noise is not False

    def describe(self) -> str:
        """``0.362 ms -> 0.401 ms (+10.8%)`` with each side's range when measured."""
        sign = "+" if self.percent >= 0 else ""
        change = "inf" if math.isinf(self.percent) else f"{sign}{self.percent:.1f}%"
        before = _ms(self.baseline_ms, self.baseline_samples)
        return f"{before} -> {_ms(self.new_ms, self.new_samples)} ({change})"


def latency_change(baseline: BenchResult | None, new: BenchResult | None) -> LatencyChange | None:
    """The change between two measurements that both succeeded; ``None`` otherwise."""
    if baseline is None or new is None or baseline.latency_ms is None or new.latency_ms is None:
        return None
    return LatencyChange(baseline.latency_ms, new.latency_ms, baseline.samples_ms, new.samples_ms)


def _unit(value_ms: float) -> tuple[float, str, int]:
    """Microseconds under a millisecond, else milliseconds: (scale, unit, decimals)."""
    return (1000.0, "µs", 1) if value_ms < 1 else (1.0, "ms", 3)


def _ms(median_ms: float, samples: Sequence[float] = ()) -> str:
    """``362.1 µs`` or, with repetitions, ``362.1 µs [360.0–371.2]`` (their range)."""
    scale, unit, places = _unit(median_ms)
    text = f"{median_ms * scale:.{places}f} {unit}"
    if len(samples) >= 2:
        text += f" [{min(samples) * scale:.{places}f}–{max(samples) * scale:.{places}f}]"
    return text


def latency_text(bench: BenchResult) -> str:
    """``362.1 µs median, 360.0–371.2 over 5 repetitions, on NVIDIA H200`` or why it failed."""
    if bench.latency_ms is None:
        return "failed" + (
            f": {bench.error.strip().splitlines()[0]}" if bench.error and bench.error.strip() else ""
        )
    scale, unit, places = _unit(bench.latency_ms)
    text = f"{bench.latency_ms * scale:.{places}f} {unit} median"
    spread = bench.spread_ms
    if spread is not None:
        low, high = spread
        text += (
            f", {low * scale:.{places}f}–{high * scale:.{places}f} over {len(bench.samples_ms)} repetitions"
        )
    if bench.device:
        text += f", on {bench.device}"
    if bench.shape:
        text += " (" + ", ".join(f"{name}={size}" for name, size in bench.shape.items()) + ")"
    return text


def latency_cell(bench: BenchResult | None) -> str:
    """A table cell: the median with the range of repetitions, ``failed`` or ``-``."""
    if bench is None:
        return "-"
    if bench.latency_ms is None:
        return "failed"
    return _ms(bench.latency_ms, bench.samples_ms)


def resource_lines(resources: Sequence[KernelResources], source: str | None) -> list[str]:
    """One line per kernel function: ptxas's numbers, threads per block and occupancy."""
    occupancies = function_occupancy(resources, source)
    threads = launch_threads(source) if source else {}
    lines = []
    for item in resources:
        dynamic = "symbolic" if item.dynamic_smem is None else format_bytes(item.dynamic_smem)
        line = (
            f"{item.function} ({item.arch}): {item.registers} registers, "
            f"spills {item.spill_stores} B stored / {item.spill_loads} B loaded, "
            f"smem {format_bytes(item.static_smem)} static + {dynamic} dynamic, "
            f"{item.barriers} barriers, {item.stack} B stack"
        )
        if item.function in threads:
            line += f", {threads[item.function]} threads"
        found = occupancies.get(item.function)
        lines.append(line + (f", {found.describe()}" if found is not None else ""))
    return lines


def lowest_occupancy(resources: Sequence[KernelResources], source: str | None) -> Occupancy | None:
    """The lowest occupancy of a run's kernel functions (the one a table has room for)."""
    known = [found for found in function_occupancy(resources, source).values() if found is not None]
    return min(known, key=lambda found: found.fraction, default=None)
