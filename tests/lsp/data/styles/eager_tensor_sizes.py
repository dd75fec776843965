"""Eager ``@tilelang.jit`` kernels called with tensors, as TileLang's eager examples run them:
each ``T.const`` size is the size the tensors passed for it are made with (``torch.randn(M, K)``,
``torch.zeros(N)``, ``torch.rand(a.shape[0], 2 * N)``, ``torch.ones(x.size(0))``), read from the
source; a call with nothing but tensors then says every size."""

import tilelang
import tilelang.language as T


@tilelang.jit
def matmul_bias(A, B, Bias, block_M, block_N, block_K, dtype=T.float16, accum_dtype=T.float32):
    M, N, K = T.const("M, N, K")

    A: T.Tensor((M, K), dtype)
    B: T.Tensor((K, N), dtype)
    Bias: T.Tensor((N,), dtype)
    C = T.empty((M, N), dtype)

    with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
        A_shared = T.alloc_shared((block_M, block_K), dtype)
        B_shared = T.alloc_shared((block_K, block_N), dtype)
        C_local = T.alloc_fragment((block_M, block_N), accum_dtype)

        T.clear(C_local)
        for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=2):
            T.copy(A[by * block_M, k * block_K], A_shared)
            T.copy(B[k * block_K, bx * block_N], B_shared)
            T.gemm(A_shared, B_shared, C_local)
        for i, j in T.Parallel(block_M, block_N):
            C_local[i, j] += Bias[bx * block_N + j]
        T.copy(C_local, C[by * block_M, bx * block_N])

    return C


@tilelang.jit
def scale_rows(X, S, block_M: int = 32):
    M, N = T.const("M, N")
    rows = M  # the shapes below name M through another name

    X: T.Tensor((rows, N), T.float32)
    S: T.Tensor((rows,), T.float32)
    Y = T.empty((rows, N), T.float32)

    with T.Kernel(T.ceildiv(rows, block_M), threads=128) as bx:
        tile = T.alloc_fragment((block_M, N), T.float32)
        T.copy(X[bx * block_M, 0], tile)
        for i, j in T.Parallel(block_M, N):
            tile[i, j] = tile[i, j] * S[bx * block_M + i]
        T.copy(tile, Y[bx * block_M, 0])

    return Y


def main(M=512, N=256, K=128):
    import torch

    a = torch.randn(M, K, device="cuda").half()
    b = torch.randn((K, N), dtype=torch.float16, device="cuda")
    bias = torch.zeros(N, dtype=torch.float16, device="cuda")
    c = matmul_bias(a, b, bias, 64, 64, 32)
    torch.testing.assert_close(c, (a @ b + bias).half(), rtol=1e-2, atol=1e-2)

    x = torch.rand(a.shape[0], 2 * N, device="cuda")
    s = torch.ones(x.size(0), device="cuda")
    torch.testing.assert_close(scale_rows(x, s), x * s[:, None])


if __name__ == "__main__":
    main()
