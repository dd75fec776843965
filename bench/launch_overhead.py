"""What counting launches costs a captured program: the time of one launch of a compiled kernel
with ``observe_launches`` counting it against the same launch without, in one process.

The kernel is a small CPU kernel (target ``c``, a 32 x 64 tile, two tensors and a scalar), so the
launch itself is as short as launches get and the counting's share is as large as it gets; a GPU
launch (5 us and more) hides it further. Blocks of ``--calls`` launches alternate between the two,
``--repeat`` times; the per-launch medians and their ratio are printed. Ends with
``RESULT ratio=<x> launch_us=<y> counted_us=<z> added_us=<w>``.

    .venv/bin/python bench/launch_overhead.py [--calls 2000] [--repeat 9] [--smoke]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def build_kernel() -> Any:
    import tilelang
    import tilelang.language as T

    rows = T.dynamic("rows")

    @T.prim_func
    def scale(A: T.Tensor((rows, 64), T.float32), B: T.Tensor((rows, 64), T.float32), n: T.int32):
        with T.Kernel(T.ceildiv(rows, 32)) as bx:
            tile = T.alloc_local((32, 64), T.float32)
            T.copy(A[bx * 32, 0], tile)
            for i, j in T.grid(32, 64):
                tile[i, j] = tile[i, j] * n
            T.copy(tile, B[bx * 32, 0])

    return tilelang.compile(scale, target="c")


def per_launch_us(kernel: Any, args: tuple[Any, ...], calls: int) -> float:
    began = time.perf_counter()
    for _ in range(calls):
        kernel(*args)
    return (time.perf_counter() - began) / calls * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=9)
    parser.add_argument("--smoke", action="store_true", help="run once, small (200 calls, 2 repeats): for CI")
    options = parser.parse_args()
    if options.smoke:
        options.calls, options.repeat = 200, 2
    sys.path.insert(0, str(ROOT))
    os.environ["TILELANG_DISABLE_CACHE"] = "1"  # as under a capture: each compile builds a kernel
    import torch

    from irtrace.lowering.launches import observe_launches

    plain = build_kernel()
    args = (torch.ones(32, 64), torch.empty(32, 64), 3)
    runs = iter(range(1, 1000))
    with observe_launches(lambda: {next(runs)}) as kernels:
        counted = build_kernel()  # compiled while observed: its launches are counted
    assert kernels, "the kernel compiled while observed was not tied to a run"
    per_launch_us(plain, args, options.calls)  # warm both
    plain_times, counted_times = [], []
    for _ in range(options.repeat):
        plain_times.append(per_launch_us(plain, args, options.calls))
        with observe_launches(lambda: set()) as observed:
            observed.update(kernels)
            counted_times.append(per_launch_us(counted, args, options.calls))
    launch, with_counting = statistics.median(plain_times), statistics.median(counted_times)
    (launched,) = kernels.values()
    print(f"launch without counting: {launch:.2f} us (median of {options.repeat} x {options.calls})")
    print(f"launch counted:          {with_counting:.2f} us ({sum(launched.counts.values())} counted)")
    print(
        f"RESULT ratio={with_counting / launch:.3f} launch_us={launch:.2f} counted_us={with_counting:.2f} "
        f"added_us={with_counting - launch:.2f}"
    )


if __name__ == "__main__":
    main()
