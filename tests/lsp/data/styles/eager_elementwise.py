"""Eager ``@tilelang.jit`` kernels called the way TileLang's elementwise and cast examples call
them: tensors first, tile sizes by keyword, so ``T.const`` sizes are only known from the tensors
(here made where the source text does not say their sizes: only running the program gives them;
without it they stay symbolic); a renamed ``T.dynamic`` row count."""

import tilelang
import tilelang.language as T


@tilelang.jit
def elementwise_add(A, B, block_M, block_N, in_dtype, out_dtype, threads):
    M, N = T.const("M, N")

    A: T.Tensor((M, N), in_dtype)
    B: T.Tensor((M, N), in_dtype)
    C = T.empty((M, N), out_dtype)

    with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
        A_shared = T.alloc_shared((block_M, block_N), in_dtype)
        B_shared = T.alloc_shared((block_M, block_N), in_dtype)
        C_local = T.alloc_fragment((block_M, block_N), out_dtype)

        T.copy(A[by * block_M, bx * block_N], A_shared)
        T.copy(B[by * block_M, bx * block_N], B_shared)
        for local_y, local_x in T.Parallel(block_M, block_N):
            C_local[local_y, local_x] = A_shared[local_y, local_x] + B_shared[local_y, local_x]
        T.copy(C_local, C[by * block_M, bx * block_N])

    return C


@tilelang.jit
def scale_tokens(X, W, block_M: int = 32, block_N: int = 128):
    M = T.dynamic("tokens")
    N = T.const("N")

    X: T.Tensor[[M, N], T.bfloat16]
    W: T.Tensor[[N], T.bfloat16]
    Y = T.empty((M, N), T.bfloat16)

    with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
        x_shared = T.alloc_shared((block_M, block_N), T.bfloat16)
        w_local = T.alloc_fragment((block_N,), T.float32)
        y_local = T.alloc_fragment((block_M, block_N), T.float32)

        T.copy(X[by * block_M, bx * block_N], x_shared)
        T.copy(W[bx * block_N], w_local)
        for i, j in T.Parallel(block_M, block_N):
            y_local[i, j] = x_shared[i, j] * w_local[j]
        T.copy(y_local, Y[by * block_M, bx * block_N])

    return Y


def main(M=1024, N=1024):
    import torch

    pair = torch.randn(2, M, N, dtype=torch.float32, device="cuda")
    a, b = pair.unbind()  # sizes the source text does not say: the program's run gives them
    out = elementwise_add(a, b, block_M=32, block_N=32, threads=128, in_dtype=T.float32, out_dtype=T.float32)
    torch.testing.assert_close(out, a + b)

    scale = scale_tokens.compile(N=2048, block_M=16)
    x = torch.randn(300, 2048, dtype=torch.bfloat16, device="cuda")
    w = torch.randn(2048, dtype=torch.bfloat16, device="cuda")
    torch.testing.assert_close(scale(x, w), x * w, rtol=1e-2, atol=1e-2)


if __name__ == "__main__":
    main()
