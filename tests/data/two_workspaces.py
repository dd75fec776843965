"""Two cross-thread reductions in one kernel: each gets its own ``workspace`` buffer in shared memory.

``tl.LowerTileOp`` names both buffers ``workspace``; the codegen makes them ``workspace`` and
``workspace_1`` in the order ``tl.MergeSharedMemoryAllocations`` binds them. With only these two
shared buffers that order is fixed, so traced and untraced lowering must name them alike."""

import tilelang.language as T


def row_stats(M=64, N=1024, block_M=4, threads=256, dtype=T.float32):
    @T.prim_func
    def stats(A: T.Tensor((M, N), dtype), Mx: T.Tensor((M,), dtype), S: T.Tensor((M,), dtype)):
        with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bx:
            A_frag = T.alloc_fragment((block_M, N), dtype)
            row_max = T.alloc_fragment((block_M,), dtype)
            row_sum = T.alloc_fragment((block_M,), dtype)
            T.copy(A[bx * block_M, 0], A_frag)
            T.reduce_max(A_frag, row_max, dim=1)
            T.reduce_sum(A_frag, row_sum, dim=1)
            T.copy(row_max, Mx[bx * block_M])
            T.copy(row_sum, S[bx * block_M])

    return stats
