"""TileLang's own layout objects for the example GEMM and flash attention: the ``layout_map`` of the
module right after ``tl.LayoutInference``, caught by a plain TVM instrument (never irtrace's
recorder or evaluator), the oracle of the layout drawings and the browser's layouts view."""

from __future__ import annotations

import contextlib
from typing import Any

from tests.conftest import EXAMPLES


class _Stop(Exception):
    pass


def oracle_layouts(kernel: str, target: str) -> dict[str, Any]:
    """``buffer name -> Layout/Fragment`` from the module right after ``tl.LayoutInference``."""
    import importlib.util

    import tilelang
    import tvm
    from tilelang.backend.target import determine_target
    from tvm.tirx.stmt_functor import post_order_visit

    file = EXAMPLES / ("gemm.py" if kernel == "matmul" else "flash_attention.py")
    spec = importlib.util.spec_from_file_location(f"oracle_{kernel}", file)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    kept: list[Any] = []

    @tvm.instrument.pass_instrument
    class KeepLayoutModule:
        def run_after_pass(self, mod: Any, info: Any) -> None:
            if info.name == "tl.LayoutInference":
                kept.append(mod)
                raise _Stop

    from irtrace.targets.backends import get_target

    spec_of = get_target(target).tvm_target  # the target's TVM spec (dict or string), not a layout
    tvm_target = determine_target(dict(spec_of) if isinstance(spec_of, dict) else spec_of, return_object=True)
    with tvm_target:
        func = module.matmul(256, 256, 256) if kernel == "matmul" else module.flash_attention_fwd()
        # suppress: the instrument's stop, however TVM wraps it
        with tvm.transform.PassContext(instruments=[KeepLayoutModule()]), contextlib.suppress(Exception):
            tilelang.lower(func, target=tvm_target)
    assert kept, "tl.LayoutInference did not run"
    found: dict[str, Any] = {}

    def visit(node: Any) -> None:
        annotations = getattr(node, "annotations", None)
        if annotations is not None and "layout_map" in annotations:
            for buffer, layout in annotations["layout_map"].items():
                found.setdefault(str(buffer.name), layout)

    for _, prim in kept[0].functions.items():
        post_order_visit(prim.body, visit)
    return found


def int_of(expr: Any) -> int:
    import tvm

    return int(tvm.arith.Analyzer().simplify(expr))
