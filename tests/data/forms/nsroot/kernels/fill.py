"""A factory two namespace folders deep that imports its tile from ``..shapes``."""

import tilelang.language as T

from ..shapes import TILE


def fill(M, N, value=7.0, dtype=T.float32):
    @T.prim_func
    def main(Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, TILE), M, threads=64) as (bx, by):
            for j in T.Parallel(TILE):
                Y[by, bx * TILE + j] = T.cast(value, dtype)

    return main
