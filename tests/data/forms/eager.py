"""Eager ``@tilelang.jit`` kernels: tensor parameters, ``T.const`` sizes and ``T.dynamic`` sizes."""

import tilelang
import tilelang.language as T


@tilelang.jit
def eager_matmul(A, B, C, block_M: int = 64, block_N: int = 64, block_K: int = 32, num_stages: int = 2):
    M, N, K = T.const("M, N, K")
    dtype = T.float16
    A: T.Tensor[[M, K], dtype]
    B: T.Tensor[[K, N], dtype]
    C: T.Tensor[[M, N], dtype]
    with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
        A_shared = T.alloc_shared((block_M, block_K), dtype)
        B_shared = T.alloc_shared((block_K, block_N), dtype)
        C_local = T.alloc_fragment((block_M, block_N), T.float32)
        T.clear(C_local)
        for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
            T.copy(A[by * block_M, k * block_K], A_shared)
            T.copy(B[k * block_K, bx * block_N], B_shared)
            T.gemm(A_shared, B_shared, C_local)
        T.copy(C_local, C[by * block_M, bx * block_N])


@tilelang.jit
def eager_ragged_scale(X, Y, factor: float = 0.5, block: int = 256):
    rows = T.dynamic("rows")
    cols = T.const("cols")
    X: T.Tensor[[rows, cols], T.float32]
    Y: T.Tensor[[rows, cols], T.float32]
    with T.Kernel(rows, T.ceildiv(cols, block), threads=block) as (bx, by):
        for j in T.Parallel(block):
            if by * block + j < cols:
                Y[bx, by * block + j] = X[bx, by * block + j] * factor
