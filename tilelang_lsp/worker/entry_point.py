"""Run a kernel file's own entry point (its ``if __name__ == "__main__":`` block) up to the first
kernel compilation, to learn the arguments the program really instantiates its kernels with.

The program runs in a child forked from the worker (so nothing it changes stays in the worker)
with its stdout on stderr and no stdin. While it runs:

- the first call of each factory kernel of the file (a function building a ``@T.prim_func``)
  records the arguments it was called with (a profile hook on that function's code);
- ``@tilelang.jit`` compilations are observed with irtrace's ``observe_jit_calls`` (arguments,
  ``T.const`` and ``T.dynamic`` sizes);
- the first compilation (``tilelang.compile``, ``tilelang.lower``, a jit kernel's compile or eager
  call) stops the program there: nothing is lowered, compiled or run;
- without a usable GPU, torch tensors asked for on ``cuda`` are made on the ``meta`` device (shape
  and dtype, no data) and ``.cuda()``/``.to("cuda")`` keep them there; ``torch.cuda.is_available()``
  stays honest. Anything that needs real data or a device before the call fails the run, and the
  kernels get no instance from it (never a guessed one).
"""

from __future__ import annotations

import ast
import contextlib
import json
import linecache
import os
import select
import shutil
import signal
import sys
import tempfile
import time
import types
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

MAIN = "__main__"


class ProgramStopped(BaseException):
    """Raised where the program compiles its first kernel. A ``BaseException``, so that a program's
    ``except Exception`` does not swallow it."""


@dataclass(frozen=True)
class EntryKernel:
    """A kernel of the file, as the source shows it: what the run watches for."""

    name: str
    first_line: int
    """Its first decorator's line (or the ``def`` line)."""
    def_line: int
    is_jit: bool


def has_entry_point(text: str) -> bool:
    """Whether the module has a top-level ``if __name__ == "__main__":`` block (a program)."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return False
    for node in tree.body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Compare):
            sides = [node.test.left, *node.test.comparators]
            names = {s.id for s in sides if isinstance(s, ast.Name)}
            values = {s.value for s in sides if isinstance(s, ast.Constant)}
            if "__name__" in names and MAIN in values:
                return True
    return False


def encode_value(value: Any) -> Any:
    """A value of the program as JSON, losing nothing silently: what is not a plain literal, a
    dtype or a container of them is ``{"unknown": repr}``."""
    import tvm_ffi

    if isinstance(value, tvm_ffi.dtype):
        return f"T.{value}"
    if value is None or type(value) in (bool, int, str):
        return value
    if type(value) is float:
        return value
    if isinstance(value, (list, tuple)):
        return [encode_value(v) for v in value]
    return {"unknown": str.__new__(str, repr(value))[:200]}


def _bound_arguments(frame: FrameType) -> dict[str, Any]:
    """A function's parameters as its frame holds them on entry."""
    code = frame.f_code
    count = code.co_argcount + code.co_kwonlyargcount
    return {name: encode_value(frame.f_locals[name]) for name in code.co_varnames[:count]}


class _MetaCuda:
    """A torch function mode sending tensors asked for on ``cuda`` to ``meta``."""

    @staticmethod
    def make() -> Any:
        import torch
        from torch.overrides import TorchFunctionMode

        def is_cuda(device: Any) -> bool:
            return device is not None and str(device).startswith("cuda")

        class MetaCudaMode(TorchFunctionMode):
            def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
                kwargs = dict(kwargs or {})
                if func is torch.Tensor.cuda:
                    return args[0]
                if func is torch.Tensor.to:
                    rest = [a for a in args[1:] if not is_cuda(a)]
                    if len(rest) != len(args) - 1 or is_cuda(kwargs.get("device")):
                        kwargs.pop("device", None)
                        return func(args[0], *rest, **kwargs) if rest or kwargs else args[0]
                if is_cuda(kwargs.get("device")):
                    kwargs["device"] = "meta"
                return func(*args, **kwargs)

        return MetaCudaMode()


def _patch_compile_entries(stop: Any) -> list[tuple[Any, str, Any]]:
    """Replace TileLang's compile and lower entries with ``stop``; the originals, to put back."""
    import tilelang
    import tilelang.jit

    # by module name: the attribute ``tilelang.jit`` is the decorator, ``tilelang.engine.lower``
    # the function
    modules = [sys.modules.get(name) for name in ("tilelang.jit", "tilelang.engine", "tilelang.engine.lower")]
    places = [(tilelang, "compile"), (tilelang, "lower"), (modules[0], "compile")]
    places += [(m, "lower") for m in modules[1:]]
    patched = []
    for owner, attr in places:
        original = getattr(owner, attr, None) if owner is not None else None
        if original is not None and not isinstance(original, type(sys)):
            patched.append((owner, attr, original))
            setattr(owner, attr, stop)
    return patched


def _run_program(path: str, text: str, kernels: list[EntryKernel], target: str) -> dict[str, Any]:
    """In the child: run the program until its first compilation; what it instantiated.
    ``target="auto"`` means ``target`` where TileLang finds no GPU, and ``target`` is the current
    TVM target while the program runs."""
    from irtrace.core.targets import get_target
    from irtrace.recording.jit_calls import current_call, observe_jit_calls
    from irtrace.recording.loader import package_root
    from irtrace.recording.tvm_targets import auto_target_fallback, make_tvm_target

    real = os.path.realpath(path)
    factories = {k.name: k for k in kernels if not k.is_jit}
    by_line = {(k.first_line, k.name): k for k in kernels}
    found: dict[str, Any] = {}

    def profile(frame: FrameType, event: str, _arg: Any) -> None:
        if event != "call":
            return
        code = frame.f_code
        kernel = factories.get(code.co_name)
        if kernel is None or kernel.name in found or os.path.realpath(code.co_filename) != real:
            return
        if kernel.first_line <= code.co_firstlineno <= kernel.def_line:
            found[kernel.name] = {
                "args": [],
                "kwargs": _bound_arguments(frame),
                "constants": {},
                "dynamic": {},
            }

    def stop(*_args: Any, **_kwargs: Any) -> Any:
        call = current_call()
        if call is not None and call.definition:
            where, _, line = call.definition.rpartition(":")
            name = getattr(call, "name", None)
            for (first, kname), kernel in by_line.items():
                if (
                    str(first) == line
                    and os.path.realpath(where) == real
                    and kname not in found
                    and name in (None, kname)
                ):
                    found[kernel.name] = {
                        "args": call.args.get("args", []),
                        "kwargs": call.args.get("kwargs", {}),
                        "constants": dict(call.constants),
                        "dynamic": dict(call.dynamic),
                    }
        raise ProgramStopped

    # the frontend reads kernel source through inspect: the unsaved text, not the file on disk
    linecache.cache[path] = (len(text), None, text.splitlines(True), path)
    # a real __main__ module, as ``python file.py`` makes: TileLang's frontend finds a kernel's
    # globals through ``sys.modules[func.__module__]``
    main = types.ModuleType(MAIN)
    main.__file__ = path
    # a module of a package runs as ``python -m pkg.module`` would: its relative imports work
    root, dotted = package_root(Path(path), text)
    main.__package__ = dotted.rpartition(".")[0] or None
    sys.modules[MAIN] = main
    namespace = main.__dict__
    sys.argv = [path]
    sys.path.insert(0, str(root))
    outcome = "ended"
    with contextlib.ExitStack() as stack:
        # run as on a machine of the analysis target: `target="auto"` means it, and code asking
        # the current target (an FP8 type chosen per vendor) gets it
        stack.enter_context(auto_target_fallback(get_target(target)))
        stack.enter_context(make_tvm_target(get_target(target)))
        stack.enter_context(observe_jit_calls())
        patched = _patch_compile_entries(stop)
        for owner, attr, original in patched:
            stack.callback(setattr, owner, attr, original)
        with contextlib.suppress(Exception):
            import torch

            if not torch.cuda.is_available():
                stack.enter_context(_MetaCuda.make())
        sys.setprofile(profile)
        try:
            # dont_inherit: this module's `from __future__ import annotations` must not reach the program
            exec(compile(text, path, "exec", dont_inherit=True), namespace)
        except ProgramStopped:
            outcome = "stopped"
        except SystemExit as error:
            outcome = "ended" if error.code in (None, 0) else f"exited with status {error.code}"
        except BaseException as error:  # the program's own failure: what it reached still counts
            outcome = f"{type(error).__name__}: {str(error).splitlines()[0][:200] if str(error) else ''}"
        finally:
            sys.setprofile(None)
    return {"instances": found, "outcome": outcome}


def run_entry_point(
    path: str, text: str, kernels: list[EntryKernel], *, target: str, timeout_s: float
) -> dict[str, Any]:
    """``{"instances": {kernel: {"args", "kwargs", "constants", "dynamic"}}, "outcome": str}`` from
    running the program in a forked child; past ``timeout_s`` the child is killed (no instances)."""
    read_end, write_end = os.pipe()
    scratch = tempfile.mkdtemp(prefix="tilelang-lsp-run-")
    pid = os.fork()
    if pid == 0:  # the child: never returns into the worker
        status = 0
        try:
            os.close(read_end)
            os.chdir(scratch)  # what the program writes by relative path (logs, caches) lands here
            null = os.open(os.devnull, os.O_RDONLY)
            os.dup2(null, 0)
            os.dup2(2, 1)
            sys.stdout = sys.stderr
            result = _run_program(path, text, kernels, target)
            payload = json.dumps(result, default=str).encode()
            with os.fdopen(write_end, "wb") as pipe:
                pipe.write(payload)
        except BaseException:
            status = 1
        finally:
            os._exit(status)
    os.close(write_end)
    chunks: list[bytes] = []
    deadline = time.monotonic() + timeout_s
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                os.kill(pid, signal.SIGKILL)
                return {"instances": {}, "outcome": f"stopped after {timeout_s:g} s"}
            ready, _, _ = select.select([read_end], [], [], left)
            if ready:
                chunk = os.read(read_end, 1 << 16)
                if not chunk:
                    break
                chunks.append(chunk)
    finally:
        os.close(read_end)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)
        shutil.rmtree(scratch, ignore_errors=True)
    try:
        answer = json.loads(b"".join(chunks) or b"null")
    except ValueError:
        answer = None
    if not isinstance(answer, dict):
        return {"instances": {}, "outcome": "the program's run gave no answer"}
    return answer
