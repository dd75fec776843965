"""The bundled GEMM as it was before its B became N x K: B stored K x N makes TileLang warn on HIP
(its vectorizer cannot vectorize the copy), which the warning tests need.

Portable across CUDA (sm_80/sm_90/sm_100a), HIP (gfx942/gfx950) and Metal.
"""

import tilelang.language as T


def matmul(
    M=1024,
    N=1024,
    K=1024,
    block_M=128,
    block_N=128,
    block_K=32,
    num_stages=3,
    threads=128,
    dtype=T.float16,
    accum_dtype=T.float32,
):
    @T.prim_func
    def gemm(
        A: T.Tensor((M, K), dtype),
        B: T.Tensor((K, N), dtype),
        C: T.Tensor((M, N), dtype),
    ):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), dtype)
            B_shared = T.alloc_shared((block_K, block_N), dtype)
            C_local = T.alloc_fragment((block_M, block_N), accum_dtype)

            T.clear(C_local)
            for ko in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
                T.copy(A[by * block_M, ko * block_K], A_shared)
                T.copy(B[ko * block_K, bx * block_N], B_shared)
                T.gemm(A_shared, B_shared, C_local)

            T.copy(C_local, C[by * block_M, bx * block_N])

    return gemm


if __name__ == "__main__":
    import tilelang

    kernel = tilelang.compile(matmul(), out_idx=[2])
    print(kernel.get_kernel_source())
