"""Kernels that misbehave on purpose, for the crash, hang and interrupt tests.

``IRTRACE_TEST_MISBEHAVE`` says how, as ``WHAT:PASS``: ``segv:LowerTileOp`` makes TileLang's
``tl.LowerTileOp`` (looked up by the pipeline as ``tilelang.transform.LowerTileOp``) crash the
process with a segmentation fault when it lowers ``misbehaving_copy``, ``hang:LowerTileOp``
makes it sleep in native code instead, and ``hang-factory`` makes ``stuck_factory`` never
return. Other kernels lower as usual, and nothing is changed when the variable is unset.
``raising_factory`` always raises: a run that fails at once, for tests of scheduling.
"""

import ctypes
import os
import time

import tilelang
import tilelang.language as T
import tvm

_HOW = os.environ.get("IRTRACE_TEST_MISBEHAVE", "")


def _misbehaving_pass(name: str, how: str) -> None:
    original = getattr(tilelang.transform, name)

    def replacement():  # type: ignore[no-untyped-def]
        @tvm.transform.module_pass(opt_level=0, name=f"tl.{name}")
        def misbehave(mod, ctx):  # type: ignore[no-untyped-def]
            if not any(gvar.name_hint == "misbehaving_copy" for gvar in mod.functions):
                return original()(mod)
            if how == "segv":
                ctypes.string_at(0)  # reads address 0: SIGSEGV
            else:
                ctypes.CDLL(None).sleep(3600)  # native sleep: not a Python loop
            return original()(mod)

        return misbehave

    setattr(tilelang.transform, name, replacement)


if ":" in _HOW:
    _misbehaving_pass(_HOW.split(":", 1)[1], _HOW.split(":", 1)[0])


def copy(N=1024, block=256, dtype=T.float16):
    @T.prim_func
    def misbehaving_copy(A: T.Tensor((N,), dtype), B: T.Tensor((N,), dtype)):
        with T.Kernel(T.ceildiv(N, block), threads=128) as bx:
            for i in T.Parallel(block):
                B[bx * block + i] = A[bx * block + i]

    return misbehaving_copy


def stuck_factory(N=1024):
    if _HOW == "hang-factory":
        while True:
            time.sleep(0.05)
    return copy(N)


def raising_factory(N=1024):
    raise ValueError("this factory fails on purpose")
