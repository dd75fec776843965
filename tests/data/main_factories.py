"""Kernels whose ``@T.prim_func`` is called ``main``, as in most of TileLang's examples: one built
by a plain factory and lowered with ``tilelang.lower``, one returned by a ``@tilelang.jit``
function and compiled, and one at module level (it has no factory and stays ``main``).

``python main_factories.py``: prints ``called NAME ARGUMENTS`` per call, the function's name and
the call's arguments bound to its parameters, as Python writes them: the oracle for the kernel
names and the arguments ``irtrace run`` records.
"""

import inspect

import tilelang
import tilelang.language as T
from tilelang.backend.target import determine_target


def scale(N, block=256, double=False, dtype=T.float16):
    @T.prim_func
    def main(A: T.Tensor((N,), dtype), B: T.Tensor((N,), dtype)):
        with T.Kernel(T.ceildiv(N, block), threads=128) as bx:
            for i in T.Parallel(block):
                B[bx * block + i] = A[bx * block + i] * (4 if double else 2)

    return main


@T.prim_func
def main(A: T.Tensor((1024,), T.float16), B: T.Tensor((1024,), T.float16)):
    with T.Kernel(4, threads=128) as bx:
        for i in T.Parallel(256):
            B[bx * 256 + i] = A[bx * 256 + i]


@tilelang.jit(target={"kind": "cuda", "arch": "sm_90a"})
def shift(N, block, dtype=T.float16):
    @T.prim_func
    def main(A: T.Tensor((N,), dtype), B: T.Tensor((N,), dtype)):
        with T.Kernel(T.ceildiv(N, block), threads=128) as bx:
            for i in T.Parallel(block):
                B[bx * block + i] = A[bx * block + i] + 1

    return main


def called(function, *args, defaults=True):
    bound = inspect.signature(function).bind(*args)
    if defaults:
        bound.apply_defaults()
    spelled = {k: f"T.{v}" if k == "dtype" else repr(v) for k, v in bound.arguments.items()}
    print("called", function.__name__, ", ".join(f"{k}={v}" for k, v in spelled.items()), flush=True)


target = determine_target({"kind": "cuda", "arch": "sm_90a"}, return_object=True)
with target:
    tilelang.lower(scale(2048, 128, False), target=target)
    called(scale, 2048, 128, False)
    tilelang.lower(main, target=target)
    print("called main", flush=True)
shift.compile(4096, 256)
called(shift.func, 4096, 256, defaults=False)  # compile() sees only the arguments given
