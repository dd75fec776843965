"""A script that lowers a small kernel in other processes, as scripts under ``irtrace run`` do.

It lowers once itself, once in an ``os.fork`` child, then in a ``multiprocessing`` pool (start
method from the first argument: fork, spawn or forkserver), then once more itself. Every lowering
prints ``lowered B SHA`` (B the copy's block size, SHA the SHA-256 of TileLang's kernel source): the
oracle the tests count a trace against. With ``--child-raises`` the forked child raises after
lowering, as a failing worker does.
"""

import hashlib
import multiprocessing
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import tilelang
from misbehaving import copy
from tilelang.backend.target import determine_target


def lower(block: int) -> str:
    target = determine_target({"kind": "cuda", "arch": "sm_90"}, return_object=True)
    with target:
        artifact = tilelang.lower(copy(8192, block), target=target)
    sha = hashlib.sha256(artifact.kernel_source.encode("utf-8")).hexdigest()
    sys.stdout.flush()
    os.write(1, f"lowered {block} {sha}\n".encode())  # one write: workers' lines do not interleave
    return sha


if __name__ == "__main__":
    method = sys.argv[1] if len(sys.argv) > 1 else "fork"
    lower(128)
    child = os.fork()
    if child == 0:
        lower(256)
        if "--child-raises" in sys.argv:
            raise ValueError("the forked child failed")
        os._exit(0)
    os.waitpid(child, 0)
    with multiprocessing.get_context(method).Pool(2) as pool:
        pool.map(lower, [512, 1024, 2048])
    lower(4096)
