"""A kernel written to fail layout inference: one fragment, two incompatible layouts."""

import tilelang.language as T


def conflicting_layouts(M=128, N=128, K=64, dtype=T.float16, accum_dtype=T.float32):
    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), accum_dtype)):
        with T.Kernel(1, threads=128) as bx:
            A_shared = T.alloc_shared((M, K), dtype)
            B_shared = T.alloc_shared((K, N), dtype)
            C_local = T.alloc_fragment((M, N), accum_dtype)
            D_local = T.alloc_fragment((M, N), accum_dtype)
            T.copy(A, A_shared)
            T.copy(B, B_shared)
            T.gemm(A_shared, B_shared, C_local)
            for i, j in T.Parallel(M, N):
                D_local[i, j] = C_local[j, i]
            T.gemm(A_shared, B_shared, D_local)
            T.copy(D_local, C)

    return main
