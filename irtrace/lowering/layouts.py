"""Layouts as TileLang holds them after layout inference (a block's ``layout_map``), read into
the trace's ``BufferLayout`` records and into the language server's words for them.

One reading serves both, so the hover and the trace say the same thing about a buffer: the
summary (``describe_layout``) and TileLang's own text. Every text kept from TVM goes through
``plain_text`` (see its docstring). tilelang is imported lazily.
"""

from __future__ import annotations

from typing import Any

from irtrace.trace.schema import BufferLayout

_SWIZZLES = (
    ("make_full_bank_swizzled_layout", "swizzle 128B", 8),
    ("make_half_bank_swizzled_layout", "swizzle 64B", 4),
    ("make_quarter_bank_swizzled_layout", "swizzle 32B", 2),
    ("make_linear_layout", "linear", 0),
)
"""TileLang's layout makers to compare a shared buffer's layout with, and the number of 16-byte
vectors a row must hold for each (0: any shape)."""


def plain_text(value: Any) -> str:
    """``str(value)`` as an exact Python ``str``.

    ``str()`` of a TVM object returns a ``tvm_ffi.core.String`` (a ``str`` subclass backed by an
    FFI object); facts outlive the module they were read from, and freeing such strings later
    crashed the worker with SIGSEGV (symbolic dims on the second analysis).
    """
    text = str(value)
    return text if type(text) is str else str.__new__(str, text)


def dims_of(shape: Any) -> tuple[int | str, ...]:
    """A TVM shape as Python values: static sizes as ints, symbolic ones as their text."""
    dims: list[int | str] = []
    for dim in shape:
        try:
            dims.append(int(dim))
        except (TypeError, ValueError):
            dims.append(plain_text(dim))
    return tuple(dims)


def span_of(buffer: Any) -> tuple[str | None, int | None]:
    span = getattr(buffer, "span", None)
    if span is None:
        return None, None
    source = getattr(span, "source_name", None)
    name = getattr(source, "name", None) if source is not None else None
    line = int(span.line) if getattr(span, "line", 0) else None
    return (plain_text(name) if name else None), line


def module_functions(module: Any) -> list[tuple[Any, Any]]:
    """The module's functions that have a body (PrimFuncs), as ``(global var, function)``."""
    if module is None:
        return []
    return [(gv, f) for gv, f in module.functions.items() if hasattr(f, "body")]


def layout_maps(module: Any) -> dict[tuple[str, int | None], tuple[Any, Any]]:
    """``(name, line) -> (buffer, layout)`` from every block's ``layout_map`` in ``module``."""
    from tvm.tirx.stmt_functor import post_order_visit

    layouts: dict[tuple[str, int | None], tuple[Any, Any]] = {}

    def visit(node: Any) -> None:
        annotations = getattr(node, "annotations", None)
        if annotations is None or "layout_map" not in annotations:
            return
        for buffer, layout in annotations["layout_map"].items():
            layouts.setdefault((plain_text(buffer.name), span_of(buffer)[1]), (buffer, layout))

    for _, func in module_functions(module):
        post_order_visit(func.body, visit)
    return layouts


def _swizzle_applies(buffer: Any, vectors: int) -> bool:
    """TileLang's own preconditions for a bank swizzle, checked here: a maker that fails them
    raises through C++, which costs about a second the first time in a process."""
    if vectors == 0:
        return True
    shape = [getattr(dim, "value", dim) for dim in buffer.shape]
    if len(shape) < 2 or not all(isinstance(dim, int) for dim in shape[-2:]):
        return False
    stride, continuous = shape[-2], shape[-1]
    vector = 128 // int(buffer.dtype.bits)
    return bool((stride == 4 or stride % 8 == 0) and continuous % (vector * vectors) == 0)


def describe_layout(buffer: Any, layout: Any) -> tuple[str, str]:
    """The layout in short form (threads, replication, elements per thread; or the swizzle) and long."""
    long = plain_text(layout)
    if type(layout).__name__ == "Fragment":
        threads = int(layout.get_thread_size())
        replicate = int(layout.replicate_size)
        per_thread = 1
        for dim in layout.get_output_shape():
            per_thread *= int(dim)
        short = f"{threads} thr, {per_thread} elem/thr"
        if replicate > 1:
            short += f", rep {replicate}"
        return short, long
    from tilelang.layout import swizzle

    for maker, name, vectors in _SWIZZLES:
        if not _swizzle_applies(buffer, vectors):
            continue
        try:
            candidate = getattr(swizzle, maker)(buffer)
            if bool(candidate.is_equal(layout)):
                return name, long
        except Exception:
            continue
    return "custom layout", long


def buffer_layout(buffer: Any, layout: Any) -> BufferLayout:
    """``layout`` of ``buffer`` as the trace records it: shapes, the forward expressions TileLang
    prints, and for a fragment its thread mapping, replication and thread range."""
    summary, text = describe_layout(buffer, layout)
    fragment = type(layout).__name__ == "Fragment"
    names = [plain_text(var) for var in layout.get_forward_vars()]
    input_shape = list(dims_of(layout.get_input_shape()))
    extra: dict[str, Any] = {}
    if fragment:
        thread_range = getattr(layout, "thread_range", None)
        extra = {
            "forward_thread": plain_text(layout.forward_thread),
            "replicate": int(layout.replicate_size),
            "threads": int(layout.get_thread_size()),
            "thread_offset": int(thread_range.min) if thread_range is not None else None,
        }
        if len(names) == len(input_shape) + 1:  # a replicated fragment's variables start with the replica's
            extra["replicate_var"], names = names[0], names[1:]
    else:
        extra = {"swizzle": summary}
    return BufferLayout(
        buffer=plain_text(buffer.name),
        scope=plain_text(buffer.scope()),
        dtype=plain_text(buffer.dtype),
        shape=list(dims_of(buffer.shape)),
        kind="fragment" if fragment else "layout",
        input_shape=input_shape,
        output_shape=list(dims_of(layout.get_output_shape())),
        forward_vars=names,
        forward_index=[plain_text(expr) for expr in layout.get_forward_index()],
        summary=summary,
        text=text,
        **extra,
    )
