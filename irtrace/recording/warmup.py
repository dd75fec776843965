"""The kernel long-lived processes lower once when they start, so a user's first request is warm."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from irtrace.core.targets import TargetSpec

WARMUP_KERNEL = """
import tilelang.language as T


def warmup(M=64, N=64, K=32):
    @T.prim_func
    def main(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16), C: T.Tensor((M, N), T.float16)):
        with T.Kernel(1, 1, threads=128) as (bx, by):
            A_s = T.alloc_shared((M, K), T.float16)
            B_s = T.alloc_shared((K, N), T.float16)
            C_f = T.alloc_fragment((M, N), T.float32)
            T.clear(C_f)
            T.copy(A, A_s)
            T.copy(B, B_s)
            T.gemm(A_s, B_s, C_f)
            T.copy(C_f, C)

    return main
"""
"""A tiny GEMM of our own that long-lived processes (the language server's worker, the MCP
server's) lower once at start: the first lowering in a process costs about a second more,
and every child forked afterwards starts warm."""


_error_path_warm = False


def warm_error_path() -> float:
    """Make TVM set up its error backtraces now, once per process; returns the seconds it took.

    The first error that crosses TVM's C++ frames in a process builds libbacktrace's state and
    reads the symbols of TVM's libraries, about 1-2 s; later errors take well under a
    millisecond. Without this, that second lands in whichever pass fails first, so a checker
    that takes 0.3 ms would be timed at over a second. Processes forked afterwards (``--jobs``
    workers) start warm. An unknown target kind is the cheapest error TVM raises in C++.
    """
    global _error_path_warm
    if _error_path_warm:
        return 0.0
    import contextlib
    import time

    import tilelang  # noqa: F401  (puts its own TVM on the path)
    import tvm

    began = time.perf_counter()
    with contextlib.suppress(Exception):  # TVM's ValueError, built with its backtrace: the point
        tvm.target.Target("irtrace-warm-up-no-such-target-kind")
    _error_path_warm = True
    return time.perf_counter() - began


WARM_BEFORE_FORK = "IRTRACE_WARM_BEFORE_FORK"
"""Environment switch of ``warm_backends`` for ``--jobs`` recordings: ``1`` lowers the warm-up
kernel once per backend in the parent before the workers are forked, ``0`` (the default) does
not (``bench/record_scale.py --compare-warm`` measures both)."""
_WARMUP_FILE = "<irtrace-warmup>/irtrace_warmup.py"
"""The warm-up kernel's file name for TileLang's frontend (``linecache``): no file on disk."""


def native_threads() -> int:
    """Threads of this process as the kernel counts them (TVM's and TileLang's native ones too);
    0 where ``/proc`` is missing."""
    import os

    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return 0


def warm_backends(backends: Iterable[TargetSpec]) -> dict[str, str | None]:
    """Lower the warm-up kernel once for each backend of the ``tilelang`` dialect (untraced) and
    return each one's kernel source (``None`` where it failed to lower): run in the parent of
    ``--jobs`` workers before they are forked, each worker inherits the imports and caches a
    backend's first lowering fills, instead of paying for them.

    A fork must not copy a thread that holds a lock: this raises if a lowering left one running.
    """
    import linecache

    import tilelang
    import tvm

    from irtrace.recording.tvm_targets import make_tvm_target

    threads = native_threads()
    linecache.cache[_WARMUP_FILE] = (len(WARMUP_KERNEL), None, WARMUP_KERNEL.splitlines(True), _WARMUP_FILE)
    namespace: dict[str, object] = {"__name__": "irtrace_warmup"}
    exec(compile(WARMUP_KERNEL, _WARMUP_FILE, "exec"), namespace)  # our own constant text
    factory = namespace["warmup"]
    assert callable(factory)
    sources: dict[str, str | None] = {}
    for spec in backends:
        if spec.backend in sources or spec.dialect != "tilelang":
            continue
        sources[spec.backend] = None
        try:
            target = make_tvm_target(spec)
            with tvm.transform.PassContext(opt_level=3), target:
                sources[spec.backend] = str(tilelang.lower(factory(), target=target).kernel_source)
        except Exception:  # a backend that cannot lower it is warmed as far as it got
            pass
    if native_threads() > threads:
        raise RuntimeError("warming the backends left a thread running: forking now is unsafe")
    return sources
