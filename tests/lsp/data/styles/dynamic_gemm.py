"""A lazy ``@tilelang.jit`` GEMM with a ``T.dynamic`` row count, as in TileLang's dynamic-shape
examples; ``main`` calls it with sizes bound to local names."""

import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[-1])
def matmul_dynamic_m(N, K, block_M=64, block_N=64, block_K=32, num_stages=2, dtype=T.float16, accum_dtype=T.float32):
    M = T.dynamic("m")

    @T.prim_func
    def main(
        A: T.Tensor((M, K), dtype),
        B: T.Tensor((K, N), dtype),
        C: T.Tensor((M, N), dtype),
    ):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
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


def main():
    N, K = 1024, 512
    kernel = matmul_dynamic_m(N, K, block_M=128)
    print(kernel.get_kernel_source())


if __name__ == "__main__":
    main()
