"""A script that lowers two kernels with TileLang's own API, then fails as it would without a GPU."""

import sys

import tilelang
from tilelang.backend.target import determine_target

sys.path.insert(0, __file__.rsplit("/", 3)[0] + "/examples")
from gemm import matmul

target = determine_target({"kind": "cuda", "arch": "sm_90"}, return_object=True)
with target:
    tilelang.lower(matmul(256, 256, 256), target=target)
    tilelang.lower(matmul(128, 128, 128, block_M=64, block_N=64), target=target)
if "--fail" in sys.argv:
    raise RuntimeError("no CUDA device available")
