"""An Ascend kernel in TileLang-Ascend's style: rows staged through Unified-Buffer tiles,
computed in a T.SimtVF region (Y = X * scale + bias)."""

import tilelang.ascend.language as T


def scale_bias(M=1024, N=512, block_M=32, num_blocks=8, threads=128, dtype=T.float32):
    assert M % (block_M * num_blocks) == 0, "no partial tiles"
    tiles_per_core = M // (block_M * num_blocks)

    @T.prim_func
    def scale_bias_kernel(
        X: T.Tensor((M, N), dtype),
        scale: T.Tensor((N,), dtype),
        bias: T.Tensor((N,), dtype),
        Y: T.Tensor((M, N), dtype),
    ):
        with T.Kernel(num_blocks) as bx:
            x_ub = T.alloc_shared((block_M, N), dtype)
            scale_ub = T.alloc_shared((N,), dtype)
            bias_ub = T.alloc_shared((N,), dtype)
            y_ub = T.alloc_shared((block_M, N), dtype)
            T.copy(scale, scale_ub)
            T.copy(bias, bias_ub)
            for t in T.serial(tiles_per_core):
                row = (t * num_blocks + bx) * block_M
                T.copy(X[row : row + block_M, :], x_ub)
                with T.SimtVF(threads=threads):
                    for i, j in T.Parallel(block_M, N):
                        y_ub[i, j] = x_ub[i, j] * scale_ub[j] + bias_ub[j]
                T.copy(y_ub, Y[row : row + block_M, :])

    return scale_bias_kernel


if __name__ == "__main__":
    import tilelang

    kernel = tilelang.compile(scale_bias(), out_idx=[3], target="ascend")
    print(kernel.get_kernel_source())
