"""The kernel long-lived processes lower once when they start, so a user's first request is warm."""

WARMUP_KERNEL = """
import tilelang.language as T


def warmup(M=64, N=64, K=32):
    @T.prim_func
    def main(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16), C: T.Tensor((M, N), T.float16)):
        with T.Kernel(1, 1, threads=128) as (bx, by):
            A_s = T.alloc_shared((M, K), T.float16)
            B_s = T.alloc_shared((K, N), T.float16)
            C_f = T.alloc_fragment((M, N), T.float32)
            T.clear(C_f)
            T.copy(A, A_s)
            T.copy(B, B_s)
            T.gemm(A_s, B_s, C_f)
            T.copy(C_f, C)

    return main
"""
"""A tiny GEMM of our own that long-lived processes (the language server's worker, the MCP
server's) lower once at start: the first lowering in a process costs about a second more,
and every child forked afterwards starts warm."""
