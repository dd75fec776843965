"""The author's line for statements TileLang's macros expand into: a frontend-time hook on TileLang's
span setting.

TileLang's script builder spans each statement with the line being run when it was made. Inside a
macro (``T.reduce_sum`` is one: ``tilelang/language/reduce_op.py``) that is a line of TileLang's own
file, so nothing in the kernel's file maps to the reduction. The caller's line exists only while the
frontend runs: the builder keeps the macro callers in ``macro_fileline_stack``. The hook wraps two
functions (and ``Builder.get``, below) and edits nothing else:

- ``Builder.set_fileline``: after TileLang's own, when the line set is in TileLang's (or TVM's)
  package and a caller on the macro stack is not, note that caller for that library line;
- ``tilelang.ir.make_span``: a span of a library line with a noted caller names the caller (the
  kernel file's line) instead; the library line is kept as the inner frame, in a column number
  (``INNER_FRAME_COLUMN`` + an index of this process's ``inner_frames``), so the span's file and line
  are what every reader (TileLang's ``#line`` directives, our maps) already uses.

It also notes which lines outside TileLang's (and TVM's) packages the builder ran: TileLang's AST
rewrite puts a ``set_fileline`` call before every statement of a kernel or macro (``SpanAttacher``
in ``tilelang/language/eager/ast.py``: assignments of build-time constants and ``if`` tests too,
never the statements of a branch Python did not take), so these are the statements run.
``Builder.get`` is wrapped to keep them with the function it returns (``ran_lines``): a line that ran
and made no statement is told apart from one that did not run at all.

The builder creates a span for pending statements at the next ``set_fileline`` or frame exit, while
the note for that library line is still the one made when the line was set (a note is replaced only
when the same library line is set again, which flushes the pending statements first).

Guarded by TileLang's version (``SINCE``..``compat.BEYOND``) and by the shape of what it wraps; an
unknown shape leaves TileLang as it is. tilelang is imported lazily.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from typing import Any

from irtrace.targets.compat import BEYOND, installed_tilelang, release

SINCE = (0, 1, 15)
"""The first release whose builder sets spans (``tilelang/ir.py``'s ``make_span``)."""
INNER_FRAME_COLUMN = 1 << 22
"""Columns from here name an inner frame (TileLang's own spans use column 1)."""

_lock = threading.Lock()
_installed = False
_inner_frames: list[tuple[str, int]] = []
_inner_index: dict[tuple[str, int], int] = {}
_library_roots: tuple[str, ...] = ()
_NOTES = "_irtrace_macro_callers"
"""The builder's attribute holding, per library line, the kernel line that called it."""
_RAN = "_irtrace_ran_lines"
"""The builder's attribute holding the ``(file, line)`` it ran outside the library."""
RAN_KEPT = 64
"""Functions whose run lines are kept (the last built): a pipeline lowers one soon after its build."""
_ran_by_body: OrderedDict[int, tuple[Any, frozenset[tuple[str, int]]]] = OrderedDict()
"""A built function's body handle -> (the body, held so the handle stays its own; the lines run)."""


def ran_lines(func: Any) -> frozenset[tuple[str, int]] | None:
    """The ``(file, line)`` outside TileLang's and TVM's packages that the builder ran to make
    PrimFunc ``func`` (whose body is the built one: ``with_attr`` keeps it), or ``None`` when
    unknown (not built under the hook, or built too long ago)."""
    body = getattr(func, "body", None)
    handle = getattr(body, "__chandle__", None)
    if handle is None:
        return None
    with _lock:
        found = _ran_by_body.get(handle())
    return found[1] if found is not None and found[0].same_as(body) else None


def inner_frame(column: int) -> tuple[str, int] | None:
    """The library ``(file, line)`` a span's ``column`` names, or ``None`` for a plain span."""
    index = column - INNER_FRAME_COLUMN
    with _lock:
        return _inner_frames[index] if 0 <= index < len(_inner_frames) else None


def _in_library(file: str) -> bool:
    return bool(_library_roots) and os.path.abspath(file).startswith(_library_roots)


def _caller_outside_library(stack: list[tuple[str, int, str]]) -> tuple[str, int] | None:
    """The innermost macro caller whose line is not in a library file."""
    for file, line, _ in reversed(stack):
        if line > 0 and not _in_library(file):
            return file, line
    return None


def install() -> bool:
    """Install the hook once per process; ``False`` when this TileLang is outside the range or its
    builder does not have the shape the hook wraps (then TileLang is left as it is)."""
    global _installed, _library_roots
    with _lock:
        if _installed:
            return True
        found = release(installed_tilelang() or "")
        if found is None or not SINCE <= found < BEYOND:
            return False
        import tilelang
        import tilelang.ir as tl_ir
        import tvm
        from tilelang.language.eager import builder as eager_builder

        builder_class = getattr(eager_builder, "Builder", None)
        original_set = getattr(builder_class, "set_fileline", None)
        original_make = getattr(tl_ir, "make_span", None)
        original_get = getattr(builder_class, "get", None)
        if original_set is None or original_make is None or original_get is None:
            return False
        _library_roots = tuple(
            os.path.join(os.path.dirname(os.path.abspath(package.__file__ or "")), "")
            for package in (tilelang, tvm)
        )

        def set_fileline(self: Any, filename: str, lineno: int, name: str) -> None:
            original_set(self, filename, lineno, name)
            notes: dict[tuple[str, int], tuple[str, int]] | None = getattr(self, _NOTES, None)
            if notes is None:
                notes = {}
                setattr(self, _NOTES, notes)
            if not _in_library(filename):
                if lineno > 0:
                    ran: set[tuple[str, int]] | None = getattr(self, _RAN, None)
                    if ran is None:
                        ran = set()
                        setattr(self, _RAN, ran)
                    ran.add((filename, lineno))
            else:
                caller = _caller_outside_library(list(getattr(self, "macro_fileline_stack", ())))
                if caller is not None:
                    notes[(filename, lineno)] = caller
                else:
                    notes.pop((filename, lineno), None)

        def make_span(file: str, line: int) -> Any:
            current = builder_class.current() if builder_class is not None else None
            notes = getattr(current, _NOTES, None) if current is not None else None
            caller = notes.get((file, line)) if notes is not None else None
            if caller is None:
                return original_make(file, line)
            with _lock:
                index = _inner_index.setdefault((file, line), len(_inner_frames))
                if index == len(_inner_frames):
                    _inner_frames.append((file, line))
            column = INNER_FRAME_COLUMN + index
            return tvm.ir.Span(tvm.ir.SourceName(caller[0]), caller[1], caller[1], column, column)

        def get(self: Any) -> Any:
            func = original_get(self)
            body = getattr(func, "body", None)
            if body is not None and hasattr(body, "__chandle__"):
                with _lock:
                    _ran_by_body[body.__chandle__()] = (body, frozenset(getattr(self, _RAN, ())))
                    while len(_ran_by_body) > RAN_KEPT:
                        _ran_by_body.popitem(last=False)
            return func

        builder_class.set_fileline = set_fileline  # type: ignore[union-attr]
        builder_class.get = get  # type: ignore[union-attr]
        tl_ir.make_span = make_span
        _installed = True
        return True
