"""The backends irtrace knows, by the short names users type (``cuda:sm_90``, ``ascend``).

This module does not import tilelang, so editors and trace readers can list targets cheaply.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from irtrace.errors import UsageError

PORTABLE = "tilelang"
"""Dialect of kernels written in ``tilelang.language`` (CUDA, HIP, Metal)."""
ASCEND = "ascend"
"""Dialect of kernels written in ``tilelang.ascend.language`` (Ascend 950 only)."""


@dataclass(frozen=True)
class TargetSpec:
    """One backend, as a user names it and as TileLang's ``determine_target`` takes it."""

    name: str
    """Short name, e.g. ``cuda:sm_90``."""
    backend: str
    """``cuda``, ``hip``, ``ascend`` or ``metal``."""
    tvm_target: Mapping[str, Any] | str
    """What ``tilelang``'s ``determine_target`` is given."""
    dialect: str
    """Which kernel dialect lowers for it."""


TARGETS: dict[str, TargetSpec] = {
    spec.name: spec
    for spec in (
        TargetSpec("cuda:sm_80", "cuda", {"kind": "cuda", "arch": "sm_80"}, PORTABLE),
        TargetSpec("cuda:sm_90", "cuda", {"kind": "cuda", "arch": "sm_90"}, PORTABLE),
        TargetSpec("cuda:sm_100a", "cuda", {"kind": "cuda", "arch": "sm_100a"}, PORTABLE),
        TargetSpec("hip:gfx942", "hip", {"kind": "hip", "mcpu": "gfx942"}, PORTABLE),
        TargetSpec("hip:gfx950", "hip", {"kind": "hip", "mcpu": "gfx950"}, PORTABLE),
        TargetSpec("metal", "metal", "metal", PORTABLE),
        TargetSpec("ascend", "ascend", "ascend", ASCEND),
    )
}
ALL = "all"
DEFAULT_TARGET = "cuda:sm_90"
ALIASES = {"cuda": "cuda:sm_90", "hip": "hip:gfx942", "rocm": "hip:gfx942", "sm_90": "cuda:sm_90"}


def make_tvm_target(target: TargetSpec) -> Any:
    """TileLang's ``Target`` object for a target spec (imports tilelang)."""
    from tilelang.backend.target import determine_target

    spec = dict(target.tvm_target) if isinstance(target.tvm_target, Mapping) else target.tvm_target
    return determine_target(spec, return_object=True)


def target_names() -> list[str]:
    """Every target name a user may pass, ``all`` last."""
    return [*TARGETS, ALL]


def canonical_target_name(name: str) -> str:
    """``name`` with an alias (``cuda``, ``hip``, ``rocm``) replaced by the target it stands for."""
    return ALIASES.get(name.strip(), name.strip())


def get_target(name: str) -> TargetSpec:
    """The spec for ``name``; an unknown name is a ``UsageError`` listing the valid ones."""
    key = canonical_target_name(name)
    try:
        return TARGETS[key]
    except KeyError:
        valid = ", ".join(target_names())
        raise UsageError(f"unknown target {name!r}; valid targets: {valid}") from None


def default_target(dialect: str) -> TargetSpec:
    """The target used when none is given: Ascend kernels get ``ascend``, others ``cuda:sm_90``."""
    return TARGETS["ascend"] if dialect == ASCEND else TARGETS[DEFAULT_TARGET]


def resolve_targets(names: Iterable[str], dialect: str) -> list[TargetSpec]:
    """Expand ``all`` and check each name; keeps order and drops repeats.

    ``all`` means every target that applies to the kernel's dialect. A named target of another
    dialect is kept: lowering it fails, and that failure is information for the user.
    """
    chosen: list[TargetSpec] = []
    for name in names:
        specs = (
            [spec for spec in TARGETS.values() if spec.dialect == dialect]
            if name.strip() == ALL
            else [get_target(name)]
        )
        chosen.extend(spec for spec in specs if spec not in chosen)
    return chosen or [default_target(dialect)]
