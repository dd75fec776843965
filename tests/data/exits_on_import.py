"""A kernel file written as a script: it calls sys.exit(0) at module level, before its kernel."""

import sys

import tilelang.language as T

if len(sys.argv) < 3:
    sys.exit(0)  # "nothing to do": a script's habit, run on every import


@T.prim_func
def never_reached(A: T.Tensor((256,), T.float32)):
    with T.Kernel(2, threads=128) as bx:
        for i in T.Parallel(128):
            A[bx * 128 + i] = 1.0
