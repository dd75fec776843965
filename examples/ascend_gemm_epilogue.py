"""Ascend 950 GEMM with a fused vector epilogue: Cube T.gemm into L0C, T.dual_copy to the two Vector
cores' UB, then bias + ReLU + bf16 cast in a T.SimtVF region (C = relu(A @ B.T + bias))."""

import tilelang.ascend.language as T


def matmul_bias_relu(
    M=512,
    N=512,
    K=512,
    block_M=128,
    block_N=128,
    block_K=128,
    num_stages=2,
    num_blocks=8,
    threads=128,
    dtype=T.bfloat16,
    accum_dtype=T.float32,
):
    assert M % block_M == 0 and N % block_N == 0 and K % block_K == 0, "no partial tiles"
    n_tiles = N // block_N
    half_M = block_M // 2  # each of the two Vector cores owns half of the output tile

    @T.prim_func
    def gemm_bias_relu(
        A: T.Tensor((M, K), dtype),
        B: T.Tensor((N, K), dtype),
        Bias: T.Tensor((N,), accum_dtype),
        C: T.Tensor((M, N), dtype),
    ):
        with T.Kernel(num_blocks) as bx:
            A_l1 = T.alloc_l1((block_M, block_K), dtype)
            B_l1 = T.alloc_l1((block_N, block_K), dtype)
            C_l0c = T.alloc_l0c((block_M, block_N), accum_dtype)
            C_ub = T.alloc_shared((half_M, block_N), accum_dtype)
            bias_ub = T.alloc_shared((block_N,), accum_dtype)
            out_ub = T.alloc_shared((half_M, block_N), dtype)

            for tile in T.Persistent([M // block_M * n_tiles], num_blocks, bx):
                m, n = tile // n_tiles * block_M, tile % n_tiles * block_N
                for k in T.Pipelined(K // block_K, num_stages=num_stages):
                    T.copy(A[m, k * block_K], A_l1)
                    T.copy(B[n, k * block_K], B_l1)
                    T.gemm(A_l1, B_l1, C_l0c, transpose_B=True, clear_accum=(k == 0))
                T.dual_copy(C_l0c, C_ub)
                T.copy(Bias[n : n + block_N], bias_ub)
                with T.SimtVF(threads=threads):
                    for i, j in T.Parallel(half_M, block_N):
                        out_ub[i, j] = T.cast(T.max(C_ub[i, j] + bias_ub[j], 0), dtype)
                T.dual_copy(out_ub, C[m : m + block_M, n : n + block_N])

    return gemm_bias_relu


if __name__ == "__main__":
    import tilelang

    kernel = tilelang.compile(matmul_bias_relu(), out_idx=[3], target="ascend")
    print(kernel.get_kernel_source())
