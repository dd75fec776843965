"""GEMM in TileLang's eager ``@tilelang.jit`` style: tensors are parameters, sizes are declared.

``N`` and ``K`` are ``T.const`` sizes, fixed when the kernel is compiled; ``M`` (the number of
tokens) is ``T.dynamic`` and stays a runtime parameter of the kernel. Record it with the sizes as
keyword arguments, as ``.compile(N=..., K=...)`` takes them: the tensors need no value. ``W`` is
stored N x K, as a linear layer's weight (``Y = X @ W.T``), which HIP's matrix cores load without
TileLang's warning about an unvectorized loop::

    irtrace record "eager_gemm.py::token_matmul(N=4096, K=1024, block_M=64)" -t cuda:sm_90
"""

import tilelang
import tilelang.language as T


@tilelang.jit
def token_matmul(X, W, Y, block_M: int = 64, block_N: int = 128, block_K: int = 32, num_stages: int = 2):
    M = T.dynamic("tokens")
    N, K = T.const("N, K")
    X: T.Tensor[[M, K], T.bfloat16]
    W: T.Tensor[[N, K], T.bfloat16]
    Y: T.Tensor[[M, N], T.bfloat16]
    with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
        X_shared = T.alloc_shared((block_M, block_K), T.bfloat16)
        W_shared = T.alloc_shared((block_N, block_K), T.bfloat16)
        Y_local = T.alloc_fragment((block_M, block_N), T.float32)
        T.clear(Y_local)
        for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
            T.copy(X[by * block_M, k * block_K], X_shared)
            T.copy(W[bx * block_N, k * block_K], W_shared)
            T.gemm(X_shared, W_shared, Y_local, transpose_B=True)
        T.copy(Y_local, Y[by * block_M, bx * block_N])


def reference(x, w):
    """What the kernel computes: W is N x K, so Y = X @ W.T."""
    return x @ w.T


if __name__ == "__main__":
    import torch

    x = torch.randn(300, 1024, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(4096, 1024, device="cuda", dtype=torch.bfloat16)
    y = torch.empty(300, 4096, device="cuda", dtype=torch.bfloat16)
    token_matmul(x, w, y)  # eager: compiles for these shapes and runs
    torch.testing.assert_close(y, reference(x, w), rtol=2e-2, atol=2e-1)
