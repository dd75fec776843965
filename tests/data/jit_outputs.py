"""Kernels whose outputs TileLang's JIT allocates: a lazy ``@tilelang.jit(out_idx=[-1])`` kernel and
an eager one returning its ``T.empty`` tensor. Their ``__main__`` calls both, as a program would."""

import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[-1])
def add_one(N, block=128):
    @T.prim_func
    def main(A: T.Tensor((N,), T.float32), B: T.Tensor((N,), T.float32)):
        with T.Kernel(T.ceildiv(N, block), threads=128) as bx:
            for i in T.Parallel(block):
                B[bx * block + i] = A[bx * block + i] + 1.0

    return main


@tilelang.jit
def double(A):
    N = T.const("N")
    A: T.Tensor((N,), T.float32)
    B = T.empty((N,), T.float32)
    with T.Kernel(T.ceildiv(N, 128), threads=128) as bx:
        for i in T.Parallel(128):
            B[bx * 128 + i] = A[bx * 128 + i] * 2.0
    return B


if __name__ == "__main__":
    import torch

    a = torch.randn(1024, device="cuda")
    b = add_one(1024)(a)
    c = double(a)
    print(b.shape, c.shape)
