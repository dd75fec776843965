"""A kernel whose one fragment is easy to reshape by hand: rows of A through a register
fragment, doubled, into B (irtrace resume's test edits the fragment's shape)."""

import tilelang.language as T


def scale_rows(M=128, N=64, block_M=32, dtype=T.float32):
    @T.prim_func
    def scale(A: T.Tensor((M, N), dtype), B: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:
            rows = T.alloc_fragment((block_M, N), dtype)
            T.copy(A[bx * block_M, 0], rows)
            for i, j in T.Parallel(block_M, N):
                rows[i, j] = rows[i, j] * 2
            T.copy(rows, B[bx * block_M, 0])

    return scale
