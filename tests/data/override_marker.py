"""A kernel that fills its output with 1.0; override_marker.cu is its CUDA source with 42.0 instead.

On a GPU, ``irtrace run --override fill_marker=tests/data/override_marker.cu -- python
tests/data/override_marker.py`` prints ``values: [42.0]``; without the override, ``[1.0]``.
"""

import tilelang
import tilelang.language as T


def fill(N=256):
    @T.prim_func
    def fill_marker(Out: T.Tensor((N,), T.float32)):
        with T.Kernel(T.ceildiv(N, 128), threads=128) as bx:
            for i in T.Parallel(128):
                Out[bx * 128 + i] = T.float32(1.0)

    return fill_marker


def untouched(N=256):
    """Another kernel in the same recording: an override of ``fill`` leaves its source alone."""

    @T.prim_func
    def copy_kernel(A: T.Tensor((N,), T.float32), B: T.Tensor((N,), T.float32)):
        with T.Kernel(T.ceildiv(N, 128), threads=128) as bx:
            for i in T.Parallel(128):
                B[bx * 128 + i] = A[bx * 128 + i]

    return copy_kernel


if __name__ == "__main__":
    import torch

    kernel = tilelang.compile(fill(), target="auto")
    out = torch.zeros(256, dtype=torch.float32, device="cuda")
    kernel(out)
    torch.cuda.synchronize()
    print("values:", sorted(set(out.tolist())))
