"""Kernels called with expression arguments: module constants, helpers, shifts, T and torch dtypes."""

import tilelang
import tilelang.language as T
import torch
from tvm.target import Target

BLOCK = 256
ROWS = 48


def determine_fp8_type(fp8_format="e4m3"):
    """The platform's FP8 dtype: the FNUZ variant on gfx942-class AMD parts, else the OCP one."""
    target = Target.current(allow_none=True)
    fnuz = target is not None and target.kind.name == "hip" and "gfx942" in str(target.attrs.get("mcpu", ""))
    if fp8_format == "e4m3":
        return T.float8_e4m3fnuz if fnuz else T.float8_e4m3fn
    return T.float8_e5m2fnuz if fnuz else T.float8_e5m2


@tilelang.jit(out_idx=[-1])
def vec_add(N, block=BLOCK, dtype=T.float32):
    @T.prim_func
    def main(A: T.Tensor((N,), dtype), B: T.Tensor((N,), dtype), C: T.Tensor((N,), dtype)):
        with T.Kernel(T.ceildiv(N, block), threads=block) as bx:
            for i in T.Parallel(block):
                C[bx * block + i] = A[bx * block + i] + B[bx * block + i]

    return main


def quantize(M, N, block_M=16, block_N=128, dtype=T.float16, out_dtype=T.float8_e4m3fn):
    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), Q: T.Tensor((M, N), out_dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            tile = T.alloc_fragment((block_M, block_N), dtype)
            T.copy(X[by * block_M, bx * block_N], tile)
            T.copy(tile, Q[by * block_M, bx * block_N])

    return main


def scale_rows(M, N, dtype=torch.float16):
    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(M, threads=128) as row:
            for j in T.Parallel(N):
                Y[row, j] = X[row, j] * T.cast(2, dtype)

    return main


def failing_helper():
    raise ValueError("no FP8 on this platform")
