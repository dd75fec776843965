"""Per-token FP8 quantization in a package, built with expression arguments: a shift, a constant
and two helper calls from sibling modules, one of which asks the current target for its FP8 type."""

import tilelang
import tilelang.language as T

from ..platform import FP8_MAX, HIDDEN, determine_fp8_type
from ..tiling import pick_block_m


@tilelang.jit(out_idx=[1, 2])
def per_token_quant(M, N, block_M=8, threads=128, dtype=T.bfloat16, out_dtype=T.float8_e4m3fn):
    fp8_max = FP8_MAX[str(out_dtype)]

    @T.prim_func
    def main(
        X: T.Tensor((M, N), dtype),
        Q: T.Tensor((M, N), out_dtype),
        scales: T.Tensor((M,), T.float32),
    ):
        with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bx:
            x = T.alloc_fragment((block_M, N), T.float32)
            amax = T.alloc_fragment((block_M,), T.float32)
            T.copy(X[bx * block_M, 0], x)
            T.reduce_absmax(x, amax, dim=1)
            for i in T.Parallel(block_M):
                amax[i] = T.max(amax[i], 1e-4) / fp8_max
            for i, j in T.Parallel(block_M, N):
                Q[bx * block_M + i, j] = T.cast(x[i, j] / amax[i], out_dtype)
            for i in T.Parallel(block_M):
                scales[bx * block_M + i] = amax[i]

    return main


if __name__ == "__main__":
    kernel = per_token_quant(1 << 14, HIDDEN, block_M=pick_block_m(HIDDEN), out_dtype=determine_fp8_type())
    print(kernel.get_kernel_source())
