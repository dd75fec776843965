"""A kernel in a regular package: it takes its tiling from the package's helpers by relative import."""

import tilelang.language as T

from .common import ROW_TILE, pick_block


def relu(M, N, dtype=T.float16):
    block_N = pick_block(N)

    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, ROW_TILE), threads=128) as (bx, by):
            tile = T.alloc_shared((ROW_TILE, block_N), dtype)
            T.copy(X[by * ROW_TILE, bx * block_N], tile)
            for i, j in T.Parallel(ROW_TILE, block_N):
                tile[i, j] = T.max(tile[i, j], T.cast(0, dtype))
            T.copy(tile, Y[by * ROW_TILE, bx * block_N])

    return main
