"""A script that compiles an eager ``@tilelang.jit`` kernel (``T.const`` and ``T.dynamic`` sizes)
with tensors of its own, then writes what TileLang generated and what it called with.

``python captured_call_script.py OUT.json``: OUT.json gets the kernel's own
``get_kernel_source()`` and the call's arguments, the oracle for what ``irtrace run`` records.
The kernel is compiled, never called (no GPU is needed; nvcc is, for ``cuda:sm_90a``).
"""

import json
import sys

import tilelang
import tilelang.language as T
import torch


@tilelang.jit(target={"kind": "cuda", "arch": "sm_90a"}, pass_configs={"tl.disable_warp_specialized": True})
def row_scale(X, Y, factor: float = 2.0, block: int = 64):
    M = T.dynamic("M")
    N = T.const("N")
    X: T.Tensor[(M, N), T.float16]
    Y: T.Tensor[(M, N), T.float16]
    with T.Kernel(T.ceildiv(N, block), M, threads=64) as (bx, by):
        for i in T.Parallel(block):
            Y[by, bx * block + i] = X[by, bx * block + i] * factor


x = torch.zeros(48, 256, dtype=torch.float16)
y = torch.zeros(48, 256, dtype=torch.float16)
kernel = row_scale.compile(x, y, factor=3.0)

with open(sys.argv[1], "w") as out:
    json.dump(
        {
            "source": kernel.get_kernel_source(),
            # the call, its positional arguments named by row_scale's parameters
            "args": [],
            "kwargs": {
                **{
                    name: {
                        "shape": list(t.shape),
                        "dtype": str(t.dtype).removeprefix("torch."),
                        "device": str(t.device),
                    }
                    for name, t in (("X", x), ("Y", y))
                },
                "factor": 3.0,
            },
            "constants": {"N": x.shape[1]},
            "dynamic": {"M": x.shape[0]},
        },
        out,
    )
