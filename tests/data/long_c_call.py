"""Lowers a kernel, says ``LOWERED``, then sits in one long C call that holds the GIL (a builtin
``sum`` over a huge range: Python runs no signal handler until it returns, minutes later)."""

import tilelang
import tilelang.language as T
from tilelang.backend.target import determine_target


def copy(N=1024):
    @T.prim_func
    def main(A: T.Tensor((N,), T.float16), B: T.Tensor((N,), T.float16)):
        with T.Kernel(N // 256, threads=128) as bx:
            for i in T.Parallel(256):
                B[bx * 256 + i] = A[bx * 256 + i]

    return main


target = determine_target({"kind": "cuda", "arch": "sm_90a"}, return_object=True)
with target:
    tilelang.lower(copy(), target=target)
print("LOWERED", flush=True)
sum(range(10**13))
