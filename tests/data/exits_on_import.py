"""A kernel file written as a script: it ends with sys.exit() at module level, no __main__ guard."""

import sys

import tilelang.language as T


@T.prim_func
def fill(A: T.Tensor((256,), T.float32)):
    with T.Kernel(2, threads=128) as bx:
        for i in T.Parallel(128):
            A[bx * 128 + i] = 1.0


sys.exit(0)  # a script's last line, run on every import
