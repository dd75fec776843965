"""A working kernel whose file writes to stdout every way it can: print, the raw file descriptor,
and TileLang's own logger (which writes through tqdm to sys.stdout)."""

import os
import sys

import tilelang
import tilelang.language as T

print("NOISE: print to sys.stdout")
sys.stdout.flush()
os.write(1, b"NOISE: raw write to file descriptor 1\n")
tilelang.logger.info("NOISE: TileLang's logger")


def scale(N=1024, block=128):
    @T.prim_func
    def main(A: T.Tensor((N,), T.float32), B: T.Tensor((N,), T.float32)):
        with T.Kernel(T.ceildiv(N, block), threads=block) as bx:
            for i in T.Parallel(block):
                B[bx * block + i] = A[bx * block + i] * 2.0

    print("NOISE: print while building")
    return main
