"""Which TileLang releases irtrace works with, and where those releases differ.

TileLang moves its APIs between releases; this is the one place that knows how. What differs
within the range (tested by ``make test-versions``, one environment per release):

- 0.1.13 has no ``tilelang.instrumentation`` (0.1.14 added it): ``irtrace.lowering.instrumentation``
  gives the recorder the same events there, and says in one line that ``irtrace run`` needs 0.1.14.
- 0.1.13 and 0.1.14 have no Ascend backend (``tilelang.ascend``, the ``ascend`` target kind came
  in 0.1.15); ``backend_unavailable`` says so instead of TileLang's ``AssertionError``.
- ``determine_target``, ``tvm.tirx`` and the ``JITImpl``/``AutoTuneImpl`` internals the loader
  reads are the same in all three; pass names differ only where the pipelines differ
  (docs/passdiff.md: what changed in 0.1.15).

Outside the range, a release is refused with one line (``UnsupportedTileLang``): 0.1.12 and
older are untested, and so is a newer release until it is; set
``TILELANG_DEVTOOLS_ANY_TILELANG=1`` to try one anyway.

This module imports no tilelang: the installed release is read from the package metadata.
"""

from __future__ import annotations

import importlib.metadata
import os
import re
from functools import cache

from irtrace.base.errors import ExitCode, IrtraceError

OLDEST = (0, 1, 13)
"""The oldest supported release."""
BEYOND = (0, 1, 16)
"""The first release not yet supported."""
SUPPORTED = ">=0.1.13,<0.1.16"
"""The range, as pyproject.toml's requirement writes it."""
ANY_TILELANG_ENV = "TILELANG_DEVTOOLS_ANY_TILELANG"
"""Set to 1 to run with a release outside the range, at one's own risk."""

BACKEND_SINCE: dict[str, tuple[int, int, int]] = {"ascend": (0, 1, 15)}
INSTRUMENTATION_SINCE = (0, 1, 14)
"""The first release with ``tilelang.instrumentation``."""
"""Backends that only some releases of the range have, and the first release with each."""


class UnsupportedTileLang(IrtraceError):
    """The installed TileLang is not a release this version of tilelang-devtools supports."""

    exit_code = ExitCode.ENVIRONMENT


def release(version: str) -> tuple[int, int, int] | None:
    """``(0, 1, 15)`` for ``0.1.15``, ``0.1.15.post1`` or ``0.1.15+cu128``; ``None`` if unreadable."""
    found = re.match(r"(\d+)\.(\d+)\.(\d+)", version.strip())
    return (int(found[1]), int(found[2]), int(found[3])) if found else None


def installed_tilelang() -> str | None:
    """The installed TileLang's version, from its package metadata (no import); ``None`` if absent."""
    try:
        return importlib.metadata.version("tilelang")
    except importlib.metadata.PackageNotFoundError:
        return None


def unsupported_reason(version: str | None) -> str | None:
    """The one line that says why ``version`` cannot be used, or ``None`` when it can."""
    if version is None:
        return f"tilelang is not installed; install a supported release: pip install 'tilelang{SUPPORTED}'"
    found = release(version)
    if found is not None and OLDEST <= found < BEYOND:
        return None
    if os.environ.get(ANY_TILELANG_ENV) == "1":
        return None
    return (
        f"tilelang {version} is installed, but tilelang-devtools supports tilelang{SUPPORTED}; "
        f"pip install 'tilelang{SUPPORTED}' (or set {ANY_TILELANG_ENV}=1 to try it anyway)"
    )


@cache
def _checked(version: str | None) -> str | None:
    return unsupported_reason(version)


def require_supported_tilelang() -> None:
    """Raise ``UnsupportedTileLang`` unless the installed TileLang is in the supported range.

    Called before the first use of TileLang's API (making a target, hooking a script), so an
    unsupported release fails with one line instead of an ``ImportError`` deep in a lowering.
    """
    reason = _checked(installed_tilelang())
    if reason is not None:
        raise UnsupportedTileLang(reason)


def backend_unavailable(backend: str, version: str | None = None) -> str | None:
    """Why the installed TileLang (or ``version``) cannot lower for ``backend``; ``None`` if it can."""
    since = BACKEND_SINCE.get(backend)
    version = version if version is not None else installed_tilelang()
    found = release(version) if version is not None else None
    if since is None or found is None or found >= since:
        return None
    needed = ".".join(map(str, since))
    return f"the {backend} target needs tilelang>={needed}; tilelang {version} is installed"


def require_supported_backend(backend: str) -> None:
    """``require_supported_tilelang``, and raise ``UnsupportedTileLang`` if its release lacks ``backend``."""
    require_supported_tilelang()
    reason = backend_unavailable(backend)
    if reason is not None:
        raise UnsupportedTileLang(reason)
