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

[time]                  # ratios to the baseline; 0 reports without failing
total_ratio = 0         # a run's total lowering time
pass_ratio = 0          # one pass's self time
min_seconds = 0.005     # times under this in both traces are noise, never gated

[metrics]               # largest allowed growth, as a fraction of the baseline (0 = any growth fails)
shared_bytes = 0.0
spill_bytes = 0.0
```
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from irtrace.core.errors import UsageError
from irtrace.core.metrics import METRIC_NAMES
from irtrace.core.toml_file import read_toml

DEFAULT_POLICY_FILE = "irtrace-policy.toml"

ADDED = "added"
REMOVED = "removed"
NEWLY_FAILING = "newly_failing"
FAILURE_CHANGED = "failure_changed"
PASS_LIST = "pass_list"
IR = "ir"
SOURCE = "source"
TOTAL_TIME = "total_time"
PASS_TIME = "pass_time"
METRIC = "metric"
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
}
"""The kinds ``[fail]`` switches, with what each means."""

DEFAULT_FAIL = frozenset({REMOVED, NEWLY_FAILING})
DEFAULT_MIN_SECONDS = 0.005


@dataclass(frozen=True)
class Policy:
    """What fails a check; the defaults fail on removed and newly failing kernels only."""

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
    data = read_toml(file, "policy file")
    _only(data, ("fail", "time", "metrics"), f"{file}")
    fail = _table(data.get("fail", {}), f"{file} [fail]")
    _only(fail, tuple(CHANGE_KINDS), f"{file} [fail]")
    fail_on = set(DEFAULT_FAIL)
    for kind, value in fail.items():
        if not isinstance(value, bool):
            raise UsageError(f"{file} [fail] {kind}: expected true or false, not {value!r}")
        (fail_on.add if value else fail_on.discard)(kind)
    time = _table(data.get("time", {}), f"{file} [time]")
    _only(time, ("total_ratio", "pass_ratio", "min_seconds"), f"{file} [time]")
    total_ratio = _ratio(time.get("total_ratio", 0.0), f"{file} [time] total_ratio")
    pass_ratio = _ratio(time.get("pass_ratio", 0.0), f"{file} [time] pass_ratio")
    min_seconds = _number(time.get("min_seconds", DEFAULT_MIN_SECONDS), f"{file} [time] min_seconds")
    metrics = _table(data.get("metrics", {}), f"{file} [metrics]")
    _only(metrics, METRIC_NAMES, f"{file} [metrics]")
    limits = {name: _number(value, f"{file} [metrics] {name}") for name, value in metrics.items()}
    return Policy(frozenset(fail_on), total_ratio, pass_ratio, min_seconds, limits, str(file))


def _table(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise UsageError(f"{where}: expected a table")
    return value


def _only(table: Mapping[str, Any], known: tuple[str, ...], where: str) -> None:
    unknown = [key for key in table if key not in known]
    if unknown:
        raise UsageError(f"{where}: unknown key {unknown[0]!r}; known keys: {', '.join(known)}")


def _number(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < float("inf"):
        raise UsageError(f"{where}: expected a number >= 0, not {value!r}")
    return float(value)


def _ratio(value: Any, where: str) -> float:
    number = _number(value, where)
    if 0 < number < 1:
        raise UsageError(
            f"{where}: {number:g} would fail on times under the baseline's; give 0 (off) or >= 1"
        )
    return number
