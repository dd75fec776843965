"""A copy kernel that takes its tile size from a sibling module through a relative import."""

import tilelang.language as T

from .tiles import BLOCK


def tiled_copy(M=256, N=256, dtype=T.float16):
    @T.prim_func
    def main(A: T.Tensor((M, N), dtype), B: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, BLOCK), T.ceildiv(M, BLOCK), threads=128) as (bx, by):
            tile = T.alloc_shared((BLOCK, BLOCK), dtype)
            T.copy(A[by * BLOCK, bx * BLOCK], tile)
            T.copy(tile, B[by * BLOCK, bx * BLOCK])

    return main
