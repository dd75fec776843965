"""A kernel file that parses its command line at module level and needs an argument to go on."""

import argparse

import tilelang.language as T

parser = argparse.ArgumentParser()
parser.add_argument("--size", type=int, required=True)
args = parser.parse_args()


@T.prim_func
def scale(A: T.Tensor((args.size,), T.float32)):
    with T.Kernel(1, threads=128) as bx:
        for i in T.Parallel(args.size):
            A[i] = A[i] * 2.0
