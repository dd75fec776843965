"""Quick calls into TVM that keep the GIL while they run.

tvm_ffi lets go of the GIL around every call into C++, and every read of a map's or an array's
item, or of a function's attributes, is such a call. The call takes well under a microsecond;
letting go of the GIL is what costs when the print and writer threads want it: one of them takes
it, and the pipeline's thread waits until that thread lets go again. The snapshot code reads
containers on the pipeline's thread after every pass (``ModuleState.same_as``), so it calls the
same functions through its own handles, made not to let go of the GIL (docs/performance.md,
"Tracing cost"). Long calls (a print, a comparison of two modules) still let go: ``handle``
gives either kind.
"""

from __future__ import annotations

import functools
from typing import Any


@functools.cache
def handle(name: str, keep_gil: bool) -> Any | None:
    """Our own handle of TVM's global function ``name`` (TileLang's is untouched), keeping the GIL
    while it runs or letting go; ``None`` where this TVM has no such function or, for a handle
    that keeps the GIL, its handles always let go (releases before tvm_ffi): the callers then use
    TVM's Python API, as before."""
    try:
        import tvm_ffi

        function = tvm_ffi.get_global_func(name, allow_missing=True)
        if function is None:
            return None
        if keep_gil:
            function.release_gil = False
    except (ImportError, AttributeError, TypeError):
        return None
    return function


def _held(name: str) -> Any | None:
    """``handle(name)`` keeping the GIL: for the quick calls made after every pass."""
    return handle(name, keep_gil=True)


def map_items(mapping: Any) -> list[tuple[Any, Any]]:
    """A TVM map's (key, value) pairs, in the order ``mapping.items()`` gives them."""
    size_of, iterate = _held("ffi.MapSize"), _held("ffi.MapForwardIterFunctor")
    if size_of is None or iterate is None:
        return list(mapping.items())
    size = size_of(mapping)
    if not size:
        return []
    step = iterate(mapping)
    step.release_gil = False
    items = []
    for _ in range(size):
        items.append((step(0), step(1)))
        if not step(2):
            break
    return items


def array_items(array: Any) -> list[Any]:
    """A TVM array's items."""
    size_of, get = _held("ffi.ArraySize"), _held("ffi.ArrayGetItem")
    if size_of is None or get is None:
        return list(array)
    return [get(array, index) for index in range(size_of(array))]


def function_attrs(func: Any) -> Any:
    """``func.attrs`` (a property that calls into C++), or ``None`` for an object without attributes."""
    attrs_of = _held("ir.BaseFunc_Attrs")
    if attrs_of is None:
        return getattr(func, "attrs", None)
    return attrs_of(func)


def _attrs_map(attrs: Any) -> Any | None:
    """The map a ``DictAttrs`` holds, read through a GIL-keeping handle (``None`` without one)."""
    dict_of = _held("ir.DictAttrsGetDict")
    return dict_of(attrs) if dict_of is not None else None


def attrs_items(attrs: Any) -> list[tuple[Any, Any]]:
    """A ``DictAttrs``' (key, value) pairs."""
    mapping = _attrs_map(attrs)
    return map_items(mapping) if mapping is not None else list(attrs.items())


def attr(attrs: Any, key: str) -> Any:
    """The value of ``key`` in a ``DictAttrs``, or ``None``."""
    mapping, get = _attrs_map(attrs), _held("ffi.MapGetItemOrMissing")
    if mapping is None or get is None:
        return attrs.get(key, None)
    from tvm_ffi.core import MISSING

    value = get(mapping, key)
    return None if MISSING.same_as(value) else value


def module(functions: Any, attrs: Any, global_infos: Any) -> Any:
    """``IRModule(functions, attrs, global_infos)``: the objects as they are, none copied."""
    make = _held("ir.IRModule")
    if make is None:
        from tvm.ir import _ffi_api

        make = _ffi_api.IRModule
    return make(functions, attrs, global_infos)


def structurally_equal(a: Any, b: Any) -> bool:
    """``tvm.ir.structural_equal(a, b)`` for two TVM objects (free variables not mapped)."""
    equal = _held("node.StructuralEqual")
    if equal is None:
        from tvm import ir

        return bool(ir.structural_equal(a, b))
    return bool(equal(a, b, False, False))
