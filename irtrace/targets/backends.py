"""The backends irtrace knows, by the short names users type (``cuda:sm_90``, ``ascend``).

This module does not import tilelang, so editors and trace readers can list targets cheaply.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from irtrace.base.errors import UsageError

PORTABLE = "tilelang"
"""Dialect of kernels written in ``tilelang.language`` (CUDA, HIP, Metal)."""
ASCEND = "ascend"
"""Dialect of kernels written in ``tilelang.ascend.language`` (Ascend 950 only)."""
ASCEND_PACKAGE = "tilelang.ascend"
"""Importing this package (or a module in it) makes a kernel file of the Ascend dialect."""
_IMPORTS = re.compile(r"^[ \t]*(?:from[ \t]+([\w.]+)[ \t]+import|import[ \t]+([\w., \t]+))", re.MULTILINE)
"""``from M import ...`` (M) and ``import M1 as a, M2`` (``M1 as a, M2``)."""


def dialect_of_modules(names: Iterable[str]) -> str:
    """The dialect of a file that imported the modules ``names``: Ascend when one is in
    ``tilelang.ascend``, else portable TileLang."""
    ascend = any(name == ASCEND_PACKAGE or name.startswith(ASCEND_PACKAGE + ".") for name in names)
    return ASCEND if ascend else PORTABLE


def dialect_of_source(text: str) -> str:
    """The dialect of a kernel file from its text, without running it: its import statements."""
    names = []
    for module, modules in _IMPORTS.findall(text):
        names += [module] if module else [part.split()[0] for part in modules.split(",") if part.strip()]
    return dialect_of_modules(names)


@dataclass(frozen=True)
class TargetSpec:
    """One backend, as a user names it and as TileLang's ``determine_target`` takes it."""

    name: str
    """Short name, e.g. ``cuda:sm_90``."""
    backend: str
    """``cuda``, ``hip``, ``metal``, ``ascend``, ``c``, ``llvm`` or ``webgpu``."""
    tvm_target: Mapping[str, Any] | str
    """What ``tilelang``'s ``determine_target`` is given."""
    dialect: str
    """Which kernel dialect lowers for it."""
    vendor: str = ""
    """Who makes the hardware: NVIDIA, AMD, Apple, Huawei, or CPU / WebGPU."""
    family: str = ""
    """The architecture family (``Hopper``, ``CDNA3``, ``RDNA4``)."""
    hardware: str = ""
    """Chips the name stands for, as people know them."""
    source_language: str = ""
    """What the kernel source of this target is written in (CUDA, HIP, Metal, C, ...)."""


def tvm_target_name(kind: str, arch: str | None = None, mcpu: str | None = None) -> str:
    """The short name of a TVM target from its kind and its ``arch`` or ``mcpu``: ``cuda:sm_90``,
    ``hip:gfx942`` (for ``rocm`` too), else the kind itself (``metal``, ``c``)."""
    if kind == "cuda" and arch:
        return f"cuda:{arch}"
    if kind in ("hip", "rocm") and mcpu:
        return f"hip:{mcpu}"
    return kind


def _cuda(arch: str, family: str, hardware: str) -> TargetSpec:
    name = tvm_target_name("cuda", arch=arch)
    return TargetSpec(
        name, "cuda", {"kind": "cuda", "arch": arch}, PORTABLE, "NVIDIA", family, hardware, "CUDA"
    )


def _hip(mcpu: str, family: str, hardware: str) -> TargetSpec:
    name = tvm_target_name("hip", mcpu=mcpu)
    return TargetSpec(name, "hip", {"kind": "hip", "mcpu": mcpu}, PORTABLE, "AMD", family, hardware, "HIP")


# TileLang 0.1.15 keeps no list of the architectures it supports (its CUDA and ROCm backends take
# any arch); these are the ones its backend table names, each checked to lower the bundled GEMM
# or RMSNorm (tests/irtrace/test_backends.py).
TARGETS: dict[str, TargetSpec] = {
    spec.name: spec
    for spec in (
        _cuda("sm_70", "Volta", "V100"),
        _cuda("sm_75", "Turing", "T4, RTX 20xx"),
        _cuda("sm_80", "Ampere", "A100, A30"),
        _cuda("sm_86", "Ampere", "A10, A40, RTX 30xx"),
        _cuda("sm_89", "Ada Lovelace", "L4, L40S, RTX 40xx"),
        _cuda("sm_90", "Hopper", "H100, H200, H20"),
        _cuda("sm_90a", "Hopper", "H100, H200 with arch-specific instructions (wgmma, setmaxnreg)"),
        _cuda("sm_100a", "Blackwell", "B200, GB200"),
        _cuda("sm_120", "Blackwell (consumer)", "RTX 50xx, RTX PRO 6000"),
        _hip("gfx90a", "CDNA2", "MI210, MI250X"),
        _hip("gfx942", "CDNA3", "MI300X, MI300A, MI325X"),
        _hip("gfx950", "CDNA4", "MI350X, MI355X"),
        _hip("gfx1100", "RDNA3", "RX 7900 XTX, W7900"),
        _hip("gfx1201", "RDNA4", "RX 9070 XT, R9700"),
        TargetSpec("metal", "metal", "metal", PORTABLE, "Apple", "Apple GPU", "M-series Macs", "Metal"),
        TargetSpec("ascend", "ascend", "ascend", ASCEND, "Huawei", "Ascend", "Ascend 950", "AscendC"),
        TargetSpec("c", "c", "c", PORTABLE, "CPU", "CPU (C source)", "any host CPU", "C"),
        TargetSpec("llvm", "llvm", "llvm", PORTABLE, "CPU", "CPU (LLVM)", "the host CPU", "LLVM IR"),
        TargetSpec(
            "webgpu", "webgpu", "webgpu", PORTABLE, "WebGPU", "WebGPU (experimental)", "browsers", "WGSL"
        ),
    )
}
ALL = "all"
DEFAULT_TARGET = "cuda:sm_90a"
"""The target when none is given: what TileLang itself picks for an H100 or H200 (its CUDA
target detector names compute capability 9.0 ``sm_`` + ``nvcc.get_target_arch((9, 0))``, which
is ``sm_90a``). Plain ``sm_90`` lacks wgmma and setmaxnreg, so TileLang's own warp-specialized
GEMM fails at machine-code time there."""
ALIASES = {
    "cuda": DEFAULT_TARGET,
    "hip": "hip:gfx942",
    "rocm": "hip:gfx942",
    "cpu": "c",
    "cuda:volta": "cuda:sm_70",
    "cuda:turing": "cuda:sm_75",
    "cuda:ampere": "cuda:sm_80",
    "cuda:ada": "cuda:sm_89",
    "cuda:hopper": "cuda:sm_90a",
    "cuda:blackwell": "cuda:sm_100a",
    "cuda:rtx-blackwell": "cuda:sm_120",
    "hip:mi250x": "hip:gfx90a",
    "hip:mi300x": "hip:gfx942",
    "hip:mi300a": "hip:gfx942",
    "hip:mi355x": "hip:gfx950",
    "hip:cdna2": "hip:gfx90a",
    "hip:cdna3": "hip:gfx942",
    "hip:cdna4": "hip:gfx950",
    "hip:rdna3": "hip:gfx1100",
    "hip:rdna4": "hip:gfx1201",
    # a bare architecture names its target: sm_90, gfx942
    **{name.partition(":")[2]: name for name in TARGETS if ":" in name},
}


def target_names() -> list[str]:
    """Every target name a user may pass, ``all`` last."""
    return [*TARGETS, ALL]


def target_patterns() -> list[str]:
    """Names that stand for several targets: ``all`` and one ``BACKEND:*`` per backend with archs."""
    return [ALL, *dict.fromkeys(f"{name.partition(':')[0]}:*" for name in TARGETS if ":" in name)]


def aliases_of(name: str) -> list[str]:
    """The other names that stand for target ``name`` (``cuda:hopper``, ``sm_90``)."""
    return [alias for alias, target in ALIASES.items() if target == name]


def targets_by_vendor() -> dict[str, list[TargetSpec]]:
    """Every target, grouped by who makes the hardware, in the table's order."""
    groups: dict[str, list[TargetSpec]] = {}
    for spec in TARGETS.values():
        groups.setdefault(spec.vendor, []).append(spec)
    return groups


def canonical_target_name(name: str) -> str:
    """``name`` with an alias (``cuda``, ``cuda:hopper``, ``gfx942``) replaced by the target it stands for."""
    return ALIASES.get(name.strip(), name.strip())


def known_target_name(text: str | None) -> str | None:
    """The known target that a user's or a script's text stands for: a name or alias (``cuda``,
    ``sm_90``, ``cuda:hopper``) or TVM target text (``cuda -arch=sm_90a``, ``hip -mcpu=gfx942``);
    an architecture irtrace does not list falls back to its backend's default. ``None`` when the
    text names no known target."""
    if not text or not text.strip():
        return None
    text = text.strip()
    if canonical_target_name(text) in TARGETS:
        return canonical_target_name(text)
    kind, _, options = text.partition(" ")
    arch = re.search(r"-arch=(sm_\w+)", options)
    mcpu = re.search(r"-mcpu=(gfx\w+)", options)
    exact = tvm_target_name(kind, arch[1] if arch else None, mcpu[1] if mcpu else None)
    # sm_90a -> sm_90 when only the plain arch is listed; then the backend's default
    plain = exact.removesuffix("a") if kind == "cuda" else exact
    for name in (exact, plain, canonical_target_name(kind)):
        if name in TARGETS:
            return name
    return None


def get_target(name: str) -> TargetSpec:
    """The spec for ``name``; an unknown name is a ``UsageError`` listing the valid ones."""
    key = canonical_target_name(name)
    try:
        return TARGETS[key]
    except KeyError:
        valid = ", ".join([*target_names(), *target_patterns()[1:]])
        raise UsageError(
            f"unknown target {name!r}; valid targets: {valid} (`irtrace targets` lists them with aliases)"
        ) from None


def default_target(dialect: str) -> TargetSpec:
    """The target used when none is given: Ascend kernels get ``ascend``, others ``DEFAULT_TARGET``."""
    return TARGETS["ascend"] if dialect == ASCEND else TARGETS[DEFAULT_TARGET]


def expand_target(name: str, dialect: str) -> list[TargetSpec]:
    """The targets one name stands for: ``all`` (every target of the dialect), ``cuda:*`` (every
    CUDA arch), or one target by name or alias."""
    name = name.strip()
    if name == ALL:
        return [spec for spec in TARGETS.values() if spec.dialect == dialect]
    if name.endswith(":*"):
        backend = canonical_target_name(name[:-2]).partition(":")[0]
        specs = [spec for spec in TARGETS.values() if spec.backend == backend]
        if not specs:
            raise UsageError(f"{name!r} names no targets; patterns: {', '.join(target_patterns())}")
        return specs
    return [get_target(name)]


def check_target_name(name: str) -> None:
    """Raise ``UsageError`` unless ``name`` is a target, an alias, ``all`` or ``BACKEND:*``."""
    expand_target(name, PORTABLE)


def resolve_targets(names: Iterable[str], dialect: str) -> list[TargetSpec]:
    """Expand ``all`` and ``BACKEND:*`` and check each name; keeps order and drops repeats.

    A named target of another dialect is kept: lowering it fails, and that failure is
    information for the user.
    """
    chosen: list[TargetSpec] = []
    for name in names:
        chosen.extend(spec for spec in expand_target(name, dialect) if spec not in chosen)
    return chosen or [default_target(dialect)]


def first_target(names: Iterable[str], dialect: str = PORTABLE) -> TargetSpec:
    """The first target ``names`` stand for (the default target when there are none)."""
    for name in names:
        return expand_target(name, dialect)[0]
    return default_target(dialect)
