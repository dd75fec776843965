"""Ctrl-C and SIGTERM while TileLang lowers: remember that they came.

A ``KeyboardInterrupt`` raised while TVM runs a pass crosses TVM's C++ frames and comes back as a
bare ``RuntimeError``, which looks like a lowering failure. The handlers installed by ``catching``
note the signal before raising, so the recorder can tell an interrupt from a failed pass
(``raise_if_requested``). Without them (a library caller), nothing is noted and Python's own
handling applies.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from types import FrameType
from typing import Any

_received: int | None = None
_active = False
_replaced: dict[int, Any] = {}
"""The handlers ``catching`` replaced, while it is active."""


def received() -> int | None:
    """The signal number of the interrupt noted since ``catching`` began, if any."""
    return _received


def noting() -> bool:
    """Whether ``catching`` is active here: only then can a real Ctrl-C be told from a raise."""
    return _active


def release_in_child() -> None:
    """In a forked child of a captured script: give the signals back to the script's own
    handling (a pool's SIGTERM ends its workers quietly, as without irtrace) and forget what the
    parent noted."""
    global _received, _active
    for sig, handler in _replaced.items():
        if handler is not None:
            signal.signal(sig, handler)
    _replaced.clear()
    _received, _active = None, False


def raise_if_requested() -> None:
    """Raise ``KeyboardInterrupt`` if an interrupt was noted (after an error that may hide it)."""
    if _received is not None:
        raise KeyboardInterrupt(signal.Signals(_received).name)


def _note_and_raise(signum: int, frame: FrameType | None) -> None:
    global _received
    _received = signum
    raise KeyboardInterrupt(signal.Signals(signum).name)


@contextlib.contextmanager
def catching() -> Iterator[None]:
    """Note SIGINT and SIGTERM, then raise ``KeyboardInterrupt`` as Python does for SIGINT."""
    global _received, _active
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    _received = None
    for sig, handler in previous.items():
        if handler is not signal.SIG_IGN:  # `nohup` and background jobs keep ignoring them
            signal.signal(sig, _note_and_raise)
            _replaced[sig] = handler
    _active = True
    try:
        yield
    finally:  # ``received`` keeps its answer for the caller's exit code
        _replaced.clear()
        _active = False
        for sig, handler in previous.items():
            if handler is not None:
                signal.signal(sig, handler)
