"""GEMM with a ReLU epilogue under ``@tilelang.autotune``: tile sizes come from a config space.

``irtrace record "autotune_gemm.py::matmul_relu(1024, 1024, 1024)"`` does not tune: it traces the
first config of ``gemm_configs(1024, 1024, 1024)`` and records those values under
``args.autotune_defaults``. Give a tunable in the spec (``block_M=64``) to trace another one."""

import itertools

import tilelang
import tilelang.language as T


def gemm_configs(M, N, K):
    """Tiles no larger than the problem, deeper pipelines only when K has room for them."""
    configs = []
    for block_M, block_N, block_K, num_stages in itertools.product([128, 64], [128, 64], [32, 64], [2, 3]):
        if block_M <= M and block_N <= N and num_stages * block_K <= K:
            configs.append(
                {
                    "block_M": block_M,
                    "block_N": block_N,
                    "block_K": block_K,
                    "num_stages": num_stages,
                    "threads": 128,
                }
            )
    return configs


@tilelang.autotune(configs=gemm_configs, warmup=10, rep=20)
@tilelang.jit(out_idx=[-1])
def matmul_relu(
    M, N, K, block_M, block_N, block_K, num_stages, threads, dtype=T.float16, accum_dtype=T.float32
):
    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((N, K), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), dtype)
            B_shared = T.alloc_shared((block_N, block_K), dtype)
            C_local = T.alloc_fragment((block_M, block_N), accum_dtype)
            T.clear(C_local)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
                T.copy(A[by * block_M, k * block_K], A_shared)
                T.copy(B[bx * block_N, k * block_K], B_shared)
                T.gemm(A_shared, B_shared, C_local, transpose_B=True)  # B is N x K
            for i, j in T.Parallel(block_M, block_N):
                C_local[i, j] = T.max(C_local[i, j], 0)
            T.copy(C_local, C[by * block_M, bx * block_N])

    return main


def reference(a, b):
    """What the kernel computes: B is N x K, so relu(A @ B.T)."""
    import torch

    return torch.relu(a @ b.T)


if __name__ == "__main__":
    import torch

    a = torch.randn(1024, 1024, device="cuda", dtype=torch.float16)
    b = torch.randn(1024, 1024, device="cuda", dtype=torch.float16)
    kernel = matmul_relu(1024, 1024, 1024)  # tunes over gemm_configs(1024, 1024, 1024) on the GPU
    torch.testing.assert_close(kernel(a, b), reference(a, b), rtol=1e-2, atol=1e-2)
