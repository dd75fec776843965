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
spec = "eager_gemm.py::token_matmul(N=4096, K=1024)"
bench_shape = { tokens = 4096 }         # --bench: the size of each T.dynamic dimension

[[kernel]]
spec = "kernels.quant::quantize(1 << 20, dtype=determine_fp8_type())"  # module from this folder

[kernel.pass_configs]
tl.disable_warp_specialized = true      # unquoted dotted keys are read as "tl.disable_..."
```
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import msgspec
from msgspec import UNSET, Meta, Struct, UnsetType

from irtrace.base.errors import UsageError
from irtrace.base.toml_file import read_toml
from irtrace.lowering.api import RecordRequest
from irtrace.targets.backends import check_target_name
from irtrace.targets.specs import parse_spec
from irtrace.trace.typed_input import decode_tables

SpecText = Annotated[str, Meta(description='a kernel spec string, e.g. "path.py::name(args)"')]
TargetNames = Annotated[str | list[str], Meta(description="a target name or a list of target names")]
PassConfigs = Annotated[dict[str, Any], Meta(description="a table of pass configs")]
BenchShape = Annotated[
    dict[str, Annotated[int, Meta(ge=1)]],
    Meta(
        description="a table of symbolic dimension sizes (whole numbers from 1 up) for --bench, "
        "e.g. { tokens = 4096 }"
    ),
]


def _check_targets(targets: str | list[str] | UnsetType) -> None:
    """Every name a target, an alias, ``all`` or ``BACKEND:*`` (``ValueError`` locates it)."""
    if isinstance(targets, UnsetType):
        return
    for name in [targets] if isinstance(targets, str) else targets:
        try:
            check_target_name(name)
        except UsageError as error:
            raise ValueError(f"targets: {error.message}") from None


class ManifestDefaults(Struct, forbid_unknown_fields=True, frozen=True):
    """``[defaults]``: what kernels that say nothing get."""

    targets: TargetNames = msgspec.field(default_factory=list)
    pass_configs: PassConfigs = msgspec.field(default_factory=dict)
    bench_shape: BenchShape = msgspec.field(default_factory=dict)

    def __post_init__(self) -> None:
        _check_targets(self.targets)


class ManifestKernel(Struct, forbid_unknown_fields=True, frozen=True):
    """One ``[[kernel]]`` entry."""

    spec: SpecText
    targets: TargetNames | UnsetType = UNSET
    """Left out: the ``[defaults]`` targets."""
    name: str | UnsetType = UNSET
    """Record the kernel under this name instead of its Python name."""
    pass_configs: PassConfigs = msgspec.field(default_factory=dict)
    """Added on top of the ``[defaults]`` pass configs."""
    bench_shape: BenchShape = msgspec.field(default_factory=dict)
    """``--bench``: sizes of the kernel's symbolic dimensions, on top of the ``[defaults]`` ones."""

    def __post_init__(self) -> None:
        try:
            parse_spec(self.spec)
        except UsageError as error:
            raise ValueError(f"spec: {error.message}") from None
        _check_targets(self.targets)


class ManifestFile(Struct, forbid_unknown_fields=True, frozen=True):
    """A manifest's tables, as written."""

    kernel: Annotated[
        list[ManifestKernel],
        Meta(min_length=1, description='one or more tables, each with spec = "path.py::name(args)"'),
    ]
    defaults: ManifestDefaults = msgspec.field(default_factory=ManifestDefaults)


def load_manifest(path: str | Path) -> list[RecordRequest]:
    """Parse a manifest into record requests; every problem names the file, the entry and the key."""
    file = Path(path)
    manifest = decode_tables(read_toml(file, "manifest"), ManifestFile, str(file))
    defaults = manifest.defaults
    requests = []
    for entry in manifest.kernel:
        targets = defaults.targets if entry.targets is UNSET else entry.targets
        requests.append(
            RecordRequest(
                spec=parse_spec(entry.spec),
                targets=(targets,) if isinstance(targets, str) else tuple(targets),
                pass_configs={**_joined(defaults.pass_configs), **_joined(entry.pass_configs)},
                name=None if entry.name is UNSET else entry.name,
                base_dir=file.resolve().parent,
                bench_shape={**defaults.bench_shape, **entry.bench_shape},
            )
        )
    return requests


def _joined(configs: dict[str, Any]) -> dict[str, Any]:
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

    add("", configs)
    return flat
