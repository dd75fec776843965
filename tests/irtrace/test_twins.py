"""CPU twins under the GPU stand-ins (``irtrace run --no-gpu``, the language server's and the MCP
server's entry-point runs): tensors made on ``cuda`` from known values answer ``.item()`` and friends
with the GPU's values; random ones, and ones a kernel launch wrote, never do.

Oracle: the same computation in plain CPU torch, in this test, without the stand-ins. The values a
program reads under the stand-ins must equal those, while its tensors are on ``meta`` (no data):
without twins each read fails.
"""

from __future__ import annotations

import ast
import contextlib
import gc
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

from irtrace.lowering.resolve import twins
from irtrace.lowering.resolve.entry_point import EntryKernel, _harmless_gpu_work, run_entry_point
from irtrace.trace.reader import load_trace

from ..conftest import DATA, ROOT

PROGRAM = DATA / "no_gpu_twins.py"
ITEM_STOPS = "Tensor.item() cannot be called on meta tensors"
"""What PyTorch's meta device says where a value is read: the run stops with it, as before twins."""


@pytest.fixture
def stand_ins() -> Iterator[None]:
    if torch.cuda.is_available():
        pytest.skip("with a GPU, torch keeps it: tensors are real, not meta")
    with contextlib.ExitStack() as stack:
        _harmless_gpu_work(stack, "cuda:sm_90a")
        yield


def values_of(device: str) -> tuple[dict[str, Any], str]:
    """A program's reads of its own tensors (sizes, checks, printed numbers) and its tensors' device."""
    lengths = torch.tensor([8192 + 2 * i for i in range(16)], dtype=torch.int32, device=device)
    table = torch.arange(16 * 4, dtype=torch.int32, device=device).view(16, 4)
    out: dict[str, Any] = {
        "sum": lengths.sum().item(),
        "mean": lengths.float().mean().int().item(),
        "max": lengths.max().item(),
        "row": table[3].tolist(),
        "cumsum": torch.cumsum(lengths, 0)[-1].item(),
        "sliced": table.flatten()[2 : 2 + lengths[1] - 8190].tolist(),
        "int": int((lengths.max() + 127) // 128 * 128),
        "float": float(torch.linspace(0, 1, 5, device=device)[3]),
        "all": bool((lengths > 8000).all()),
        "any": bool((lengths > 9000).any()),  # False: a twin's answer, not the pass of a check
        "index": list(range(100))[lengths[0] - 8190],
        "format": f"{lengths[2]:>6}",
        "like": torch.full_like(lengths, 4).sum().item() + torch.ones_like(table).sum().item(),
        "uploaded": torch.tensor([1.5, 2.5]).to(device).tolist(),
        "mask": lengths[lengths > 8210].tolist(),
        "sized": list(torch.empty((2, lengths[0] - 8189), device=device).shape),
        "cpu": lengths.cpu()[:3].tolist(),
        "split": [
            len(p) for p in torch.split(torch.zeros(12, device=device), lengths[:3].sub(8190).tolist())
        ],
    }
    square = torch.eye(3, device=device)
    square[0, 2] = 5
    square.add_(1)
    row = square[1]
    row.mul_(3)  # through a view: the base changes too
    out["in_place"] = square.tolist()
    with torch.inference_mode():
        scalar = lengths[0] + 1
        scalar += 2
        out["inference"] = scalar.item()
    return out, lengths.device.type


def test_twins_give_the_values_plain_cpu_torch_computes(stand_ins: None) -> None:
    read, device = values_of("cuda")
    assert device == "meta"
    with torch._C.DisableTorchFunction():  # the oracle: plain CPU torch, no stand-ins
        expected, _ = values_of("cpu")
    assert read == expected


@pytest.mark.filterwarnings("ignore:To copy construct from a tensor")
def test_random_tensors_get_no_twin_and_item_still_stops(stand_ins: None) -> None:
    drawn = [
        torch.randn(4, device="cuda"),
        torch.randint(0, 10, (4,), device="cuda"),
        torch.zeros(4, device="cuda").uniform_(),
        torch.arange(4.0, device="cuda").add_(torch.randn(4, device="cuda")),
        torch.bernoulli(torch.full((4,), 0.5, device="cuda")),
        torch.arange(2, device="cuda").new_tensor(torch.randn(4, device="cuda")),  # values, not a template
    ]
    partly = torch.arange(8.0, device="cuda")
    partly[1:3].normal_()  # through a view
    for tensor in [*drawn, partly]:
        with pytest.raises(RuntimeError, match=ITEM_STOPS.replace("(", r"\(").replace(")", r"\)")):
            tensor.sum().item()
    assert bool(drawn[0].sum() < 1e-3)  # a check of a stand-in result passes


def test_twin_computations_leave_the_programs_cpu_random_stream_alone(stand_ins: None) -> None:
    def noisy(x: torch.Tensor) -> torch.Tensor:
        return x + torch.rand(x.shape, device=x.device)

    with torch._C.DisableTorchFunction():
        torch.manual_seed(0)
        expected = torch.rand(3).tolist()
    torch.manual_seed(0)
    base = torch.arange(3.0, device="cuda")
    drawn = twins.call_with_twins(noisy, (base,), {})
    assert twins.TWINS.get(base) is not None and twins.TWINS.get(drawn) is None
    with torch._C.DisableTorchFunction():
        assert torch.rand(3).tolist() == expected


def test_huge_tensors_stay_meta_only_within_the_twin_budget(stand_ins: None) -> None:
    gc.collect()  # earlier tests' tensors, and their twins, go
    live = twins.TWINS.live
    huge = torch.tensor([7] * (twins.TWIN_ELEMENTS + 1), device="cuda")
    full = torch.full((1 << 40,), 1, device="cuda")  # 4 TiB: no CPU copy is ever tried
    assert twins.TWINS.live == live
    for tensor in (huge, full):
        with pytest.raises(RuntimeError, match="cannot be called on meta tensors"):
            tensor[0].item()
    with twins.budget(live + 1000):
        kept = [torch.arange(300, device="cuda") for _ in range(5)]
        assert [twins.TWINS.get(t) is not None for t in kept] == [True, True, True, False, False]
        assert twins.TWINS.live <= live + 1000
        del kept
        gc.collect()
        assert twins.TWINS.live == live  # released with their tensors
        assert torch.arange(300, device="cuda")[299].item() == 299


def irtrace_run(program: Path, out: Path) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, "PYTHONPATH": str(ROOT)}
    environment.pop("IRTRACE", None)
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "irtrace.cli",
            "run",
            "--no-gpu",
            "-o",
            str(out),
            "--",
            "python",
            str(program),
        ],
        capture_output=True,
        text=True,
        cwd=out.parent,
        env=environment,
        timeout=600,
    )


def expected_size() -> int:
    """``no_gpu_twins.py``'s kernel size, computed here in plain CPU torch."""
    lengths = torch.tensor([100 + 3 * i for i in range(7)], dtype=torch.int32)
    steps = torch.arange(7) * 2
    return int((lengths + steps).max().item() + lengths.float().mean().int().item())


def test_a_program_sizing_its_kernel_from_its_tensors_runs_under_no_gpu(tmp_path: Path) -> None:
    """Twins size the kernel; the buffer the kernel wrote is unknown (the stand-in launched nothing),
    so reading it stops the run; the buffer it only read keeps its twin; huge tensors cost nothing."""
    size = expected_size()
    done = irtrace_run(PROGRAM, tmp_path / "t.jsonl")
    lines = done.stdout.splitlines()
    assert f"size {size}" in lines
    assert f"read-only sum {size * (size - 1) // 2}" in lines
    assert any(line.startswith("check passed") for line in lines)
    assert not any(line.startswith("written sum") for line in lines)
    peak = next(int(line.split()[2]) for line in lines if line.startswith("peak rss"))
    assert peak < 1000  # a twin of the 1 GiB tensor alone would pass 1400 MiB (measured)
    assert done.returncode == 7
    assert ITEM_STOPS in done.stderr and "Traceback" not in done.stderr
    run = load_trace(tmp_path / "t.jsonl").runs[0]
    assert run.kernel == "copy_rows" and run.instance is not None and run.instance.stand_in
    assert run.args is not None and run.args == {"args": [], "kwargs": {"N": size}}


def test_the_language_servers_entry_point_run_sizes_the_kernel_from_twins() -> None:
    text = PROGRAM.read_text()
    definition = next(
        node
        for node in ast.parse(text).body
        if isinstance(node, ast.FunctionDef) and node.name == "copy_rows"
    )
    kernel = EntryKernel("copy_rows", definition.decorator_list[0].lineno, definition.lineno, is_jit=True)
    run = run_entry_point(str(PROGRAM), text, [kernel], target="cuda:sm_90a", timeout_s=120)
    call = run["instances"]["copy_rows"]
    assert (call["args"], call["kwargs"]) == ([], {"N": expected_size()})
    assert ITEM_STOPS in run["outcome"]


def test_a_programs_own_torch_function_runs_once(stand_ins: None) -> None:
    """Only PyTorch's own functions run a second time on the twins: a program's function handed to
    ``__torch_function__`` handling (its side effects) runs once, and its result has no twin."""
    calls: list[int] = []

    @torch.overrides.wrap_torch_function(lambda x: (x,))
    def doubled(x: torch.Tensor) -> torch.Tensor:
        calls.append(1)
        return x * 2

    counts = torch.arange(3, device="cuda")
    result = doubled(counts)
    assert calls == [1]
    assert twins.TWINS.get(counts) is not None and twins.TWINS.get(result) is None
