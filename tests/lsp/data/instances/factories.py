"""A module of kernel factories with no entry point, as libraries ship them: the sizes of the
problem are required parameters nobody in this file gives, the tiles have defaults."""

import tilelang.language as T


def gemm_relu(M, N, K, block_M=128, block_N=128, block_K=32, num_stages=2, dtype=T.float16):
    accum_dtype = T.float32

    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), dtype)
            B_shared = T.alloc_shared((block_K, block_N), dtype)
            C_local = T.alloc_fragment((block_M, block_N), accum_dtype)
            T.clear(C_local)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
                T.copy(A[by * block_M, k * block_K], A_shared)
                T.copy(B[k * block_K, bx * block_N], B_shared)
                T.gemm(A_shared, B_shared, C_local)
            for i, j in T.Parallel(block_M, block_N):
                C_local[i, j] = T.max(C_local[i, j], 0)
            T.copy(C_local, C[by * block_M, bx * block_N])

    return main


def row_tiles(M, N, block_M=64):
    """A tile as wide as the whole row: its shape depends on a size nobody gives."""

    @T.prim_func
    def main(X: T.Tensor((M, N), T.float32), Y: T.Tensor((M, N), T.float32)):
        with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:
            row = T.alloc_shared((block_M, N), T.float32)
            T.copy(X[bx * block_M, 0], row)
            T.copy(row, Y[bx * block_M, 0])

    return main


def split_heads(batch, heads, dim, block=32):
    """Needs a number: Python checks the size before it builds."""
    assert dim % block == 0, "dim must be a multiple of block"

    @T.prim_func
    def main(X: T.Tensor((batch, heads, dim), T.float16), Y: T.Tensor((batch, heads, dim), T.float16)):
        with T.Kernel(batch, heads, threads=128) as (b, h):
            part = T.alloc_shared((dim,), T.float16)
            T.copy(X[b, h, 0], part)
            T.copy(part, Y[b, h, 0])

    return main
