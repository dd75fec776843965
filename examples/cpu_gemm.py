"""A GEMM in the CPU style: tiles in `T.alloc_local`, moved by `T.copy`, no thread index.

TileLang's CPU targets (`c`, `llvm`) have no SIMT threads, so a kernel body must not index
threads; this one lowers there (and on CUDA and HIP as one thread per block), while the GPU
GEMM in gemm.py is refused by the CPU targets with a clear TileLang error.
"""

import tilelang.language as T


def cpu_gemm(M=256, N=256, K=256, block_M=32, block_N=32, block_K=32, dtype=T.float32, accum_dtype=T.float32):
    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M)) as (bx, by):
            A_local = T.alloc_local((block_M, block_K), dtype)
            B_local = T.alloc_local((block_K, block_N), dtype)
            C_local = T.alloc_local((block_M, block_N), accum_dtype)
            T.clear(C_local)
            for ko in T.Pipelined(T.ceildiv(K, block_K), num_stages=0):
                T.copy(A[by * block_M, ko * block_K], A_local)
                T.copy(B[ko * block_K, bx * block_N], B_local)
                for i, j, k in T.grid(block_M, block_N, block_K):
                    C_local[i, j] += A_local[i, k] * B_local[k, j]
            T.copy(C_local, C[by * block_M, bx * block_N])

    return main
