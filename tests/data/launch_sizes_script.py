"""A kernel compiled from plain numbers, as some libraries compile theirs: its row count is a
symbolic size and ``num_chunks`` a scalar, both seen only at launch. The script prints what it
passes (the test's oracle), then launches it on the CPU (target ``c``)."""

import json

import torch

import tilelang
import tilelang.language as T

rows = T.dynamic("rows")


@T.prim_func
def scale_chunks(A: T.Tensor((rows, 64), T.float32), B: T.Tensor((rows, 64), T.float32), num_chunks: T.int32):
    with T.Kernel(T.ceildiv(rows, 32)) as bx:
        tile = T.alloc_local((32, 64), T.float32)
        T.copy(A[bx * 32, 0], tile)
        for i, j in T.grid(32, 64):
            tile[i, j] = tile[i, j] * num_chunks
        T.copy(tile, B[bx * 32, 0])


kernel = tilelang.compile(scale_chunks, target="c")
passed = []
for count, num_chunks in ((96, 3), (96, 3), (32, 5)):
    a = torch.ones(count, 64)
    b = torch.empty(count, 64)
    kernel(a, b, num_chunks)
    passed.append([list(a.shape), list(a.stride()), list(b.shape), num_chunks])
print("PASSED " + json.dumps(passed))
