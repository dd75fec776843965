"""TileLang's own target objects for irtrace's target specs (this imports tilelang, so it lives in
the recording layer; the table of names is ``irtrace.targets.backends``)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from irtrace.targets.backends import TargetSpec
from irtrace.targets.compat import require_supported_backend


def make_tvm_target(target: TargetSpec) -> Any:
    """TileLang's ``Target`` object for a target spec (imports tilelang).

    An unsupported TileLang release, or one without the target's backend, is an
    ``UnsupportedTileLang`` error naming the supported range (``irtrace.targets.compat``).
    """
    require_supported_backend(target.backend)
    from tilelang.backend.target import determine_target

    spec = dict(target.tvm_target) if isinstance(target.tvm_target, Mapping) else target.tvm_target
    return determine_target(spec, return_object=True)


_AUTO_FALLBACKS: list[Any] = []
"""TVM targets that TileLang's ``target="auto"`` falls back to, innermost last."""
_AUTO_DETECTOR = "irtrace-fallback"


@contextmanager
def auto_target_fallback(target: TargetSpec) -> Iterator[None]:
    """While active, TileLang's ``target="auto"`` means ``target`` when it finds no GPU.

    Kernel files and scripts often compile with the default ``target="auto"`` (TileLang's
    quickstart does so at import), which fails on a machine without a GPU. TileLang tries its
    registered target detectors in order; this one is registered after the real ones, so on a
    machine with a GPU the GPU still wins.
    """
    from tilelang.backend.target import list_target_detectors, register_target_detector

    if _AUTO_DETECTOR not in list_target_detectors():
        register_target_detector(_AUTO_DETECTOR, lambda: _AUTO_FALLBACKS[-1] if _AUTO_FALLBACKS else None)
    _AUTO_FALLBACKS.append(make_tvm_target(target))
    try:
        yield
    finally:
        _AUTO_FALLBACKS.pop()
