"""Kernels checked one by one on the GPU, in the style of TileLang's examples (gemv, flash
attention): ``main()`` parses its sizes, then builds each kernel and checks it against PyTorch and
benches it before it builds the next. An ``@autotune`` kernel is tuned at the end."""

import argparse

import torch

import tilelang
import tilelang.language as T
from tilelang.autotuner import autotune


def ref_gemv(A, B):
    return (A.float() @ B.T.float()).to(A.dtype)


@tilelang.jit(out_idx=[-1])
def naive_gemv(N, K, BLOCK_N, BLOCK_K, dtype=T.float16, accum_dtype=T.float32):
    @T.prim_func
    def main(A: T.Tensor((K,), dtype), B: T.Tensor((N, K), dtype), C: T.Tensor((N,), dtype)):
        with T.Kernel(T.ceildiv(N, BLOCK_N), threads=BLOCK_N) as bn:
            tn = T.get_thread_binding(0)
            A_shared = T.alloc_shared((BLOCK_K,), dtype)
            B_shared = T.alloc_shared((BLOCK_N, BLOCK_K), dtype)
            C_reg = T.alloc_local((1,), accum_dtype)
            T.clear(C_reg)
            for bk in T.serial(T.ceildiv(K, BLOCK_K)):
                for tk in T.serial(BLOCK_K):
                    A_shared[tk] = A[bk * BLOCK_K + tk]
                    B_shared[tn, tk] = B[bn * BLOCK_N + tn, bk * BLOCK_K + tk]
                for tk in T.serial(BLOCK_K):
                    C_reg[0] += A_shared[tk].astype(accum_dtype) * B_shared[tn, tk].astype(accum_dtype)
            C[bn * BLOCK_N + tn] = C_reg[0]

    return main


@tilelang.jit(out_idx=[-1])
def row_sum(M, N, block_M, threads=128, dtype=T.float32):
    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), Y: T.Tensor((M,), dtype)):
        with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bx:
            tile = T.alloc_fragment((block_M, N), dtype)
            total = T.alloc_fragment((block_M,), dtype)
            T.copy(X[bx * block_M, 0], tile)
            T.reduce_sum(tile, total, dim=1)
            T.copy(total, Y[bx * block_M])

    return main


def scale_rows(M, N, block_M, block_N, dtype=T.float16):
    """A factory: built with tilelang.compile, as older examples do."""

    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), S: T.Tensor((M,), dtype), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            x_shared = T.alloc_shared((block_M, block_N), dtype)
            s_local = T.alloc_fragment((block_M,), dtype)
            T.copy(X[by * block_M, bx * block_N], x_shared)
            T.copy(S[by * block_M], s_local)
            for i, j in T.Parallel(block_M, block_N):
                x_shared[i, j] = x_shared[i, j] * s_local[i]
            T.copy(x_shared, Y[by * block_M, bx * block_N])

    return main


def copy_configs():
    return [{"block_M": block_M, "threads": threads} for block_M in (32, 64) for threads in (128, 256)]


@autotune(configs=copy_configs(), warmup=5, rep=10)
@tilelang.jit(out_idx=[-1])
def tuned_copy(M, N, block_M=128, threads=128, dtype=T.float16):
    @T.prim_func
    def main(A: T.Tensor((M, N), dtype), B: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bx:
            staged = T.alloc_shared((block_M, N), dtype)
            T.copy(A[bx * block_M, 0], staged)
            T.copy(staged, B[bx * block_M, 0])

    return main


def check_and_bench(kernel, ref, *inputs):
    profiler = kernel.get_profiler()
    profiler.assert_allclose(ref, atol=1e-2, rtol=1e-2)
    out = kernel(*inputs)
    torch.testing.assert_close(out, ref(*inputs), atol=1e-2, rtol=1e-2)
    torch.cuda.synchronize()
    latency = profiler.do_bench(warmup=25)
    print(f"{latency:.3f} ms")


def main():
    parser = argparse.ArgumentParser(description="checked kernels")
    parser.add_argument("--n", type=int, default=512)
    parser.add_argument("--k", type=int, default=256)
    args = parser.parse_args()
    N, K = args.n, args.k
    a = torch.randn(K, device="cuda", dtype=torch.float16)
    b = torch.randn(N, K, device="cuda", dtype=torch.float16)
    check_and_bench(naive_gemv.compile(N=N, K=K, BLOCK_N=64, BLOCK_K=32), ref_gemv, a, b)

    x = torch.randn(N, K, device="cuda")
    check_and_bench(row_sum(N, K, block_M=16), lambda t: t.sum(dim=1), x)

    scale = tilelang.compile(scale_rows(N, K, block_M=32, block_N=64), out_idx=[2])
    s = torch.randn(N, dtype=torch.float16).cuda()
    check_and_bench(scale, lambda t, u: t * u[:, None], b, s)

    best = tuned_copy(N, K)
    print("best config", best.config)


if __name__ == "__main__":
    main()
