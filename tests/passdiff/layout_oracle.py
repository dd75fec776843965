"""TileLang's own layout objects, read by another route than irtrace's recorder.

The kernel is lowered with ``tilelang.lower`` under a plain TVM instrument that keeps the blocks'
``layout_map`` right after ``tl.LayoutInference``; the answers come from the live ``Fragment``
methods (``get_thread_size``, ``get_output_shape``, ``map_forward_thread``, ``map_forward_index``)
simplified by TVM's own analyzer. Nothing of passdiff or of the trace is involved.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .oracle import load_kernel_module


@dataclass(frozen=True)
class LiveFragment:
    """What TileLang says about one fragment (threads counted from its thread range's start)."""

    threads: int
    per_thread: int
    thread_offset: int
    layout: Any

    def placement(self, element: tuple[int, ...]) -> tuple[int, int]:
        """``(thread, flattened local index)`` of ``element``, as TVM evaluates them."""
        import tvm

        analyzer = tvm.arith.Analyzer()
        indices = [tvm.tirx.IntImm("int32", value) for value in element]
        thread = int(analyzer.simplify(self.layout.map_forward_thread(indices)[0]))
        outputs = [int(analyzer.simplify(expr)) for expr in self.layout.map_forward_index(indices)]
        shape = [int(dim) for dim in self.layout.get_output_shape()]
        offset = 0
        for value, dim in zip(outputs, shape, strict=True):
            offset = offset * dim + value
        return thread, offset


def live_fragment(
    kernel_file: Path,
    factory: str,
    args: tuple[Any, ...],
    target: str,
    buffer: str,
    configs: dict[str, Any] | None = None,
) -> LiveFragment:
    """``buffer``'s fragment after layout inference when ``factory(*args)`` of ``kernel_file`` is
    lowered for ``target`` (an irtrace target name)."""
    import tilelang
    import tvm
    from tvm.ir.instrument import pass_instrument
    from tvm.tirx.stmt_functor import post_order_visit

    from irtrace.lowering.tvm_targets import make_tvm_target
    from irtrace.targets.backends import get_target

    found: dict[str, Any] = {}

    @pass_instrument
    class KeepLayouts:
        def run_after_pass(self, mod: Any, info: Any) -> None:
            if str(info.name) != "tl.LayoutInference" or found:
                return

            def visit(node: Any) -> None:
                annotations = getattr(node, "annotations", None)
                if annotations is not None and "layout_map" in annotations:
                    for key, layout in annotations["layout_map"].items():
                        found.setdefault(str(key.name), layout)

            for _, function in mod.functions.items():
                if hasattr(function, "body"):
                    post_order_visit(function.body, visit)

    module = load_kernel_module(kernel_file)
    tvm_target = make_tvm_target(get_target(target))
    with tvm_target:
        func = getattr(module, factory)(*args)
    try:
        with (
            tvm.transform.PassContext(opt_level=3, config=configs or {}, instruments=[KeepLayouts()]),
            tvm_target,
        ):
            tilelang.lower(func, target=tvm_target)
    except Exception:  # later passes may fail; the layouts were read at the layout pass
        pass
    layout = found[buffer]
    return LiveFragment(
        threads=int(layout.get_thread_size()),
        per_thread=math.prod(int(dim) for dim in layout.get_output_shape()),
        thread_offset=int(layout.thread_range.min),
        layout=layout,
    )
