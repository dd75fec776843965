"""Autotuned kernels: ``@tilelang.autotune`` over ``@tilelang.jit``, configs as a list and as a function."""

import itertools

import tilelang
import tilelang.language as T

GEMM_CONFIGS = [
    {
        "block_M": 64,
        "block_N": 32,
        "block_K": 32,
        "num_stages": 2,
        "threads": 128,
        "pass_configs": {"tl.disable_warp_specialized": True},
    },
    {"block_M": 128, "block_N": 128, "block_K": 64, "num_stages": 3, "threads": 256},
]


@tilelang.autotune(configs=GEMM_CONFIGS, warmup=5, rep=10)
@tilelang.jit(out_idx=[-1])
def tuned_matmul(M, N, K, block_M, block_N, block_K, num_stages, threads, dtype=T.float16):
    accum_dtype = T.float32

    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), dtype)
            B_shared = T.alloc_shared((block_K, block_N), dtype)
            C_local = T.alloc_fragment((block_M, block_N), accum_dtype)
            T.clear(C_local)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
                T.copy(A[by * block_M, k * block_K], A_shared)
                T.copy(B[k * block_K, bx * block_N], B_shared)
                T.gemm(A_shared, B_shared, C_local)
            T.copy(C_local, C[by * block_M, bx * block_N])

    return main


def row_sum_configs(M, N):
    """Tile widths that divide the row length, widest first."""
    return [
        {"block_N": width, "threads": threads}
        for width, threads in itertools.product([N // 4, N // 8], [128])
    ]


@tilelang.autotune(configs=row_sum_configs)
@tilelang.jit(out_idx=[-1])
def tuned_row_sum(M, N, block_N=64, threads=128, dtype=T.float32):
    @T.prim_func
    def main(A: T.Tensor((M, N), dtype), S: T.Tensor((M,), dtype)):
        with T.Kernel(M, threads=threads) as bx:
            tile = T.alloc_fragment((block_N,), dtype)
            partial = T.alloc_fragment((1,), dtype)
            total = T.alloc_fragment((1,), dtype)
            T.clear(total)
            for k in T.serial(T.ceildiv(N, block_N)):
                T.copy(A[bx, k * block_N], tile)
                T.reduce_sum(tile, partial, dim=0)
                total[0] += partial[0]
            S[bx] = total[0]

    return main
