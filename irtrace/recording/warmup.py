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


def prepare_process() -> tuple[str, str]:
    """Import tilelang (the slow import) and ready the meta tensors that entry-point runs use:
    PyTorch imports torch._dynamo on the first meta operation (1-6 s), which must not land in any
    request's time limit. Once per process; the folder tilelang came from and its version."""
    import os

    import tilelang

    from irtrace.recording.resolve.entry_point import warm_meta_tensors

    warm_meta_tensors()
    return os.path.dirname(tilelang.__file__ or ""), str(getattr(tilelang, "__version__", "?"))


def warm_up(target: str) -> float:
    """Lower ``WARMUP_KERNEL`` once for ``target`` through the recorder, as every request will
    (after ``prepare_process``); the seconds it took. Both servers' workers warm up this one way; a
    failure is printed, never raised: a cold worker still works."""
    import tempfile
    import time
    import traceback
    from pathlib import Path

    from irtrace.core.specs import parse_spec
    from irtrace.core.trace_writer import TraceWriter
    from irtrace.recording.api import RecordRequest, record_kernels

    began = time.perf_counter()
    prepare_process()
    with tempfile.TemporaryDirectory(prefix="irtrace-warmup-") as folder:
        path = Path(folder) / "irtrace_warmup.py"
        path.write_text(WARMUP_KERNEL, encoding="utf-8")
        try:
            record_kernels([RecordRequest(parse_spec(f"{path}::warmup()"), (target,))], TraceWriter(None))
        except Exception:
            traceback.print_exc()
    return time.perf_counter() - began
