"""A kernel in a folder without ``__init__.py`` (a namespace package) reaching up with ``..``."""

import tilelang
import tilelang.language as T

from ..common import ROW_TILE, pick_block


@tilelang.jit(out_idx=[-1])
def scale(M, N, factor=3.0, dtype=T.float32):
    block_N = pick_block(N, widest=128)

    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, ROW_TILE), threads=128) as (bx, by):
            tile = T.alloc_shared((ROW_TILE, block_N), dtype)
            T.copy(X[by * ROW_TILE, bx * block_N], tile)
            for i, j in T.Parallel(ROW_TILE, block_N):
                tile[i, j] = tile[i, j] * factor
            T.copy(tile, Y[by * ROW_TILE, bx * block_N])

    return main
