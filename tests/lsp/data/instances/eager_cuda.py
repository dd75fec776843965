"""An eager ``@tilelang.jit`` kernel called with tensors made on the GPU before the call."""

import tilelang
import tilelang.language as T


@tilelang.jit
def scale_rows(X, Y, factor: float = 2.0, block_M: int = 32):
    M, N = T.const("M, N")
    X: T.Tensor[[M, N], T.float16]
    Y: T.Tensor[[M, N], T.float16]
    with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:
        tile = T.alloc_shared((block_M, N), T.float16)
        acc = T.alloc_fragment((block_M, N), T.float32)
        T.copy(X[bx * block_M, 0], tile)
        for i, j in T.Parallel(block_M, N):
            acc[i, j] = tile[i, j] * factor
        T.copy(acc, Y[bx * block_M, 0])


def make_inputs(rows, cols):
    import torch

    x = torch.randn(rows, cols, dtype=torch.float16).cuda()
    return x, torch.empty_like(x)


if __name__ == "__main__":
    import torch

    assert torch.__version__
    x, y = make_inputs(96, 64)
    scale_rows(x, y, block_M=16)
    torch.testing.assert_close(y, x * 2)
