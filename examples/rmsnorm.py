"""RMSNorm: per-thread partial sums of squares + a shared-memory tree reduction, then rsqrt scaling.

The reduction is written by hand (not T.reduce_sum) because tilelang 0.1.15 has no Metal tl.reduce."""

import tilelang.language as T


def rms_norm(M=1024, N=1024, blk_m=1, threads=128, eps=1e-6, dtype=T.float32, accum_dtype=T.float32):
    assert threads & (threads - 1) == 0, "threads must be a power of two"
    assert N % threads == 0, "N must be a multiple of threads"
    log2_threads = threads.bit_length() - 1

    @T.prim_func
    def rmsnorm(A: T.Tensor((M, N), dtype), B: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, blk_m), threads=threads) as bx:
            tx = T.get_thread_binding()
            A_shared = T.alloc_shared((blk_m, N), dtype)
            partial = T.alloc_shared((blk_m, threads), accum_dtype)
            acc = T.alloc_local((blk_m,), accum_dtype)

            T.copy(A[bx * blk_m : (bx + 1) * blk_m, :], A_shared)
            for i in T.serial(blk_m):
                acc[i] = 0
                for j in T.serial(N // threads):
                    x = T.cast(A_shared[i, j * threads + tx], accum_dtype)
                    acc[i] += x * x
                partial[i, tx] = acc[i]
            # Tree reduction over threads: stride threads/2, threads/4, ..., 1.
            for s in T.unroll(log2_threads):
                T.sync_threads()
                for i in T.serial(blk_m):
                    if tx < (threads >> (s + 1)):
                        partial[i, tx] += partial[i, tx + (threads >> (s + 1))]
            T.sync_threads()
            for i, j in T.Parallel(blk_m, N):
                B[bx * blk_m + i, j] = T.cast(A_shared[i, j] * T.rsqrt(partial[i, 0] / N + eps), dtype)

    return rmsnorm


if __name__ == "__main__":
    import tilelang

    kernel = tilelang.compile(rms_norm(), out_idx=[1])
    print(kernel.get_kernel_source())
