"""Ascend 950 SIMD vector kernel: double-buffered elementwise C = silu(A + B) over Unified-Buffer
tiles, computed in T.SimdVF with explicit T.simd vector-register ops (vld/vadd/vexp/vdiv/vsts)."""

import tilelang.ascend.language as T


def add_silu(N=1 << 20, tile=4096, num_blocks=16, num_stages=2, dtype=T.float32):
    bits = T.dtype(dtype).bits
    lanes = 2048 // bits  # elements per 256-byte vector register
    assert tile % lanes == 0 and N % (tile * num_blocks) == 0, "no partial tiles"
    tiles_per_core = N // (tile * num_blocks)

    @T.prim_func
    def add_silu_kernel(
        A: T.Tensor((N,), dtype),
        B: T.Tensor((N,), dtype),
        C: T.Tensor((N,), dtype),
    ):
        with T.Kernel(num_blocks) as bx:
            a_ub = T.alloc_shared((tile,), dtype)
            b_ub = T.alloc_shared((tile,), dtype)
            c_ub = T.alloc_shared((tile,), dtype)
            T.annotate_buffer_versions({a_ub: num_stages, b_ub: num_stages, c_ub: num_stages})

            for t in T.Pipelined(tiles_per_core, num_stages=num_stages):
                base = (t * num_blocks + bx) * tile
                T.copy(A[base : base + tile], a_ub)
                T.copy(B[base : base + tile], b_ub)
                with T.SimdVF():
                    for v in T.serial(tile // lanes):
                        x = T.simd.vadd(T.simd.vld(a_ub[v * lanes]), T.simd.vld(b_ub[v * lanes]))
                        denom = T.simd.vadds(T.simd.vexp(T.simd.vmuls(x, -1.0)), 1.0)
                        T.simd.vsts(c_ub[v * lanes], T.simd.vdiv(x, denom), dist=f"NORM_B{bits}")
                T.copy(c_ub, C[base : base + tile])

    return add_silu_kernel


if __name__ == "__main__":
    import tilelang

    kernel = tilelang.compile(add_silu(), out_idx=[2], target="ascend")
    print(kernel.get_kernel_source())
