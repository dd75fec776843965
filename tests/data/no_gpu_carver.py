"""A GPU program that asks TileLang's carver about the GPU (``carver.arch.CUDA``, as TileLang's
``examples/analyze`` do) and analyzes the GEMM it compiles. The carver asks TVM's runtime for GPU 0.
Prints the device's facts, ``flops ANALYZED EXPECTED`` (2*M*N*K, the oracle) and ``END``."""

import tilelang
import tilelang.language as T
from tilelang.carver.arch import CUDA
from tilelang.tools import Analyzer

M = N = K = 256


@tilelang.jit(out_idx=[-1])
def matmul(block=64, dtype=T.float16, accum_dtype=T.float32):
    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block), T.ceildiv(M, block), threads=128) as (bx, by):
            A_shared = T.alloc_shared((block, block), dtype)
            B_shared = T.alloc_shared((block, block), dtype)
            C_local = T.alloc_fragment((block, block), accum_dtype)
            T.clear(C_local)
            for k in T.Pipelined(T.ceildiv(K, block), num_stages=2):
                T.copy(A[by * block, k * block], A_shared)
                T.copy(B[k * block, bx * block], B_shared)
                T.gemm(A_shared, B_shared, C_local)
            T.copy(C_local, C[by * block, bx * block])

    return main


if __name__ == "__main__":
    kernel = matmul()
    print("built matmul", flush=True)
    device = CUDA("cuda")
    print("device", device.compute_max_core, device.warp_size, device.compute_capability, device.smem_cap, flush=True)
    result = Analyzer.analysis(kernel.prim_func, device)
    print("flops", result.total_flops, 2 * M * N * K, flush=True)
    print("END", flush=True)
