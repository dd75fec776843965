"""The facts only the language server shows, and irtrace's facts as protocol messages.

Buffer facts and diagnostics themselves are read by ``irtrace.lowering.facts`` (the MCP server
reads them too); here they become the ``tilelang_lsp.protocol`` messages the server receives, with
symbolic sizes under the source's names. tilelang is imported lazily.
"""

from __future__ import annotations

import re
from typing import Any, Literal

import msgspec

from irtrace.facts.buffer_facts import BufferFact
from irtrace.lowering.facts import CompilerDiagnostic, byte_size
from irtrace.lowering.layouts import dims_of, module_functions
from tilelang_lsp.protocol import Buffer, Diagnostic


def shared_memory_bytes(module: Any) -> int | None:
    """Bytes of shared memory the module allocates (``shared``/``shared.dyn`` buffers and allocates)."""
    if module is None:
        return None
    from tvm.tirx.stmt_functor import post_order_visit

    total = 0

    def visit(node: Any) -> None:
        nonlocal total
        kind = type(node).__name__
        if kind == "Allocate":
            scope = str(node.buffer_var.type_annotation.storage_scope)
            if scope.startswith("shared") and scope != "shared.barrier":
                size = byte_size(dims_of(node.extents), str(node.dtype))
                total += size or 0
        for buffer in getattr(node, "alloc_buffers", None) or ():
            if str(buffer.scope()) in ("shared", "shared.dyn"):
                total += byte_size(dims_of(buffer.shape), str(buffer.dtype)) or 0

    for _, func in module_functions(module):
        post_order_visit(func.body, visit)
    return total


def buffer_message(fact: BufferFact, symbols: dict[str, str]) -> Buffer:
    """The fact as the server receives it, symbolic dims under the names the source gives them
    (``M = T.dynamic("tokens")``: ``M``)."""
    renamed = {ir: py for ir, py in symbols.items() if ir != py}
    shape, allocated = fact.shape, fact.allocated_shape
    if renamed:
        pattern = re.compile(r"\b(" + "|".join(re.escape(name) for name in renamed) + r")\b")

        def rename(dims: tuple[int | str, ...]) -> tuple[int | str, ...]:
            return tuple(pattern.sub(lambda m: renamed[m[0]], d) if isinstance(d, str) else d for d in dims)

        shape, allocated = rename(shape), rename(allocated)
    return msgspec.structs.replace(fact, shape=shape, allocated_shape=allocated)


def diagnostic_message(diag: CompilerDiagnostic, fallback_line: int | None) -> Diagnostic:
    """The diagnostic at its line, else at ``fallback_line`` (the kernel's) marked as not located."""
    severity: Literal["error", "warning", "info"] = (
        "warning" if diag.severity == "warning" else "info" if diag.severity == "info" else "error"
    )
    return Diagnostic(
        message=diag.message,
        severity=severity,
        code=diag.code,
        line=diag.line if diag.line is not None else fallback_line,
        column=diag.column,
        file=diag.file,
        related=diag.related,
        located=diag.line is not None,
    )
