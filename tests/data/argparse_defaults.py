"""Module-level argparse with defaults, as TileLang's own examples have: it must see only this file."""

import argparse

import tilelang.language as T

parser = argparse.ArgumentParser()
parser.add_argument("--size", type=int, default=256)
args = parser.parse_args()


def scale(N=args.size):
    @T.prim_func
    def main(A: T.Tensor((N,), T.float32)):
        with T.Kernel(T.ceildiv(N, 128), threads=128) as bx:
            for i in T.Parallel(128):
                A[bx * 128 + i] = A[bx * 128 + i] * 2.0

    return main
