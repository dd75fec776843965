"""The performance part of ``irtrace check``: one kernel x target's latency (``--bench``) and each
kernel function's registers, spills, shared memory and occupancy (``--machine-code``) in the
baseline and the new trace, and which changes the policy's ``[perf]`` thresholds fail.

Only numbers both traces hold are compared: a trace recorded without ``--bench`` or
``--machine-code`` gives no finding. ``docs/ci.md`` defines each rule.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

from irtrace.ci.policy import LATENCY, OCCUPANCY, REGISTERS, SMEM, SPILLS, Policy
from irtrace.perf.latency import LatencyChange, latency_change
from irtrace.perf.occupancy import Occupancy, function_occupancy
from irtrace.trace.model import KernelRun, Trace
from irtrace.trace.resources import BenchResult, KernelResources, format_bytes


class PerfFinding(NamedTuple):
    """A finding for ``irtrace.ci.check.Finding``: kind, one line, whether the policy fails it."""

    kind: str
    message: str
    gated: bool


@dataclass(frozen=True)
class FunctionResources:
    """One kernel function's resources and occupancy in both traces (``None``: not in that one)."""

    function: str
    baseline: KernelResources | None
    new: KernelResources | None
    baseline_occupancy: Occupancy | None = None
    new_occupancy: Occupancy | None = None


@dataclass(frozen=True)
class PerfCheck:
    """What ``--bench`` and ``--machine-code`` recorded for one kernel x target in both traces."""

    baseline_bench: BenchResult | None
    new_bench: BenchResult | None
    latency: LatencyChange | None
    """Both medians, when both benchmarks succeeded."""
    functions: tuple[FunctionResources, ...]
    comparable: str | None = None
    """Why the latencies are not compared (other GPUs, other shapes); ``None`` when they are."""


def perf_check(baseline: Trace, old: KernelRun, new: Trace, now: KernelRun) -> PerfCheck | None:
    """The numbers of both runs; ``None`` when neither trace has any."""
    if old.bench is None and now.bench is None and not old.resources and not now.resources:
        return None
    before = function_occupancy(old.resources, baseline.kernel_source(old) if old.resources else None)
    after = function_occupancy(now.resources, new.kernel_source(now) if now.resources else None)
    olds = {item.function: item for item in old.resources}
    news = {item.function: item for item in now.resources}
    names = list(olds) + [name for name in news if name not in olds]
    functions = tuple(
        FunctionResources(name, olds.get(name), news.get(name), before.get(name), after.get(name))
        for name in names
    )
    return PerfCheck(
        old.bench, now.bench, latency_change(old.bench, now.bench), functions, _why_not(old, now)
    )


def _why_not(old: KernelRun, now: KernelRun) -> str | None:
    if old.bench is None or now.bench is None:
        return None
    if old.bench.device and now.bench.device and old.bench.device != now.bench.device:
        return f"measured on different GPUs ({old.bench.device}, now {now.bench.device})"
    if dict(old.bench.shape) != dict(now.bench.shape):
        return f"measured at other sizes ({_shape(old.bench)}, now {_shape(now.bench)})"
    return None


def _shape(bench: BenchResult) -> str:
    return ", ".join(f"{name}={size}" for name, size in bench.shape.items()) or "static"


def perf_findings(check: PerfCheck, policy: Policy) -> list[PerfFinding]:
    """Latency, then per function registers, spills, shared memory and occupancy."""
    findings = _latency_findings(check, policy)
    for item in check.functions:
        findings += _function_findings(item, policy)
    return findings


def _latency_findings(check: PerfCheck, policy: Policy) -> list[PerfFinding]:
    old, now = check.baseline_bench, check.new_bench
    if old is None or now is None:
        return []
    if old.latency_ms is not None and now.latency_ms is None:
        error = (now.error or "no error recorded").strip().splitlines() or ["no error recorded"]
        return [PerfFinding(LATENCY, f"the benchmark fails now: {error[0]}", policy.fails(LATENCY))]
    if old.latency_ms is None and now.latency_ms is not None:
        return [PerfFinding(LATENCY, "benchmarked now; the baseline's benchmark failed", False)]
    change = check.latency
    if change is None:
        return []
    if check.comparable is not None:
        return [PerfFinding(LATENCY, f"latency {change.describe()}: not compared, {check.comparable}", False)]
    limit = policy.perf.latency_percent
    if abs(change.percent) <= limit:
        return []
    noise = change.outside_noise
    if change.percent < 0:
        return [PerfFinding(LATENCY, f"faster: latency {change.describe()}", False)]
    if noise is False:
        reason = "within the noise: the repetitions overlap"
    elif noise is None:
        reason = "outside the limit; no spread measured to judge noise by"
    else:
        reason = "outside the noise: the fastest new repetition is slower than the slowest baseline one"
    message = f"latency {change.describe()}; limit +{limit:g}%, {reason}"
    return [PerfFinding(LATENCY, message, policy.fails(LATENCY) and change.regressed(limit))]


def _function_findings(item: FunctionResources, policy: Policy) -> list[PerfFinding]:
    old, now = item.baseline, item.new
    if old is None or now is None:
        return []
    perf = policy.perf
    name = item.function
    growths: list[tuple[str, str, int, int, int, str, Callable[[int], str]]] = [
        (REGISTERS, "registers per thread", old.registers, now.registers, perf.registers, "", str),
        (SPILLS, "spilled bytes per thread", old.spills, now.spills, perf.spill_bytes, " B", str),
    ]
    if old.dynamic_smem is not None and now.dynamic_smem is not None:
        growths.append(
            (SMEM, "shared memory per block", old.smem, now.smem, perf.smem_bytes, " B", format_bytes)
        )
    findings = [
        _growth(kind, f"{name}: {what}", before_value, after_value, allowed, unit, show, policy)
        for kind, what, before_value, after_value, allowed, unit, show in growths
        if before_value != after_value
    ]
    before, after = item.baseline_occupancy, item.new_occupancy
    if before is not None and after is not None and before.fraction != after.fraction:
        dropped = (before.fraction - after.fraction) * 100 > perf.occupancy_points
        limit = f" (limit -{perf.occupancy_points:g} points)" if dropped else ""
        findings.append(
            PerfFinding(
                OCCUPANCY,
                f"{name}: {before.describe()} -> {after.describe().removeprefix('occupancy ')}{limit}",
                dropped and policy.fails(OCCUPANCY),
            )
        )
    return findings


def _growth(
    kind: str,
    what: str,
    old: int,
    new: int,
    allowed: int,
    unit: str,
    show: Callable[[int], str],
    policy: Policy,
) -> PerfFinding:
    """A resource that changed: it fails when it grew by more than ``allowed`` and the policy gates it."""
    grew = new - old > allowed
    limit = f" (limit +{allowed}{unit})" if grew else ""
    return PerfFinding(kind, f"{what} {show(old)} -> {show(new)}{limit}", grew and policy.fails(kind))
