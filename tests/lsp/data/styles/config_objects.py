"""Tile configurations kept in a dict (``tile_add(M, N, **config)``) or a dataclass
(``cfg.block_M``), and kernels built inside an autograd function from the shapes of the tensors
``.apply`` is given (``forward``) and of those it saved on the context (``backward``), as
TileLang's attention examples build theirs."""

from dataclasses import dataclass

import tilelang
import tilelang.language as T
import torch


@dataclass
class TileConfig:
    block_M: int = 64
    block_N: int = 64
    threads: int = 128


@tilelang.jit(out_idx=[-1])
def tile_add(M, N, block_M, block_N, threads=128, dtype=T.float16):
    @T.prim_func
    def add_one(X: T.Tensor((M, N), dtype), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            tile = T.alloc_fragment((block_M, block_N), dtype)
            T.copy(X[by * block_M, bx * block_N], tile)
            for i, j in T.Parallel(block_M, block_N):
                tile[i, j] = tile[i, j] + T.cast(1, dtype)
            T.copy(tile, Y[by * block_M, bx * block_N])

    return add_one


@tilelang.jit(out_idx=[-1])
def scale_forward(M, N, factor, block_M, block_N, threads=128, dtype=T.float16):
    @T.prim_func
    def scale(X: T.Tensor((M, N), dtype), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            tile = T.alloc_fragment((block_M, block_N), dtype)
            T.copy(X[by * block_M, bx * block_N], tile)
            for i, j in T.Parallel(block_M, block_N):
                tile[i, j] = tile[i, j] * T.cast(factor, dtype)
            T.copy(tile, Y[by * block_M, bx * block_N])

    return scale


@tilelang.jit(out_idx=[-1])
def scale_backward(M, N, factor, block_M=64, dtype=T.float16):
    @T.prim_func
    def scale_grad(dY: T.Tensor((M, N), dtype), dX: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:
            rows = T.alloc_shared((block_M, N), dtype)
            T.copy(dY[bx * block_M, 0], rows)
            for i, j in T.Parallel(block_M, N):
                rows[i, j] = rows[i, j] * T.cast(factor, dtype)
            T.copy(rows, dX[bx * block_M, 0])

    return scale_grad


class _Scale(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, factor):
        M, N = x.shape
        cfg = TileConfig(block_N=32)
        kernel = scale_forward(M, N, factor, cfg.block_M, cfg.block_N, threads=cfg.threads)
        ctx.factor = factor
        ctx.save_for_backward(x)
        return kernel(x)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        M, N = x.shape
        kernel = scale_backward(M, N, ctx.factor, block_M=16)
        return kernel(grad.contiguous()), None


scale = _Scale.apply


def main(M=256, N=128):
    config = {"block_M": 32, "block_N": 64, "threads": 128}
    add = tile_add(M, N, **config)
    x = torch.randn(M, N, device="cuda", dtype=torch.float16, requires_grad=True)
    torch.testing.assert_close(add(x), x + 1)
    y = scale(x, 0.5)
    y.sum().backward()
    torch.testing.assert_close(x.grad, torch.full_like(x, 0.5))


if __name__ == "__main__":
    main()
