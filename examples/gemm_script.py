"""A program that builds the example GEMM at the size it is given, as an application does.

It lowers for a CUDA architecture (no GPU needed), so that `irtrace run` and `IRTRACE=` capture
can be tried on any machine:

    irtrace run -t hip:gfx942 -- python examples/gemm_script.py --size 4096
    IRTRACE=cap.jsonl python examples/gemm_script.py --size 2048
"""

import argparse

import tilelang
from gemm import matmul
from tilelang.backend.target import determine_target


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=1024, help="M = N = K")
    parser.add_argument("--arch", default="sm_90a", help="the CUDA architecture to lower for")
    args = parser.parse_args()
    target = determine_target({"kind": "cuda", "arch": args.arch}, return_object=True)
    with target:
        artifact = tilelang.lower(matmul(args.size, args.size, args.size), target=target)
    print(
        f"gemm {args.size}^3 lowered for {args.arch}: {len(artifact.kernel_source.splitlines())} lines of CUDA"
    )


if __name__ == "__main__":
    main()
