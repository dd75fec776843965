"""The instance a program really uses, found by running the program's own call: run as
``python program_oracle.py FILE`` (the file's entry point) or ``python program_oracle.py --pytest
TEST_ID`` (one test), it wraps TileLang's ``tilelang.lower``, ``tilelang.compile`` and
``JITImpl.compile``; at the program's first compilation it lowers that very PrimFunc with the
plain instrument of ``oracle.py`` and prints ``[[line, hint], ...]`` as JSON, then ends the process.

``python program_oracle.py --all FILE`` goes on through the whole program instead: each
compilation (and each ``@autotune`` call, as its first config: ``AutoTuneImpl.jit_impl``) is
lowered, and the program gets a kernel that does nothing, with a profiler that checks nothing;
``cuda`` tensors are made on the CPU and ``torch.testing.assert_close`` checks nothing. It prints
the hints of the first instance of each kernel. Nothing here uses irtrace or tilelang_lsp.

``python program_oracle.py --many JSON`` answers several of these runs (``JSON``: a list of
argument lists) in one process: TileLang and torch are imported once, then each run is a forked
child, as alone as a process of its own. It prints ``[[exit status, last line], ...]`` as JSON.
"""

from __future__ import annotations

import json
import os
import runpy
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from oracle import compiler_buffers, expected_hint

TARGET = "cuda:sm_90"


ORIGINALS: dict[str, Any] = {}


def report(func: Any) -> None:
    import tilelang

    tilelang.lower, tilelang.compile = ORIGINALS["lower"], ORIGINALS["compile"]
    hints = sorted(
        (b.line, expected_hint(b, TARGET)) for b in compiler_buffers(func, TARGET) if b.line is not None
    )
    os.write(ORIGINALS["stdout"], (json.dumps(hints) + "\n").encode())
    os._exit(0)


class DoesNothing:
    """What a compilation gives the program under ``--all``: no GPU work, no checks, 0 ms."""

    def __init__(self, config: dict[str, Any] | None = None) -> None:
        self.config = config or {}

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return DoesNothing()

    def __getattr__(self, name: str) -> Any:
        return DoesNothing()

    def __format__(self, spec: str) -> str:
        return "0"


def run_all(path: str) -> None:
    """Every kernel the program compiles, lowered; the hints of each kernel's first instance."""
    import tilelang
    import torch
    from tilelang.autotuner.tuner import AutoTuneImpl
    from tilelang.jit import JITImpl
    from torch.overrides import TorchFunctionMode

    seen: dict[int, list[tuple[int, str]]] = {}
    real_lower = tilelang.lower

    def lower(func: Any) -> None:
        tilelang.lower = real_lower  # the oracle's own lowering
        try:
            buffers = compiler_buffers(func, TARGET)
        finally:
            tilelang.lower = compile_entry
        hints = sorted((b.line, expected_hint(b, TARGET)) for b in buffers if b.line is not None)
        if hints:
            seen.setdefault(hints[0][0], hints)  # a kernel's buffers start at its first line

    def compile_entry(func: Any, *args: Any, **kwargs: Any) -> Any:
        lower(func)
        return DoesNothing()

    def jit_compile(self: Any, *args: Any, **kwargs: Any) -> Any:
        lower(self.get_tir(*args, **kwargs))
        return DoesNothing()

    def tune(self: Any, *args: Any, **kwargs: Any) -> Any:
        kwargs.pop("__return_kernel", None)
        configs = self.configs(*args, **kwargs) if callable(self.configs) else self.configs
        first = dict(next(iter(configs)))
        lower(self.jit_impl.get_tir(*args, **{**kwargs, **first}))
        return DoesNothing(first)

    class CudaOnCpu(TorchFunctionMode):
        def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            kwargs = dict(kwargs or {})
            if func is torch.Tensor.cuda:
                return args[0]
            if str(kwargs.get("device", "")).startswith("cuda"):
                kwargs["device"] = "cpu"
            return func(*args, **kwargs)

    tilelang.compile = tilelang.lower = compile_entry
    JITImpl.compile = jit_compile  # type: ignore[method-assign]
    AutoTuneImpl.__call__ = tune  # type: ignore[method-assign]
    torch.testing.assert_close = lambda *args, **kwargs: None
    torch.cuda.synchronize = lambda *args, **kwargs: None
    sys.argv = [path]
    sys.path.insert(0, str(Path(path).resolve().parent))
    with CudaOnCpu():
        runpy.run_path(path, run_name="__main__")
    print(json.dumps(sorted(hint for hints in seen.values() for hint in hints)))


def run_symbolic(path: str, factory: str, symbols: list[str]) -> None:
    """The factory built as TileLang builds a kernel with dynamic sizes: each of ``symbols`` a
    ``T.dynamic`` of its name, the other parameters their defaults; its hints."""
    import tilelang.language as T

    declared_only = "--declared" in symbols  # TileLang's layout inference crashes on a symbolic tile
    symbols = [name for name in symbols if name != "--declared"]
    namespace = runpy.run_path(path, run_name="factories_under_test")
    func = namespace[factory](**{name: T.dynamic(name) for name in symbols})
    buffers = declared_buffers(func) if declared_only else compiler_buffers(func, TARGET)
    print(json.dumps(sorted((b.line, expected_hint(b, TARGET)) for b in buffers if b.line)))


def declared_buffers(func: Any) -> list[Any]:
    """The buffers as the built PrimFunc declares them, before any pass."""
    from oracle import CompilerBuffer
    from tvm.tirx.stmt_functor import post_order_visit

    found = [func.buffer_map[p] for p in func.params if p in func.buffer_map]
    post_order_visit(func.body, lambda node: found.extend(getattr(node, "alloc_buffers", None) or ()))

    def dims(shape: Any) -> tuple[Any, ...]:
        return tuple(int(d) if d.__class__.__name__ == "IntImm" else str(d) for d in shape)

    return [
        CompilerBuffer(
            str(b.name),
            b.span.line if b.span else None,
            dims(b.shape),
            dims(b.shape),
            str(b.dtype),
            str(b.scope()),
            None,
        )
        for b in found
    ]


def run_many(runs: list[list[str]]) -> None:
    """Each run in a child forked after the imports every run pays for; its answer by a pipe."""
    import pytest  # noqa: F401  (what --pytest runs need, imported once)
    import tilelang
    import tilelang.language  # noqa: F401
    import torch  # noqa: F401
    from tilelang.autotuner.tuner import AutoTuneImpl  # noqa: F401
    from tilelang.jit import JITImpl  # noqa: F401
    from torch.overrides import TorchFunctionMode  # noqa: F401

    answers: list[tuple[int, str | None]] = []
    for arguments in runs:
        sys.stdout.flush()
        sys.stderr.flush()
        readable, writable = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(readable)
            os.dup2(writable, 1)
            os.close(writable)
            status = 0
            try:
                sys.argv = [sys.argv[0], *arguments]
                main()
            except SystemExit as exit:  # as the process of its own would have ended
                status = exit.code if isinstance(exit.code, int) else 0 if exit.code is None else 1
                if not isinstance(exit.code, int | None):
                    print(exit.code, file=sys.stderr)
            except BaseException:
                import traceback

                traceback.print_exc()
                status = 1
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(status)
        os.close(writable)
        with os.fdopen(readable, "rb") as answer:
            lines = answer.read().decode().strip().splitlines()
        _, wait_status = os.waitpid(pid, 0)
        answers.append((os.waitstatus_to_exitcode(wait_status), lines[-1] if lines else None))
    print(json.dumps(answers))


def main() -> None:
    if sys.argv[1] == "--many":
        run_many(json.loads(sys.argv[2]))
        return
    if sys.argv[1] == "--all":
        run_all(sys.argv[2])
        return
    if sys.argv[1] == "--symbolic":
        run_symbolic(sys.argv[2], sys.argv[3], sys.argv[4:])
        return
    import tilelang
    from tilelang.jit import JITImpl

    def lower_first(func: Any, *args: Any, **kwargs: Any) -> Any:
        report(func)

    def compile_first(self: Any, *args: Any, **kwargs: Any) -> Any:
        report(self.get_tir(*args, **kwargs))

    # pytest captures file descriptor 1: the answer goes to a copy taken before
    ORIGINALS.update(lower=tilelang.lower, compile=tilelang.compile, stdout=os.dup(1))
    tilelang.lower = lower_first
    tilelang.compile = lower_first
    JITImpl.compile = compile_first  # type: ignore[method-assign]
    if sys.argv[1] == "--pytest":
        import pytest

        os.chdir(Path(sys.argv[2].split("::")[0]).resolve().parent)
        pytest.main(["-q", "-p", "no:randomly", "-p", "no:cacheprovider", sys.argv[2]])
    else:
        sys.argv = sys.argv[1:]
        sys.path.insert(0, str(Path(sys.argv[0]).resolve().parent))
        runpy.run_path(sys.argv[0], run_name="__main__")
    sys.exit("the program never compiled a kernel")


if __name__ == "__main__":
    main()
