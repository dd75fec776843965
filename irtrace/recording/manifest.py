"""``irtrace.toml``: many kernels, their arguments and targets, recorded in one go.

```toml
[defaults]
targets = ["all"]                       # used by kernels that name none
pass_configs = { "tl.disable_tma_lower" = false }

[[kernel]]
spec = "gemm.py::matmul(M=1024, N=1024, K=1024)"   # relative to this file
targets = ["cuda:sm_90", "hip:gfx942"]
name = "gemm_1k"                        # optional: record under this name
pass_configs = {}                       # optional: added to the defaults

[[kernel]]
spec = "kernels.quant::quantize(1 << 20, dtype=determine_fp8_type())"  # module from this folder

[kernel.pass_configs]
tl.disable_warp_specialized = true      # unquoted dotted keys are read as "tl.disable_..."
```
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from irtrace.core.errors import UsageError
from irtrace.core.specs import parse_spec
from irtrace.core.targets import check_target_name
from irtrace.core.toml_file import read_toml
from irtrace.recording.api import RecordRequest


def load_manifest(path: str | Path) -> list[RecordRequest]:
    """Parse a manifest into record requests; every problem names the file and the entry."""
    file = Path(path)
    data = read_toml(file, "manifest")
    defaults = _table(data.get("defaults", {}), f"{file} [defaults]")
    entries = data.get("kernel", [])
    if not isinstance(entries, list) or not entries:
        raise UsageError(f'{file}: no [[kernel]] entries; each needs spec = "path.py::name(args)"')
    default_targets = _strings(defaults.get("targets", []), f"{file} [defaults] targets")
    default_configs = _pass_configs(defaults.get("pass_configs", {}), f"{file} [defaults] pass_configs")
    requests = []
    for number, entry in enumerate(entries, start=1):
        where = f"{file} [[kernel]] #{number}"
        entry = _table(entry, where)
        if not isinstance(entry.get("spec"), str):
            raise UsageError(f'{where}: missing spec = "path.py::name(args)"')
        targets = _strings(entry.get("targets", default_targets), f"{where} targets")
        for target in targets:
            check_target_name(target)
        configs = {**default_configs, **_pass_configs(entry.get("pass_configs", {}), f"{where} pass_configs")}
        name = entry.get("name")
        if name is not None and not isinstance(name, str):
            raise UsageError(f"{where}: name must be a string")
        requests.append(
            RecordRequest(
                spec=parse_spec(entry["spec"]),
                targets=tuple(targets),
                pass_configs=configs,
                name=name,
                base_dir=file.resolve().parent,
            )
        )
    return requests


def _table(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise UsageError(f"{where}: expected a table")
    return value


def _pass_configs(value: Any, where: str) -> dict[str, Any]:
    """Pass configs with TOML's dotted keys joined again.

    TOML reads ``tl.disable_warp_specialized = true`` as ``{"tl": {"disable_warp_specialized":
    true}}``. Every pass-config name has a dot, so a table under a name without one is such a
    split key; a table under a dotted name is a config's own value (``tirx.UnrollLoop``).
    """
    flat: dict[str, Any] = {}

    def add(prefix: str, table: dict[str, Any]) -> None:
        for key, item in table.items():
            name = f"{prefix}.{key}" if prefix else key
            if "." not in name and isinstance(item, dict):
                add(name, item)
            else:
                flat[name] = item

    add("", _table(value, where))
    return flat


def _strings(value: Any, where: str) -> list[str]:
    if isinstance(value, str):
        return [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise UsageError(f"{where}: expected a list of target names")
    return list(value)
