"""Row sums and maxima of a tile held in a fragment: T.reduce_sum / T.reduce_max, whose source and
destination fragments layout inference lays out (the layouts tests' reduction kernel)."""

import tilelang.language as T


def row_reduce(M=1024, N=128, block_M=64, threads=128, dtype=T.float32):
    @T.prim_func
    def reduce_rows(A: T.Tensor((M, N), dtype), Sum: T.Tensor((M,), dtype), Max: T.Tensor((M,), dtype)):
        with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bx:
            tile = T.alloc_fragment((block_M, N), dtype)
            row_sum = T.alloc_fragment((block_M,), dtype)
            row_max = T.alloc_fragment((block_M,), dtype)
            T.copy(A[bx * block_M, 0], tile)
            T.reduce_sum(tile, row_sum, dim=1)
            T.reduce_max(tile, row_max, dim=1)
            T.copy(row_sum, Sum[bx * block_M])
            T.copy(row_max, Max[bx * block_M])

    return reduce_rows
