"""Hand-written Hopper warp-specialized GEMM: a TMA producer warpgroup (T.tma_copy + full/empty mbarriers)
feeds a WGMMA consumer warpgroup through a multi-stage shared-memory ring, with T.set_max_nreg rebalancing."""

import tilelang.cuda.language as T


def hopper_ws_gemm(
    M=1024,
    N=1024,
    K=1024,
    block_M=128,
    block_N=128,
    block_K=64,
    num_stages=3,
    dtype=T.float16,
    accum_dtype=T.float32,
):
    k_iters = T.ceildiv(K, block_K)

    @T.prim_func
    def gemm_ws(
        A: T.Tensor((M, K), dtype),
        B: T.Tensor((K, N), dtype),
        C: T.Tensor((M, N), dtype),
    ):
        # Warpgroup 0 (threads 0-127) consumes with WGMMA; warpgroup 1 (threads 128-255) produces with TMA.
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=256) as (bx, by):
            A_shared = T.alloc_shared((num_stages, block_M, block_K), dtype)
            B_shared = T.alloc_shared((num_stages, block_K, block_N), dtype)
            C_local = T.alloc_fragment((block_M, block_N), accum_dtype)
            full = T.alloc_barrier([128] * num_stages)  # stage s holds data (TMA bytes landed)
            empty = T.alloc_barrier([128] * num_stages)  # stage s was consumed by the MMA warpgroup

            tx = T.get_thread_binding()
            if tx >= 128:  # producer
                T.set_max_nreg(24, 0)
                for ko in T.serial(k_iters):
                    s = ko % num_stages
                    T.mbarrier_wait_parity(empty[s], ((ko // num_stages) & 1) ^ 1)
                    T.tma_copy(
                        A[by * block_M : (by + 1) * block_M, ko * block_K : (ko + 1) * block_K],
                        A_shared[s, :, :],
                        barrier=full[s],
                    )
                    T.tma_copy(
                        B[ko * block_K : (ko + 1) * block_K, bx * block_N : (bx + 1) * block_N],
                        B_shared[s, :, :],
                        barrier=full[s],
                    )
                    T.mbarrier_arrive(full[s])
            else:  # consumer
                T.set_max_nreg(240, 1)
                T.clear(C_local)
                for ko in T.serial(k_iters):
                    s = ko % num_stages
                    T.mbarrier_wait_parity(full[s], (ko // num_stages) & 1)
                    T.gemm(A_shared[s, :, :], B_shared[s, :, :], C_local)
                    T.mbarrier_arrive(empty[s])
                T.copy(C_local, C[by * block_M, bx * block_N])

    return gemm_ws


if __name__ == "__main__":
    import tilelang

    kernel = tilelang.compile(hopper_ws_gemm(), out_idx=[2])  # needs an sm_90 GPU / target
    print(kernel.get_kernel_source())
