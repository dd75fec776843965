"""Two small kernels, as a kernel library would ship them."""

import tilelang.language as T


def tiled_copy(M, N, block=64, dtype=T.float16):
    @T.prim_func
    def copy(A: T.Tensor((M, N), dtype), B: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block), T.ceildiv(M, block), threads=128) as (bx, by):
            tile = T.alloc_shared((block, block), dtype)
            T.copy(A[by * block, bx * block], tile)
            T.copy(tile, B[by * block, bx * block])

    return copy


def scale(N, factor=2.0, block=256, dtype=T.float32):
    @T.prim_func
    def scaled(A: T.Tensor((N,), dtype), B: T.Tensor((N,), dtype)):
        with T.Kernel(T.ceildiv(N, block), threads=128) as bx:
            for i in T.Parallel(block):
                B[bx * block + i] = A[bx * block + i] * factor

    return scaled
