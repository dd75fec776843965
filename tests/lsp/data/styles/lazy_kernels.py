"""The classic styles: a module-level ``@T.prim_func`` with fixed sizes and a factory that
returns one, built by ``tilelang.compile(factory(...))``."""

import tilelang
import tilelang.language as T


@T.prim_func
def copy_tile(A: T.Tensor((256, 256), T.float16), B: T.Tensor((256, 256), T.float16)):
    with T.Kernel(4, 4, threads=128) as (bx, by):
        tile = T.alloc_shared((64, 64), T.float16)
        T.copy(A[by * 64, bx * 64], tile)
        T.copy(tile, B[by * 64, bx * 64])


def add_bias(M, N, block_M=64, block_N=64, dtype=T.float32):
    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), bias: T.Tensor((N,), dtype), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            x_local = T.alloc_fragment((block_M, block_N), dtype)
            b_local = T.alloc_fragment((block_N,), dtype)
            T.copy(X[by * block_M, bx * block_N], x_local)
            T.copy(bias[bx * block_N], b_local)
            for i, j in T.Parallel(block_M, block_N):
                x_local[i, j] += b_local[j]
            T.copy(x_local, Y[by * block_M, bx * block_N])

    return main


if __name__ == "__main__":
    kernel = tilelang.compile(add_bias(512, 256), out_idx=[2])
