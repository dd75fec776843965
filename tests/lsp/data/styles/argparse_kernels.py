"""Kernels sized from the command line, as most of TileLang's examples are: the ``default=`` of
each ``argparse`` option reaches the kernel through ``args.m``, ``M, N = args.m, args.n``, local
literals and arithmetic over them, and through ``run_softmax(args.batch, ...)`` in the
``__main__`` block."""

import argparse

import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[-1])
def matmul(M, N, K, block_M, block_N, block_K, num_stages=2, threads=128, dtype=T.float16):
    @T.prim_func
    def gemm(
        A: T.Tensor((M, K), dtype),
        B: T.Tensor((K, N), dtype),
        C: T.Tensor((M, N), dtype),
    ):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), dtype)
            B_shared = T.alloc_shared((block_K, block_N), dtype)
            C_local = T.alloc_fragment((block_M, block_N), T.float32)

            T.clear(C_local)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
                T.copy(A[by * block_M, k * block_K], A_shared)
                T.copy(B[k * block_K, bx * block_N], B_shared)
                T.gemm(A_shared, B_shared, C_local)
            T.copy(C_local, C[by * block_M, bx * block_N])

    return gemm


@tilelang.jit(out_idx=[-1])
def row_softmax(batch, heads, seq_len, block_rows, dtype=T.float32):
    rows = batch * heads

    @T.prim_func
    def softmax(X: T.Tensor((rows, seq_len), dtype), Y: T.Tensor((rows, seq_len), dtype)):
        with T.Kernel(T.ceildiv(rows, block_rows), threads=128) as bx:
            scores = T.alloc_fragment((block_rows, seq_len), dtype)
            row_max = T.alloc_fragment((block_rows,), dtype)
            row_sum = T.alloc_fragment((block_rows,), dtype)

            T.copy(X[bx * block_rows, 0], scores)
            T.reduce_max(scores, row_max, dim=1)
            for i, j in T.Parallel(block_rows, seq_len):
                scores[i, j] = T.exp(scores[i, j] - row_max[i])
            T.reduce_sum(scores, row_sum, dim=1)
            for i, j in T.Parallel(block_rows, seq_len):
                scores[i, j] = scores[i, j] / row_sum[i]
            T.copy(scores, Y[bx * block_rows, 0])

    return softmax


def main(argv=None):
    parser = argparse.ArgumentParser(description="GEMM sized from the command line")
    parser.add_argument("--m", type=int, default=1024, help="rows of A")
    parser.add_argument("--n", type=int, default=512, help="columns of B")
    parser.add_argument("--k", type=int, default="256", help="argparse converts a string default")
    parser.add_argument("--block-n", type=int, default=64)
    parser.add_argument("--stages", dest="num_stages", type=int, default=3)
    parser.add_argument("--bf16", action="store_true", help="bfloat16 instead of float16")
    args = parser.parse_args(argv)

    M, N = args.m, args.n
    K = args.k
    block_m = 128
    block_k = K // 8
    dtype = T.bfloat16 if args.bf16 else T.float16
    kernel = matmul(M, N, K, block_m, args.block_n, block_k, args.num_stages, threads=128, dtype=dtype)
    print(kernel.get_kernel_source())


def run_softmax(batch, heads, seq_len=256):
    block_rows = 4 * 2
    kernel = row_softmax(batch, heads, seq_len, block_rows)
    print(kernel.get_kernel_source())


if __name__ == "__main__":
    main()
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--heads", type=int, default=4)
    args = parser.parse_args()
    run_softmax(args.batch, args.heads)
