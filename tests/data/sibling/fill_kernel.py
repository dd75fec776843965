"""Module-level PrimFuncs, one using a sibling helper module."""

import tilelang.language as T
from helpers_for_kernel import THREADS


@T.prim_func
def fill_ones(A: T.Tensor((256,), T.float32)):
    with T.Kernel(2, threads=THREADS) as bx:
        for i in T.Parallel(128):
            A[bx * 128 + i] = 1.0


@T.prim_func
def fill_twos(A: T.Tensor((256,), T.float32)):
    with T.Kernel(2, threads=THREADS) as bx:
        for i in T.Parallel(128):
            A[bx * 128 + i] = 2.0


if __name__ == "__main__":
    raise SystemExit("the __main__ block must not run")
