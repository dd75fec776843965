"""``irtrace-policy.toml``: which changes found by ``irtrace check`` fail it, and at which thresholds.

```toml
[fail]                  # change kinds that fail the check (exit 1); the rest are reported only
removed = true          # a kernel x target of the baseline is not in the new trace
added = false           # a kernel x target the baseline does not have
newly_failing = true    # lowered in the baseline, fails to lower now
failure_changed = false # failed in both, in another pass or with another error
pass_list = false       # passes added, removed or reordered
ir = false              # the normalized IR after some pass differs
source = false          # the final kernel source differs
layout = false          # a buffer's inferred layout differs (properties or element mapping)
latency = true          # the kernel got slower (--bench): beyond [perf] latency_percent and the noise
registers = true        # a kernel function uses more registers per thread (--machine-code)
spills = true           # a kernel function spills more bytes per thread
smem = true             # a kernel function uses more shared memory per block
occupancy = true        # a kernel function's theoretical occupancy dropped

[time]                  # ratios to the baseline; 0 reports without failing
total_ratio = 0         # a run's total lowering time
pass_ratio = 0          # one pass's self time
min_seconds = 0.005     # times under this in both traces are noise, never gated

[metrics]               # largest allowed growth, as a fraction of the baseline (0 = any growth fails)
shared_bytes = 0.0
spill_bytes = 0.0

[perf]                  # what each performance kind above allows (docs/ci.md defines them)
latency_percent = 5.0   # median latency growth allowed, in percent (the noise rule applies too)
registers = 0           # registers per thread a kernel function may gain
spill_bytes = 0         # spilled bytes per thread (stores + loads) it may gain
smem_bytes = 0          # bytes of shared memory per block it may gain
occupancy_points = 0    # percentage points of occupancy it may lose
```
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

import msgspec
from msgspec import UNSET, Meta, Struct, UnsetType

from irtrace.base.toml_file import read_toml
from irtrace.perf.metrics import METRIC_NAMES
from irtrace.trace.typed_input import decode_tables

DEFAULT_POLICY_FILE = "irtrace-policy.toml"

ADDED = "added"
REMOVED = "removed"
NEWLY_FAILING = "newly_failing"
FAILURE_CHANGED = "failure_changed"
PASS_LIST = "pass_list"
IR = "ir"
SOURCE = "source"
LAYOUT = "layout"
TOTAL_TIME = "total_time"
PASS_TIME = "pass_time"
METRIC = "metric"
LATENCY = "latency"
REGISTERS = "registers"
SPILLS = "spills"
SMEM = "smem"
OCCUPANCY = "occupancy"
PERF_KINDS = (LATENCY, REGISTERS, SPILLS, SMEM, OCCUPANCY)
"""Performance change kinds: found only where both traces were recorded with ``--bench``
(latency) or ``--machine-code`` (the rest)."""
FIXED = "fixed"
"""Failed in the baseline, lowers now: reported, never a failure."""

CHANGE_KINDS: Mapping[str, str] = {
    REMOVED: "a kernel x target of the baseline is not in the new trace",
    ADDED: "a kernel x target the baseline does not have",
    NEWLY_FAILING: "lowered in the baseline, fails to lower now",
    FAILURE_CHANGED: "failed in both traces, in another pass or with another error",
    PASS_LIST: "passes added, removed or reordered (aligned by the pipeline's tree)",
    IR: "the normalized IR after some pass differs",
    SOURCE: "the final kernel source differs",
    LAYOUT: "a buffer's layout after layout inference differs: kind, shape, threads, elements per thread, "
    "replication, thread range, swizzle, or which thread and local index (or address) an element has",
    LATENCY: "the kernel's median latency grew beyond [perf] latency_percent and outside the measured "
    "noise, or its benchmark fails now (--bench)",
    REGISTERS: "a kernel function uses more registers per thread than [perf] registers allows "
    "(--machine-code)",
    SPILLS: "a kernel function spills more bytes per thread than [perf] spill_bytes allows",
    SMEM: "a kernel function uses more shared memory per block than [perf] smem_bytes allows",
    OCCUPANCY: "a kernel function's theoretical occupancy dropped by more than [perf] occupancy_points",
}
"""The kinds ``[fail]`` switches, with what each means."""

DEFAULT_FAIL = frozenset({REMOVED, NEWLY_FAILING, *PERF_KINDS})
DEFAULT_MIN_SECONDS = 0.005

# ----------------------------------------------------------------------------- the file's tables

Number = Annotated[float, Meta(ge=0, le=sys.float_info.max, description="a number >= 0")]
Switch = Annotated[bool, Meta(description="true or false")]
_SWITCH_OR_UNSET: Any = Switch | UnsetType  # typed Any: mypy takes an Annotated union for no type
_NUMBER_OR_UNSET: Any = Number | UnsetType

FailTable = msgspec.defstruct(
    "FailTable",
    [(kind, _SWITCH_OR_UNSET, UNSET) for kind in CHANGE_KINDS],
    forbid_unknown_fields=True,
    frozen=True,
)
"""``[fail]``: one switch per change kind; a kind left out keeps its default."""

MetricsTable = msgspec.defstruct(
    "MetricsTable",
    [(name, _NUMBER_OR_UNSET, UNSET) for name in METRIC_NAMES],
    forbid_unknown_fields=True,
    frozen=True,
)
"""``[metrics]``: the largest allowed growth per metric; a metric left out is not gated."""


class TimeTable(Struct, forbid_unknown_fields=True, frozen=True):
    """``[time]``: ratios to the baseline (0: report only) and the noise floor."""

    total_ratio: Number = 0.0
    pass_ratio: Number = 0.0
    min_seconds: Number = DEFAULT_MIN_SECONDS

    def __post_init__(self) -> None:
        for key in ("total_ratio", "pass_ratio"):
            ratio = getattr(self, key)
            if 0 < ratio < 1:
                raise ValueError(
                    f"{key}: {ratio:g} would fail on times under the baseline's; give 0 (off) or >= 1"
                )


Count = Annotated[int, Meta(ge=0, le=2**31, description="a whole number >= 0")]
Percent = Annotated[float, Meta(ge=0, le=1e6, description="a number of percent >= 0")]
Points = Annotated[float, Meta(ge=0, le=100, description="percentage points from 0 to 100")]


class PerfTable(Struct, forbid_unknown_fields=True, frozen=True):
    """``[perf]``: how much each performance kind may worsen before it is a finding."""

    latency_percent: Percent = 5.0
    registers: Count = 0
    spill_bytes: Count = 0
    smem_bytes: Count = 0
    occupancy_points: Points = 0.0


class PolicyFile(Struct, forbid_unknown_fields=True, frozen=True):
    """A policy file's tables, as written."""

    fail: FailTable = msgspec.field(default_factory=FailTable)  # type: ignore[valid-type]
    time: TimeTable = msgspec.field(default_factory=TimeTable)
    metrics: MetricsTable = msgspec.field(default_factory=MetricsTable)  # type: ignore[valid-type]
    perf: PerfTable = msgspec.field(default_factory=PerfTable)


@dataclass(frozen=True)
class Policy:
    """What fails a check; the defaults fail on removed and newly failing kernels and on the
    performance kinds (latency, registers, spills, shared memory, occupancy)."""

    fail_on: frozenset[str] = DEFAULT_FAIL
    """Change kinds (``CHANGE_KINDS``) that fail the check."""
    total_ratio: float = 0.0
    """Fail when a run's total time exceeds this multiple of the baseline's; 0: never."""
    pass_ratio: float = 0.0
    """Fail when a pass's self time exceeds this multiple of the baseline's; 0: never."""
    min_seconds: float = DEFAULT_MIN_SECONDS
    """Times under this in both traces are noise: compared, never gated."""
    metric_limits: Mapping[str, float] = field(default_factory=dict)
    """Metric name -> largest allowed growth as a fraction of the baseline (0: any growth)."""
    perf: PerfTable = field(default_factory=PerfTable)
    """Thresholds of the performance kinds (``[perf]``)."""
    path: str | None = None
    """The file it was read from; ``None`` for the defaults."""

    def fails(self, kind: str) -> bool:
        return kind in self.fail_on

    def describe(self) -> dict[str, Any]:
        """The policy as JSON, for the check's report."""
        return {
            "path": self.path,
            "fail": sorted(self.fail_on),
            "time": {
                "total_ratio": self.total_ratio,
                "pass_ratio": self.pass_ratio,
                "min_seconds": self.min_seconds,
            },
            "metrics": dict(self.metric_limits),
            "perf": msgspec.structs.asdict(self.perf),
        }


def find_policy(given: str | None, folder: Path | None = None) -> Policy:
    """The policy at ``given``; else ``irtrace-policy.toml`` in ``folder`` (the current one) when
    there is one; else the defaults."""
    if given is not None:
        return load_policy(given)
    implicit = (folder or Path.cwd()) / DEFAULT_POLICY_FILE
    return load_policy(implicit) if implicit.is_file() else Policy()


def load_policy(path: str | Path) -> Policy:
    """Read a policy file; a missing file, bad TOML, an unknown key or a bad value is an error."""
    file = Path(path)
    tables = decode_tables(read_toml(file, "policy file"), PolicyFile, str(file))
    fail_on = set(DEFAULT_FAIL)
    for kind, value in msgspec.structs.asdict(tables.fail).items():
        if value is not msgspec.UNSET:
            (fail_on.add if value else fail_on.discard)(kind)
    time = tables.time
    limits = {k: v for k, v in msgspec.structs.asdict(tables.metrics).items() if v is not msgspec.UNSET}
    return Policy(
        frozenset(fail_on),
        time.total_ratio,
        time.pass_ratio,
        time.min_seconds,
        limits,
        tables.perf,
        str(file),
    )
