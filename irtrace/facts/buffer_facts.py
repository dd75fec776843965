"""What the compiler knows about one buffer after layout inference, as every consumer receives it:
the language server's hints and hover, the MCP server's answers. Made by ``irtrace.lowering.facts``."""

from __future__ import annotations

from typing import Literal

import msgspec

from irtrace.trace.schema import BufferLayout


class BufferFact(msgspec.Struct, frozen=True, kw_only=True):
    """One buffer of a kernel as the compiler sees it after layout inference."""

    name: str
    role: Literal["param", "alloc"]
    """``param`` (a kernel argument) or ``alloc`` (``T.alloc_*``)."""
    file: str | None
    """Source file of the allocation (a macro's file for buffers allocated in a macro)."""
    line: int | None
    """1-based source line; ``None`` for compiler-made buffers such as barriers."""
    shape: tuple[int | str, ...]
    """Shape as written (after the factory's arguments were substituted)."""
    allocated_shape: tuple[int | str, ...]
    """Shape after layout inference (pipelining may add a stage dimension)."""
    dtype: str
    scope: str
    """``global``, ``shared.dyn``, ``local.fragment``, Ascend ``L1``/``L0C``/``UB``, ..."""
    layout_short: str | None = None
    """E.g. ``swizzle 128B`` or ``128 thr, 32 elem/thr``; ``None`` when no layout was inferred."""
    layout_long: str | None = None
    """The layout as TileLang prints it."""
    bytes: int | None = None
    """Size of the allocation (allocated shape) in bytes, when static."""
    layout: BufferLayout | None = None
    """The layout as the trace records it (``irtrace.lowering.layouts.buffer_layout``), for
    drawing it: the language server's hover links to its picture."""
