"""Each bundled GPU example checks its kernel against a torch reference; this checks, on the CPU,
that the reference follows the kernel's layout (the bundled GEMM stores B as N x K: a reference
``a @ b`` failed on every GPU). TileLang's CPU targets cannot lower these GEMMs (``examples/
README.md``), so the oracle is read from the kernel itself: its PrimFunc's buffers say which
operand is N x K, and with M, N, K all different only the matching product fits. The reference
runs on small CPU tensors of the kernel's own shapes and dtypes."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from ..conftest import EXAMPLES

M, N, K = 96, 160, 64
"""All different: a transposed operand cannot pass unnoticed."""


@pytest.fixture(autouse=True)
def examples_importable() -> Iterator[None]:
    sys.path.insert(0, str(EXAMPLES))
    try:
        yield
    finally:
        sys.path.remove(str(EXAMPLES))


def gemm_on_gpu() -> tuple[Any, Callable[..., Any], Callable[[Any], Any]]:
    example = importlib.import_module("gemm_on_gpu")
    return example.matmul(M, N, K), example.reference, lambda c: c


def autotune_gemm() -> tuple[Any, Callable[..., Any], Callable[[Any], Any]]:
    import torch

    example = importlib.import_module("autotune_gemm")
    config = example.gemm_configs(M, N, K)[0]
    func = example.matmul_relu.jit_impl.get_tir(M, N, K, **config)
    return func, example.reference, torch.relu


def eager_gemm() -> tuple[Any, Callable[..., Any], Callable[[Any], Any]]:
    example = importlib.import_module("eager_gemm")
    return example.token_matmul.get_tir(N=N, K=K), example.reference, lambda c: c


def _shape(buffer: Any) -> tuple[int, ...]:
    """The buffer's shape, the dynamic token count taken as M."""
    return tuple(int(dim) if hasattr(dim, "value") else M for dim in buffer.shape)


@pytest.mark.parametrize("example", [gemm_on_gpu, autotune_gemm, eager_gemm], ids=lambda f: f.__name__)
def test_the_reference_follows_the_kernels_layout(example: Callable[[], Any]) -> None:
    import torch

    func, reference, epilogue = example()
    a_buffer, b_buffer, c_buffer = (func.buffer_map[param] for param in func.params[:3])
    assert _shape(a_buffer) == (M, K) and _shape(c_buffer) == (M, N)
    dtype = getattr(torch, str(a_buffer.dtype))
    torch.manual_seed(0)
    a = torch.randn(_shape(a_buffer)).to(dtype)
    b = torch.randn(_shape(b_buffer)).to(dtype)
    if _shape(b_buffer) == (N, K):
        expected = a.double() @ b.double().T
    else:
        assert _shape(b_buffer) == (K, N)
        expected = a.double() @ b.double()
    got = reference(a, b)
    assert tuple(got.shape) == (M, N)
    torch.testing.assert_close(got.double(), epilogue(expected), rtol=2e-2, atol=2e-1)
