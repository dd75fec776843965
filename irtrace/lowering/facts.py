"""Buffer facts and diagnostics read from a real lowering, for editors (the language server's worker
and the MCP server's ``buffer_facts`` and ``diagnostics``).

Buffers are read twice: as declared by the frontend (the built PrimFunc: the shape as written)
and as they stand after the layout-inference pass, whose blocks carry a ``layout_map``; dtype,
scope and allocated shape come from the latter, so passes that rewrite scopes before it (Metal's
``tl.MetalFragmentToSimdgroup``) show. Diagnostics come from the error a lowering raised and from
the warnings TileLang's C++ checks log to the process's stderr, both of which point at source lines
with ``--> file:line:col``. tilelang is imported lazily.

Every text kept from TVM goes through ``plain_text``: ``str()`` of a TVM object is a
``tvm_ffi.core.String``, and holding those past the module they came from crashed the worker.
"""

from __future__ import annotations

import re
import sys
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from irtrace.base.native_log import RunLog, capture_fd2
from irtrace.facts.buffer_facts import BufferFact
from irtrace.lowering.layouts import (
    buffer_layout,
    dims_of,
    layout_maps,
    module_functions,
    plain_text,
    span_of,
)
from irtrace.targets.backends import TargetSpec

LAYOUT_INFERENCE = "tl.LayoutInference"
ASCEND_LAYOUT_INFERENCE = "tl.AscendLayoutInference"

ERROR = "error"
WARNING = "warning"

_LOCATION = re.compile(r"-->\s*(?P<file>[^\n]+?):(?P<line>\d+):(?P<column>\d+)")
_LOG_WARNING = re.compile(r"^\[[0-9:]+\][^\n]*?Warning: ", re.MULTILINE)
_AT_FILE = re.compile(r"\(at (?P<file>[^():]+):(?P<line>\d+)\)")


def layout_stop_pass(target: TargetSpec) -> str:
    """The pass after which buffers carry their inferred layouts on ``target``."""
    return ASCEND_LAYOUT_INFERENCE if target.backend == "ascend" else LAYOUT_INFERENCE


@dataclass(frozen=True)
class CompilerDiagnostic:
    """An error or warning from the frontend or the compiler, located in the source when possible."""

    message: str
    severity: str = ERROR
    """``error`` or ``warning``."""
    code: str = "lowering"
    """``syntax``, ``import``, ``frontend``, ``layout-inference``, ``buffer-init``, ``data-race``, ..."""
    line: int | None = None
    """1-based line in ``file``; ``None`` when the compiler gave no location in the document."""
    column: int | None = None
    """1-based column, when known."""
    file: str | None = None
    related: tuple[str, ...] = field(default_factory=tuple)
    """Further locations (``file:line``) the message names."""


# --- buffers ---------------------------------------------------------------------------------


def byte_size(shape: tuple[int | str, ...], dtype: str) -> int | None:
    """Bytes of a ``shape`` of ``dtype``; ``None`` when a size is symbolic."""
    import tvm

    if any(isinstance(dim, str) for dim in shape):
        return None
    try:
        dt = tvm.DataType(dtype)
        bits = int(dt.bits) * int(dt.lanes)
    except Exception:
        return None
    count = 1
    for dim in shape:
        count *= int(dim)
    return count * bits // 8


def _alloc_buffers(func: Any) -> list[Any]:
    from tvm.tirx.stmt_functor import post_order_visit

    found: list[Any] = []

    def visit(node: Any) -> None:
        for buffer in getattr(node, "alloc_buffers", None) or ():
            found.append(buffer)

    post_order_visit(func.body, visit)
    return found


def buffer_facts(func: Any, stopped_module: Any) -> list[BufferFact]:
    """Parameters and allocations of ``func`` with the dtype, scope, shape and layout the compiler
    gave them by the end of layout inference.

    ``func`` is the PrimFunc as built (declared shapes, source lines); ``stopped_module`` the
    module after the layout-inference pass, or ``None`` when lowering failed before it (then the
    declaration is all there is).
    """
    layouts = layout_maps(stopped_module) if stopped_module is not None else {}
    lowered: dict[tuple[str, int | None], Any] = {}
    lowered_params: dict[str, Any] = {}
    for _, lowered_func in module_functions(stopped_module):
        for buffer in _alloc_buffers(lowered_func):
            lowered.setdefault((plain_text(buffer.name), span_of(buffer)[1]), buffer)
        for param in lowered_func.params:
            buffer = lowered_func.buffer_map.get(param, None)
            if buffer is not None:
                lowered_params.setdefault(plain_text(buffer.name), buffer)
    facts: list[BufferFact] = []
    for param in func.params:
        buffer = func.buffer_map.get(param, None)
        if buffer is None:
            continue
        facts.append(_fact(buffer, "param", lowered_params.get(plain_text(buffer.name)), None))
    for buffer in _alloc_buffers(func):
        key = (plain_text(buffer.name), span_of(buffer)[1])
        found = layouts.get(key)
        facts.append(_fact(buffer, "alloc", lowered.get(key), found))
    return facts


def _fact(
    buffer: Any, role: Literal["param", "alloc"], lowered: Any, found: tuple[Any, Any] | None
) -> BufferFact:
    """A buffer's fact: shape as declared; dtype, scope and allocated shape from the compiler's
    buffer (``lowered``, or the one in the ``layout_map``), falling back to the declaration."""
    file, line = span_of(buffer)
    shape = dims_of(buffer.shape)
    compiled = found[0] if found is not None else lowered
    allocated = dims_of(compiled.shape) if compiled is not None else shape
    short = long = None
    layout = None
    if found is not None:
        # one reading for the words and the record, so the hover says what the trace says
        layout = buffer_layout(found[0], found[1])
        short, long = layout.summary, layout.text
    source = compiled if compiled is not None else buffer
    dtype = plain_text(source.dtype)
    return BufferFact(
        name=plain_text(buffer.name),
        role=role,
        file=file,
        line=line,
        shape=shape,
        allocated_shape=allocated,
        dtype=dtype,
        scope=plain_text(source.scope()),
        layout_short=short,
        layout_long=long,
        bytes=byte_size(allocated, dtype),
        layout=layout,
    )


# --- diagnostics -----------------------------------------------------------------------------


def _same_file(a: str | None, b: str | Path) -> bool:
    if not a:
        return False
    try:
        return Path(a).resolve() == Path(b).resolve()
    except OSError:
        return False


def _first_line(text: str) -> str:
    for line in text.strip().splitlines():
        if line.strip():
            return line.strip()
    return text.strip()


def _located(message: str, file: Path) -> tuple[int | None, int | None, tuple[str, ...]]:
    """The first ``--> file:line:col`` in ``message`` that is in ``file``, and every location named."""
    line = column = None
    related: list[str] = []
    for match in _LOCATION.finditer(message):
        related.append(f"{match['file']}:{match['line']}")
        if line is None and _same_file(match["file"], file):
            line, column = int(match["line"]), int(match["column"])
    return line, column, tuple(related)


def _traceback_line(error: BaseException, file: Path) -> int | None:
    """The deepest line of ``file`` in the traceback of ``error`` or of what caused it."""
    line = None
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        for frame in traceback.extract_tb(current.__traceback__):
            if _same_file(frame.filename, file) and frame.lineno:
                line = frame.lineno
        current = current.__cause__ or current.__context__
    return line


def error_diagnostics(
    error: BaseException, file: str | Path, *, code: str = "lowering"
) -> CompilerDiagnostic:
    """One diagnostic for ``error`` at the line it points at in ``file`` (syntax, frontend or pass)."""
    file = Path(file)
    cause: BaseException = error.__cause__ or error
    text = str(getattr(error, "message", None) or error)
    if isinstance(cause, SyntaxError):
        line = cause.lineno if _same_file(cause.filename, file) or cause.filename is None else None
        return CompilerDiagnostic(
            message=f"syntax error: {cause.msg}",
            code="syntax",
            line=line,
            column=cause.offset or None,
            file=str(file),
        )
    line, column, related = _located(str(cause), file)
    if line is None:
        line = _traceback_line(error, file)
    if line is None:
        at = _AT_FILE.search(text)
        if at and Path(at["file"]).name == file.name:
            line = int(at["line"])
    message = _clean_message(str(cause)) if cause is not error else _clean_message(text)
    if cause is not error and code in ("frontend", "import"):
        message = _clean_message(text)
    return CompilerDiagnostic(
        message=message, code=code, line=line, column=column, file=str(file), related=related
    )


def _clean_message(text: str) -> str:
    """The message without TVM's source excerpt (``|`` lines) and location arrows."""
    kept = []
    for raw in text.strip().splitlines():
        stripped = raw.strip()
        if stripped.startswith(("-->", "|")) or re.match(r"^\d+\s*\|", stripped):
            continue
        kept.append(raw.rstrip())
    return "\n".join(kept).strip() or _first_line(text)


def native_log_diagnostics(log: str, file: str | Path) -> list[CompilerDiagnostic]:
    """Warnings TileLang's C++ checks logged (buffer read before written, data race), located."""
    from irtrace.base.native_log import HARMLESS_NATIVE_WARNINGS

    file = Path(file)
    found: list[CompilerDiagnostic] = []
    matches = list(_LOG_WARNING.finditer(log))
    ends = [m.start() for m in matches[1:]] + ([len(log)] if matches else [])
    for start, end in zip((m.end() for m in matches), ends, strict=True):
        block = log[start:end].strip()
        head = _first_line(block)
        if head in HARMLESS_NATIVE_WARNINGS:
            continue  # e.g. TVM's ROCm-version line, once per hip target: not about the kernel
        code = (
            "data-race"
            if head.startswith("Data race")
            else "buffer-init"
            if "initialization" in head
            else "check"
        )
        items = re.split(r"\n\s*\[\d+\]\s*", "\n" + block)[1:] or [block]
        for item in items:
            line, column, related = _located(item, file)
            found.append(
                CompilerDiagnostic(
                    message=f"{head}: {_clean_message(item)}"
                    if len(items) > 1 or item is not block
                    else head,
                    severity=WARNING,
                    code=code,
                    line=line,
                    column=column,
                    file=str(file),
                    related=related,
                )
            )
    return found


@contextmanager
def capture_native_stderr(echo: bool = True) -> Iterator[RunLog]:
    """Capture what C++ code (TVM's ``LOG(WARNING)``) writes to fd 2; echo it afterwards."""
    captured = RunLog()
    try:
        with capture_fd2() as captured:
            yield captured
    finally:
        if echo and captured.text:
            sys.stderr.write(captured.text)
            sys.stderr.flush()


def reached(passes: Any, stop_pass: str) -> bool:
    """Whether a recorded run finished ``stop_pass`` without a failed pass."""
    names = [p.name for p in passes]
    return stop_pass in names and not any(p.failed for p in passes)
