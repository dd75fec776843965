"""What CPU twins cost the GPU stand-ins (``irtrace run --no-gpu``, the editor's entry-point runs).

Two workloads, each timed under the stand-ins' torch function mode (``cuda`` made ``meta``, twins
kept) and under a plain mode that only sends ``cuda`` to ``meta`` (the stand-ins before twins),
interleaved, in this process:

- ``meta``: a program's torch reference on random inputs (no twins: matmul, softmax, sums), the
  common case, where twins should cost little;
- ``twinned``: small integer tensors whose values are read (``(t * i + 3).sum().item()``), which
  only the twins can run at all: its time per operation is printed, not a ratio.

    python bench/twin_overhead.py [--ops 2000] [--repeats 7] [--smoke]

Ends with: RESULT meta_ratio=<with twins / plain> meta_op_us=<plain> twinned_op_us=<with twins>
(medians).
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from irtrace.lowering.resolve.entry_point import _meta_cuda_mode

META_OPS_PER_STEP = 6
TWINNED_OPS_PER_STEP = 4


class PlainMetaMode(TorchFunctionMode):
    """``cuda`` made ``meta`` and nothing else: the stand-ins without twins."""

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = dict(kwargs or {})
        if str(kwargs.get("device", "")).startswith("cuda"):
            kwargs["device"] = "meta"
        return func(*args, **kwargs)


def meta_workload(steps: int) -> None:
    for _ in range(steps):
        x = torch.randn(64, 128, device="cuda")
        scores = (x @ x.T).softmax(-1)
        _ = (scores.sum(0) * 2).max()


def twinned_workload(steps: int) -> None:
    counts = torch.arange(64, device="cuda")
    for i in range(steps):
        _ = (counts * i + 3).sum().item()


def timed(mode: Any, workload: Any, steps: int) -> float:
    with mode:
        began = time.perf_counter()
        workload(steps)
        return time.perf_counter() - began


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", type=int, default=2000, help="steps of each workload per repeat")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--smoke", action="store_true", help="small and once: for CI")
    args = parser.parse_args()
    if args.smoke:
        args.ops, args.repeats = 50, 1
    if torch.cuda.is_available():
        print("a GPU is present: the stand-ins keep it, nothing to measure")
        print("RESULT meta_ratio=nan meta_op_us=nan twinned_op_us=nan")
        return
    with contextlib.suppress(Exception):  # warm both paths once
        timed(PlainMetaMode(), meta_workload, 2)
        timed(_meta_cuda_mode(), meta_workload, 2)
        timed(_meta_cuda_mode(), twinned_workload, 2)
    plain, twins, twinned = [], [], []
    for _ in range(args.repeats):
        plain.append(timed(PlainMetaMode(), meta_workload, args.ops))
        twins.append(timed(_meta_cuda_mode(), meta_workload, args.ops))
        twinned.append(timed(_meta_cuda_mode(), twinned_workload, args.ops))
    plain_s, twins_s, twinned_s = (statistics.median(t) for t in (plain, twins, twinned))
    meta_op_us = plain_s / (args.ops * META_OPS_PER_STEP) * 1e6
    twinned_op_us = twinned_s / (args.ops * TWINNED_OPS_PER_STEP) * 1e6
    print(f"meta reference: plain {plain_s * 1e3:.1f} ms, with twins {twins_s * 1e3:.1f} ms")
    print(f"twinned reads: {twinned_s * 1e3:.1f} ms for {args.ops} steps")
    ratio = twins_s / plain_s
    print(f"RESULT meta_ratio={ratio:.3f} meta_op_us={meta_op_us:.1f} twinned_op_us={twinned_op_us:.1f}")


if __name__ == "__main__":
    main()
