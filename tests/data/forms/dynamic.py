"""Kernels whose sizes stay symbolic: ``T.dynamic`` in a factory and in a lazy ``@tilelang.jit``."""

import tilelang
import tilelang.language as T


def dynamic_copy(N=512, block_M=64, block_N=128, dtype=T.float16):
    M = T.dynamic("m")

    @T.prim_func
    def main(A: T.Tensor((M, N), dtype), B: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            tile = T.alloc_shared((block_M, block_N), dtype)
            T.copy(A[by * block_M, bx * block_N], tile)
            T.copy(tile, B[by * block_M, bx * block_N])

    return main


@tilelang.jit(out_idx=[-1])
def dynamic_rows_add(N, block_N=128, dtype=T.float32):
    M = T.symbolic("m")

    @T.prim_func
    def main(A: T.Tensor((M, N), dtype), B: T.Tensor((M, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), M, threads=128) as (bx, by):
            for j in T.Parallel(block_N):
                C[by, bx * block_N + j] = A[by, bx * block_N + j] + B[by, bx * block_N + j]

    return main
