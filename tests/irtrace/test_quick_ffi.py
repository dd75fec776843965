"""The GIL-keeping reads the snapshot code makes after every pass (``irtrace.lowering.quick_ffi``).

Each read is checked against TVM's own Python API on the same real objects (the oracle), through
the GIL-keeping handles and through the fallback a TVM without them gets, and the handles are
checked to keep the GIL while TileLang's own handles of the same functions still let go of it
(what the pipeline itself calls is left as TileLang has it).
"""

from __future__ import annotations

from typing import Any

import pytest

from irtrace.lowering import quick_ffi


def two_function_module() -> Any:
    """A real module of a kernel with parameters, buffers and attributes, and its host side."""
    import tilelang  # noqa: F401  (puts its TVM on the path)
    import tvm
    from tvm import tirx

    n = tirx.Var("n", "int32")
    a = tirx.decl_buffer((n,), "float16", name="A")
    handle = tirx.Var("A_handle", "handle")
    kernel = tirx.PrimFunc([handle, n], tirx.Evaluate(0), buffer_map={handle: a}).with_attr(
        {"calling_conv": 2, "global_symbol": "kernel"}
    )
    host = tirx.PrimFunc([], tirx.Evaluate(1)).with_attr("global_symbol", "main")
    return tvm.IRModule({"kernel": kernel, "main": host})


@pytest.mark.parametrize("handles", ["gil-keeping", "none (older TVM)"])
def test_reads_match_tvms_own_api(handles: str, monkeypatch: pytest.MonkeyPatch) -> None:
    if handles != "gil-keeping":
        monkeypatch.setattr(quick_ffi, "_held", lambda name: None)
    mod = two_function_module()
    import tvm

    pairs = quick_ffi.map_items(mod.functions)
    assert [(g.name_hint, f) for g, f in pairs] == [(g.name_hint, f) for g, f in mod.functions.items()]
    assert all(f.same_as(mod[g]) for g, f in pairs)
    kernel = mod["kernel"]
    params = quick_ffi.array_items(kernel.params)
    assert len(params) == len(kernel.params) == 2
    assert all(p.same_as(q) for p, q in zip(params, kernel.params, strict=True))
    assert quick_ffi.array_items(mod["main"].params) == []
    buffers = quick_ffi.map_items(kernel.buffer_map)
    assert [(v.name, b.name) for v, b in buffers] == [(v.name, b.name) for v, b in kernel.buffer_map.items()]
    assert quick_ffi.function_attrs(kernel).same_as(kernel.attrs)
    assert dict(quick_ffi.attrs_items(kernel.attrs)) == dict(kernel.attrs.items())
    assert int(quick_ffi.attr(kernel.attrs, "calling_conv")) == int(kernel.attrs.get("calling_conv")) == 2
    assert quick_ffi.attr(mod["main"].attrs, "calling_conv") is None
    assert quick_ffi.structurally_equal(kernel.ret_type, mod["main"].ret_type) == bool(
        tvm.ir.structural_equal(kernel.ret_type, mod["main"].ret_type)
    )
    rebuilt = quick_ffi.module(mod.functions, mod.attrs, mod.global_infos)
    assert rebuilt.functions.same_as(mod.functions) and rebuilt.script() == mod.script()


def test_its_handles_keep_the_gil_and_tilelangs_still_let_go() -> None:
    import tvm_ffi

    mod = two_function_module()
    quick_ffi.map_items(mod.functions)
    quick_ffi.array_items(mod["kernel"].params)
    quick_ffi.function_attrs(mod["kernel"])
    assert quick_ffi._held("no.such.function") is None
    for name in ("ffi.MapSize", "ffi.MapForwardIterFunctor", "ffi.ArraySize", "ir.BaseFunc_Attrs"):
        assert quick_ffi._held(name).release_gil is False
        assert tvm_ffi.get_global_func(name).release_gil is True
