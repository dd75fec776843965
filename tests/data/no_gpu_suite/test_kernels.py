"""A project's pytest suite for its GPU kernels, as CI runs it (``irtrace run --no-gpu -- python
-m pytest``): each test compiles a kernel and checks it against torch on the GPU."""

import pytest
import tilelang
import tilelang.language as T
import torch


def negate(N, dtype=T.float32):
    @T.prim_func
    def main(A: T.Tensor((N,), dtype), B: T.Tensor((N,), dtype)):
        with T.Kernel(T.ceildiv(N, 128), threads=128) as bx:
            for i in T.Parallel(128):
                B[bx * 128 + i] = -A[bx * 128 + i]

    return main


@pytest.mark.parametrize("n", [1024, 4096])
def test_negate(n):
    kernel = tilelang.compile(negate(n), out_idx=[1])
    a = torch.randn(n, device="cuda")
    torch.testing.assert_close(kernel(a), -a)
