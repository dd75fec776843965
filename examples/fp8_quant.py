"""Per-token FP8 quantization, recorded with expression arguments.

The FP8 format differs by platform, so the caller picks it with a helper defined here::

    irtrace record "fp8_quant.py::per_token_quant(1 << 14, HIDDEN, out_dtype=determine_fp8_type())" \\
        -t cuda:sm_90 -t hip:gfx942

irtrace evaluates ``1 << 14``, ``HIDDEN`` and ``determine_fp8_type()`` in this module, once per
target inside the target's context: cuda gets ``float8_e4m3fn``, gfx942 ``float8_e4m3fnuz``.
"""

import tilelang.language as T
from tvm.target import Target

HIDDEN = 2048
FP8_MAX = {"float8_e4m3fn": 448.0, "float8_e4m3fnuz": 240.0, "float8_e5m2": 57344.0}


def determine_fp8_type():
    """The E4M3 variant the current target computes in: FNUZ on MI300 (gfx942), OCP elsewhere."""
    target = Target.current(allow_none=True)
    if target is not None and target.kind.name == "hip" and "gfx942" in str(target.attrs.get("mcpu", "")):
        return T.float8_e4m3fnuz
    return T.float8_e4m3fn


def per_token_quant(M, N, block_M=4, threads=128, dtype=T.bfloat16, out_dtype=T.float8_e4m3fn):
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
