"""Compile the example GEMM with TileLang, run it on a CUDA GPU and check it against torch.

On a machine with a GPU, capture what TileLang lowers while the script runs:

    irtrace run -- python examples/gemm_on_gpu.py --size 1024
"""

import argparse

import tilelang
import torch
from gemm import matmul


def reference(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """What the kernel computes: the bundled GEMM stores B as N x K, so C = A @ B.T."""
    return (a.float() @ b.float().T).half()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--size", type=int, default=1024)
    size = parser.parse_args().size
    kernel = tilelang.compile(matmul(size, size, size), out_idx=[2], target="cuda")
    a = torch.randn(size, size, device="cuda", dtype=torch.float16)  # M x K
    b = torch.randn(size, size, device="cuda", dtype=torch.float16)  # N x K
    c = kernel(a, b)
    torch.testing.assert_close(c, reference(a, b), rtol=1e-2, atol=1e-2)
    print(f"gemm {size}^3 matches torch on {torch.cuda.get_device_name()}")


if __name__ == "__main__":
    main()
