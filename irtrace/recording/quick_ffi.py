"""Quick calls into TVM that keep the GIL while they run.

tvm_ffi lets go of the GIL around every call into C++, and every read of a map's or an array's
item, or of a function's attributes, is such a call. The call takes well under a microsecond;
letting go of the GIL is what costs when the print and writer threads want it: one of them takes
it, and the pipeline's thread waits until that thread lets go again. The snapshot code reads
containers on the pipeline's thread after every pass (``ModuleState.same_as``), so it calls the
same functions through its own handles, made not to let go of the GIL (docs/architecture.md,
"Tracing cost"). Long calls (a print) still let go.
"""

from __future__ import annotations

import functools
from typing import Any


@functools.cache
def _held(name: str) -> Any:
    """Our own handle of TVM's global function ``name``, which keeps the GIL (TileLang's is untouched)."""
    import tvm_ffi

    function = tvm_ffi.get_global_func(name)
    function.release_gil = False
    return function


def map_items(mapping: Any) -> list[tuple[Any, Any]]:
    """A TVM map's (key, value) pairs, in the order ``mapping.items()`` gives them."""
    size = _held("ffi.MapSize")(mapping)
    if not size:
        return []
    step = _held("ffi.MapForwardIterFunctor")(mapping)
    step.release_gil = False
    items = []
    for _ in range(size):
        items.append((step(0), step(1)))
        if not step(2):
            break
    return items


def array_items(array: Any) -> list[Any]:
    """A TVM array's items."""
    get = _held("ffi.ArrayGetItem")
    return [get(array, index) for index in range(_held("ffi.ArraySize")(array))]


def function_attrs(func: Any) -> Any:
    """``func.attrs`` (a property that calls into C++), or ``None`` for an object without attributes."""
    return _held("ir.BaseFunc_Attrs")(func)


def attrs_items(attrs: Any) -> list[tuple[Any, Any]]:
    """A ``DictAttrs``' (key, value) pairs."""
    return map_items(_held("ir.DictAttrsGetDict")(attrs))


def attr(attrs: Any, key: str) -> Any:
    """The value of ``key`` in a ``DictAttrs``, or ``None``."""
    from tvm_ffi.core import MISSING

    value = _held("ffi.MapGetItemOrMissing")(_held("ir.DictAttrsGetDict")(attrs), key)
    return None if MISSING.same_as(value) else value


def module(functions: Any, attrs: Any, global_infos: Any) -> Any:
    """``IRModule(functions, attrs, global_infos)``: the objects as they are, none copied."""
    return _held("ir.IRModule")(functions, attrs, global_infos)


def structurally_equal(a: Any, b: Any) -> bool:
    """``tvm.ir.structural_equal(a, b)`` for two TVM objects (free variables not mapped)."""
    return bool(_held("node.StructuralEqual")(a, b, False, False))
