"""Names for passes that TVM reports anonymously.

Four passes of TileLang's pipelines are Python functions wrapped by ``tvm.transform.module_pass``
without a name; TVM reports them all as ``pass_fn``. The Python call that ran the pass names it.
"""

from __future__ import annotations

import linecache
import re
import sys

ANONYMOUS_PASS = "pass_fn"
_PASS_FACTORY_CALL = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\s*\([^()]*\)\s*\(")
_INSTRUMENT_FILES = (
    "instrumentation/events.py",
    "irtrace/lowering/recorder.py",
    "irtrace/lowering/instrumentation.py",  # its pass pairing, for a TileLang without events.py
    "irtrace/lowering/pass_names.py",
    "tvm/ir/instrument.py",
)


def display_name(raw_name: str) -> str:
    """The name a pass is recorded under: TVM's, or for ``pass_fn`` the factory that made it."""
    if raw_name != ANONYMOUS_PASS:
        return raw_name
    return name_anonymous_pass() or raw_name


def name_anonymous_pass() -> str | None:
    """Name a ``pass_fn`` pass from the Python call that ran it (``NestedLoopChecker()(mod)``).

    Walks out of the instrument frames to the caller of ``Pass.__call__`` and reads its line.
    """
    frame = sys._getframe(1)
    while frame is not None and frame.f_code.co_filename.replace("\\", "/").endswith(_INSTRUMENT_FILES):
        frame = frame.f_back  # type: ignore[assignment]
    while frame is not None:
        line = linecache.getline(frame.f_code.co_filename, frame.f_lineno)
        match = _PASS_FACTORY_CALL.search(line)
        if match:
            return match.group(1)
        if "transform" not in frame.f_code.co_filename and "tilelang" not in frame.f_code.co_filename:
            return None
        frame = frame.f_back  # type: ignore[assignment]
    return None
