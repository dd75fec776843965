"""The order completion offers TileLang's names in (LSP ``sortText``): what kernel authors write
most first, then the rest of TileLang's own API, then what it re-exports from TVM (``Add``,
``And``, ``Any``: IR node classes a kernel almost never names)."""

from __future__ import annotations

import os

from tilelang_lsp.protocol import ApiEntry

MOST_USED = (
    "copy",
    "Tensor",
    "alloc_fragment",
    "Parallel",
    "alloc_shared",
    "ceildiv",
    "float32",
    "gemm",
    "clear",
    "Kernel",
    "float16",
    "if_then_else",
    "fill",
    "exp2",
    "Pipelined",
    "GemmWarpPolicy",
    "int32",
    "prim_func",
    "infinity",
    "serial",
    "bfloat16",
    "reduce_sum",
    "mbarrier_wait_parity",
    "uint16",
    "alloc_barrier",
    "empty",
    "max",
    "const",
    "alloc_var",
    "uint32",
    "tma_copy",
    "mbarrier_arrive",
    "alloc_local",
    "reduce_max",
    "min",
    "unroll",
    "barrier_arrive",
    "dynamic",
    "dtype",
    "get_thread_binding",
    "atomic_add",
    "barrier_wait",
    "sync_threads",
    "use_swizzle",
    "cast",
    "alloc_tmem",
    "int8",
    "WSSync",
    "annotate_layout",
    "log2",
    "alloc_cluster_barrier",
    "tcgen05_gemm",
    "wgmma_gemm",
    "WSID",
    "uint8",
    "vectorized",
    "access_ptr",
    "exp",
    "set_max_nreg",
    "tcgen05_mma_arrive",
    "float",
    "floordiv",
)
"""``T.<name>`` by number of uses, most first, every name written at least 20 times: counted with
``grep -rhoE '\\bT\\.[A-Za-z_][A-Za-z0-9_]*'`` over TileLang's own ``examples/`` (285 files at
tile-ai/tilelang a35008a, 2026-08-21) and this project's ``examples/`` and ``tests/data/``
kernels (``copy`` 1562 uses, ``Tensor`` 1270, ``alloc_fragment`` 1177, ..., ``floordiv`` 20). A
name the installed TileLang does not have is simply never offered."""

_RANK = {name: rank for rank, name in enumerate(MOST_USED)}


def sort_text(entry: ApiEntry, tilelang_folder: str | None) -> str:
    """``0`` and the rank for the most used names, ``1`` for the rest of TileLang's own API (its
    modules and what is defined in its files), ``2`` for what comes from TVM or is unknown; by
    name within each (LSP clients compare ``sortText`` as plain strings)."""
    rank = _RANK.get(entry.name)
    if rank is not None:
        return f"0{rank:03d}{entry.name}"
    return f"{1 if _own(entry, tilelang_folder) else 2}{entry.name.lower()}"


def _own(entry: ApiEntry, tilelang_folder: str | None) -> bool:
    if entry.kind == "module":
        return (entry.module or "").startswith("tilelang")
    if entry.file is None or tilelang_folder is None:
        return False
    folder = os.path.join(tilelang_folder, "")
    return entry.file.startswith(folder) and not entry.file.startswith(os.path.join(folder, "3rdparty", ""))
