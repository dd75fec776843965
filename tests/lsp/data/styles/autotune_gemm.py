"""``@autotune`` kernels in the style of TileLang's flash-attention and GEMM examples: a config
list built by ``get_configs()`` over tunables with defaults, and a configs function over required
tunables. Called without the tunables, so they come from the first config."""

import itertools

import tilelang
import tilelang.language as T
from tilelang.autotuner import autotune


def get_configs():
    iter_params = dict(block_M=[64, 128], block_N=[64, 128], block_K=[32, 64], num_stages=[2, 3], threads=[128])
    return [dict(zip(iter_params, values)) for values in itertools.product(*iter_params.values())]


@autotune(configs=get_configs(), warmup=10, rep=10)
@tilelang.jit(out_idx=[-1])
def matmul(M, N, K, block_M=128, block_N=128, block_K=32, num_stages=3, threads=128, dtype=T.float16):
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


def scale_configs(M, N):
    """Row tiles no taller than the problem."""
    return [{"block_M": block_M, "threads": 128} for block_M in (32, 16) if block_M <= M]


@tilelang.autotune(configs=scale_configs)
@tilelang.jit(out_idx=[-1])
def row_scale(M, N, block_M, threads, dtype=T.float32):
    @T.prim_func
    def main(A: T.Tensor((M, N), dtype), S: T.Tensor((N,), dtype), B: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bx:
            tile = T.alloc_shared((block_M, N), dtype)
            scale = T.alloc_fragment((N,), dtype)
            out = T.alloc_fragment((block_M, N), dtype)
            T.copy(A[bx * block_M, 0], tile)
            T.copy(S, scale)
            for i, j in T.Parallel(block_M, N):
                out[i, j] = tile[i, j] * scale[j]
            T.copy(out, B[bx * block_M, 0])

    return main


def main(M=1024, N=1024, K=1024):
    kernel = matmul(M, N, K)
    print(kernel.get_kernel_source())
    scaled = row_scale(256, 128)
    print(scaled.get_kernel_source())


if __name__ == "__main__":
    main()
