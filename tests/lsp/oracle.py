"""The compiler's own facts about a kernel's buffers, computed by another route than tilelang-lsp's.

A plain TVM pass instrument around ``tilelang.lower`` reads, inside ``run_after_pass`` of
``tl.LayoutInference`` (``tl.AscendLayoutInference`` on Ascend), every buffer of the module: the
function parameters and the blocks' ``alloc_buffers`` with their shape, dtype and scope, and the
layouts of the blocks' ``layout_map``. On Metal, scopes come from the module after
``tl.MetalFragmentToSimdgroup``, the pass that rewrites them. Nothing here uses irtrace or
tilelang_lsp: the kernel is instantiated by the caller the way TileLang does it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

TILELANG_TARGETS: dict[str, Any] = {
    "cuda:sm_90": {"kind": "cuda", "arch": "sm_90"},
    "hip:gfx942": {"kind": "hip", "mcpu": "gfx942"},
    "metal": "metal",
    "ascend": "ascend",
}
"""What TileLang's ``determine_target`` is given for each target the tests use."""

ASCEND_MEMORY = {
    "shared.dyn": "UB",
    "shared.l1": "L1",
    "shared.l0a": "L0A",
    "shared.l0b": "L0B",
    "shared.l0c": "L0C",
}
"""How the hints name Ascend's scopes (docs/lsp.md)."""


@dataclass(frozen=True)
class CompilerBuffer:
    """One buffer as the compiler has it after layout inference."""

    name: str
    line: int | None
    declared: tuple[int | str, ...]
    """Shape in the instantiated PrimFunc (before any pass)."""
    allocated: tuple[int | str, ...]
    """Shape after layout inference (a pipelined buffer gains its stages)."""
    dtype: str
    scope: str
    layout: str | None
    """``128 thr, 64 elem/thr`` for a fragment, ``swizzle 64B``/``linear``/``custom layout`` otherwise."""


def tilelang_target(name: str) -> Any:
    """TileLang's target object for a test target name."""
    from tilelang.backend.target import determine_target

    return determine_target(TILELANG_TARGETS[name], return_object=True)


def _dims(shape: Any) -> tuple[int | str, ...]:
    dims: list[int | str] = []
    for dim in shape:
        try:
            dims.append(int(dim))
        except (TypeError, ValueError):
            dims.append(str(str(dim)))
    return tuple(dims)


def _line(buffer: Any) -> int | None:
    span = getattr(buffer, "span", None)
    return int(span.line) if span is not None and getattr(span, "line", 0) else None


def _alloc_buffers(func: Any) -> list[Any]:
    from tvm.tirx.stmt_functor import post_order_visit

    found: list[Any] = []
    post_order_visit(func.body, lambda node: found.extend(getattr(node, "alloc_buffers", None) or ()))
    return found


def _short_layout(buffer: Any, layout: Any) -> str:
    if type(layout).__name__ == "Fragment":
        elements = 1
        for dim in layout.get_output_shape():
            elements *= int(dim)
        text = f"{int(layout.get_thread_size())} thr, {elements} elem/thr"
        replicate = int(layout.replicate_size)
        return text + (f", rep {replicate}" if replicate > 1 else "")
    from tilelang.layout import swizzle

    for maker, name in (
        ("make_full_bank_swizzled_layout", "swizzle 128B"),
        ("make_half_bank_swizzled_layout", "swizzle 64B"),
        ("make_quarter_bank_swizzled_layout", "swizzle 32B"),
        ("make_linear_layout", "linear"),
    ):
        try:
            if bool(getattr(swizzle, maker)(buffer).is_equal(layout)):
                return name
        except Exception:  # the maker's preconditions do not hold for this buffer
            continue
    return "custom layout"


def compiler_buffers(
    func: Any, target: str, pass_configs: dict[str, Any] | None = None
) -> list[CompilerBuffer]:
    """Lower ``func`` for ``target`` and read its buffers right after layout inference."""
    import tilelang
    import tvm
    from tvm.ir.instrument import pass_instrument
    from tvm.tirx.stmt_functor import post_order_visit

    layout_pass = "tl.AscendLayoutInference" if target == "ascend" else "tl.LayoutInference"
    declared: dict[tuple[str, int | None], tuple[int | str, ...]] = {}
    for param in func.params:
        buffer = func.buffer_map.get(param, None)
        if buffer is not None:
            declared[(str(buffer.name), _line(buffer))] = _dims(buffer.shape)
    for buffer in _alloc_buffers(func):
        declared[(str(buffer.name), _line(buffer))] = _dims(buffer.shape)
    found: list[CompilerBuffer] = []
    rewritten_scopes: dict[tuple[str, int | None], str] = {}

    @pass_instrument
    class KeepBuffersAfterLayoutInference:
        def run_after_pass(self, mod: Any, info: Any) -> None:
            name = str(info.name)
            if name == "tl.MetalFragmentToSimdgroup":
                for _, function in mod.functions.items():
                    for buffer in _alloc_buffers(function):
                        rewritten_scopes[(str(buffer.name), _line(buffer))] = str(buffer.scope())
            if name != layout_pass or found:
                return
            layouts: dict[tuple[str, int | None], tuple[Any, Any]] = {}

            def visit(node: Any) -> None:
                annotations = getattr(node, "annotations", None)
                if annotations is not None and "layout_map" in annotations:
                    for buffer, layout in annotations["layout_map"].items():
                        layouts.setdefault((str(buffer.name), _line(buffer)), (buffer, layout))

            for _, function in mod.functions.items():
                if not hasattr(function, "body"):
                    continue
                post_order_visit(function.body, visit)
                buffers = [function.buffer_map[p] for p in function.params if p in function.buffer_map]
                for buffer in [*buffers, *_alloc_buffers(function)]:
                    key = (str(buffer.name), _line(buffer))
                    mapped = layouts.get(key)
                    shaped = mapped[0] if mapped is not None else buffer
                    found.append(
                        CompilerBuffer(
                            name=key[0],
                            line=key[1],
                            declared=declared.get(key, _dims(buffer.shape)),
                            allocated=_dims(shaped.shape),
                            dtype=str(buffer.dtype),
                            scope=str(buffer.scope()),
                            layout=_short_layout(mapped[0], mapped[1]) if mapped is not None else None,
                        )
                    )

    tvm_target = tilelang_target(target)
    try:
        with (
            tvm.transform.PassContext(
                opt_level=3, config=pass_configs or {}, instruments=[KeepBuffersAfterLayoutInference()]
            ),
            tvm_target,
        ):
            tilelang.lower(func, target=tvm_target)
    except Exception:  # later passes or codegen may not support the target; the facts are read
        pass
    assert found, f"the lowering for {target} never reached {layout_pass}"
    if rewritten_scopes:
        found = [
            CompilerBuffer(
                b.name,
                b.line,
                b.declared,
                b.allocated,
                b.dtype,
                rewritten_scopes.get((b.name, b.line), b.scope),
                b.layout,
            )
            for b in found
        ]
    return found


def expected_hint(buffer: CompilerBuffer, target: str, renames: dict[str, str] | None = None) -> str:
    """The inlay hint the buffer should get: ``[128, 32] ×3 float16 shared.dyn · swizzle 64B``
    (×3: the stages layout inference added; symbolic dims under the source's names)."""
    renames = renames or {}

    def dim(value: int | str) -> str:
        return renames.get(value, value) if isinstance(value, str) else str(value)

    declared, allocated = list(buffer.declared), list(buffer.allocated)
    text = "[" + ", ".join(dim(d) for d in declared) + "]"
    if len(allocated) == len(declared) + 1 and allocated[1:] == declared:
        text += f" ×{allocated[0]}"
    scope = ASCEND_MEMORY.get(buffer.scope, buffer.scope) if target == "ascend" else buffer.scope
    label = f"{text} {buffer.dtype} {scope}"
    return f"{label} · {buffer.layout}" if buffer.layout else label
