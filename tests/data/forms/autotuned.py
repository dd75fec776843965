"""An autotuned kernel whose tunables have defaults and whose configs are a function of the
arguments. (A config list is tested on the example GEMM, ``examples/autotune_gemm.py``.)"""

import itertools

import tilelang
import tilelang.language as T


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
