"""A kernel file that picks TileLang's "auto" target and lowers at import, as kernel libraries
do; on a machine without a GPU that needs irtrace's fallback target."""

import tilelang
import tilelang.language as T
from tilelang.backend.target import determine_target


def scale(M=256, N=256, block=128):
    @T.prim_func
    def main(A: T.Tensor((M, N), T.float32), B: T.Tensor((M, N), T.float32)):
        with T.Kernel(T.ceildiv(N, block), M, threads=128) as (bx, by):
            for i in T.Parallel(block):
                B[by, bx * block + i] = A[by, bx * block + i] * 2.0

    return main


TARGET = determine_target("auto", return_object=True)
with TARGET:
    LOWERED_AT_IMPORT = tilelang.lower(scale(), target=TARGET)

if __name__ == "__main__":
    print(LOWERED_AT_IMPORT.kernel_source[:80])
