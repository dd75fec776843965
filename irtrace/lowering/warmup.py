"""The kernel long-lived processes lower once when they start, so a user's first request is warm."""

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
