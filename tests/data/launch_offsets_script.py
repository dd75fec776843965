"""A varlen kernel as attention libraries write them: ``batch`` exists only as ``cu_seqlens``'s
length minus one (its shape is ``batch + 1``), and the offsets in it must be the program's (random
ones would read out of bounds). The script prints what it passes (the test's oracle), then
launches it on the CPU (target ``c``)."""

import json

import torch

import tilelang
import tilelang.language as T

batch = T.dynamic("batch")
total = T.dynamic("total")


@T.prim_func
def row_sums(X: T.Tensor((total, 16), T.float32), cu_seqlens: T.Tensor((batch + 1,), T.int32), Y: T.Tensor((batch, 16), T.float32)):
    with T.Kernel(batch) as b:
        for j in T.serial(16):
            Y[b, j] = 0
            for r in T.serial(cu_seqlens[b + 1] - cu_seqlens[b]):
                Y[b, j] += X[cu_seqlens[b] + r, j]


kernel = tilelang.compile(row_sums, target="c")
cu_seqlens = torch.tensor([0, 3, 10, 12], dtype=torch.int32)
x = torch.ones(12, 16)
y = torch.empty(3, 16)
kernel(x, cu_seqlens, y)
print("PASSED " + json.dumps({"cu_seqlens": cu_seqlens.tolist(), "sums": y[:, 0].tolist()}))
