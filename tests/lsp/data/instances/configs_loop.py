"""A kernel tried over a grid of configs, as benchmarks sweep them."""

import itertools

import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[1])
def row_copy(M, N, block_M=32, threads=128):
    @T.prim_func
    def main(A: T.Tensor((M, N), T.float32), B: T.Tensor((M, N), T.float32)):
        with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bx:
            tile = T.alloc_shared((block_M, N), T.float32)
            T.copy(A[bx * block_M, 0], tile)
            T.copy(tile, B[bx * block_M, 0])

    return main


if __name__ == "__main__":
    for (M, N), block_M in itertools.product([(512, 64), (256, 128)], [16, 64]):
        kernel = row_copy(M, N, block_M=block_M)
        print(M, N, block_M, kernel.get_kernel_source()[:80])
