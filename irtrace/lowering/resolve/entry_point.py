"""Run a kernel file's own entry point (its ``if __name__ == "__main__":`` block) through every kernel
it builds, to learn the arguments the program really instantiates its kernels with.

The program runs in a child forked from the worker (so nothing it changes stays in the worker)
with its stdout on stderr and no stdin. While it runs:

- ``@tilelang.jit`` and ``@autotune`` calls, and the factory call behind each ``@T.prim_func``
  the program compiles, are observed with irtrace's ``observe_jit_calls`` (arguments, ``T.const``
  and ``T.dynamic`` sizes); each kernel's first compiled instance is kept;
- every compilation (``tilelang.compile``, ``tilelang.lower``, a jit kernel's compile or eager
  call, an ``@autotune`` call) is intercepted: nothing is lowered, compiled, tuned or run. The
  program gets a stand-in kernel whose call returns outputs of the declared shapes on PyTorch's
  ``meta`` device, whose profiler checks nothing and benches in 0 ms, so it goes on to the next
  kernel (TileLang's examples check each kernel on the GPU before building the next);
- without a usable GPU, torch tensors asked for on ``cuda`` are made on ``meta`` (shape and dtype,
  no data), ``.cuda()``/``.to("cuda")`` move them there, ``torch.cuda``'s device queries answer for
  the analysis target, and ``torch.allclose``/``torch.testing.assert_close``/``bool()`` on meta
  tensors pass; ``torch.cuda.is_available()`` stays honest. Tensors made from values known without
  a GPU keep CPU twins (``twins``), whose values ``.item()`` answers. Anything else that needs real
  data (``.item()`` of a random tensor) ends the run there: kernels built before keep their
  instance, later ones get none (never a guessed one).

Each instance is sent to the worker as soon as it is found, so a run stopped at its time limit
keeps the instances it found before.
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
from typing import Any

from irtrace.facts.source_tree import compile_source, parse_source

MAIN = "__main__"


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
        tree = parse_source(text)
    except (SyntaxError, ValueError):
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


META = "meta"


def _is_cuda(device: Any) -> bool:
    return device is not None and str(device).startswith("cuda")


def _meta_cuda_mode() -> Any:
    """A torch function mode sending tensors asked for on ``cuda`` to ``meta``, with CPU twins of
    the values known without a GPU (``twins``: ``.item()`` of those answers as on the GPU)."""
    import torch
    from torch.overrides import TorchFunctionMode

    from irtrace.lowering.resolve.twins import call_with_twins

    class MetaCudaMode(TorchFunctionMode):
        def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            kwargs = dict(kwargs or {})
            if func is torch.Tensor.cuda:
                func, args, kwargs = torch.Tensor.to, (args[0], META), {}
            if func is torch.Tensor.to:
                args = (args[0], *(META if _is_cuda(a) else a for a in args[1:]))
            if _is_cuda(kwargs.get("device")):
                kwargs["device"] = META
            return call_with_twins(func, tuple(args), kwargs)

    return MetaCudaMode()


_META_WARM: list[bool] = []


def warm_meta_tensors() -> None:
    """Run one operation on meta tensors, once per process: PyTorch imports ``torch._dynamo`` on the
    first one (1-6 s), which an entry-point run would pay, inside its time limit, in every forked
    child. The workers call it before they report ready."""
    if _META_WARM:
        return
    _META_WARM.append(True)
    with contextlib.suppress(Exception):
        import torch

        rows = torch.empty(4, 4, device=META)
        _ = (rows * torch.empty(4, device=META)[:, None]).sum(dim=1)


def _torch_dtype(dtype: Any) -> Any:
    import torch

    name = str(dtype)
    found = getattr(torch, name, None) or getattr(torch, name + "fn", None)
    return found if isinstance(found, torch.dtype) else torch.float32


def _output_index(func: Any, out_idx: Any) -> list[int]:
    """The positions of ``func``'s outputs: ``out_idx`` as TileLang takes it, else ``T.empty``'s."""
    count = len(func.params)
    if out_idx is None and func.attrs is not None and "tilelang_out_idx" in func.attrs:
        out_idx = list(func.attrs["tilelang_out_idx"])
    if out_idx is None:
        return []
    indices = [out_idx] if isinstance(out_idx, int) else list(out_idx)
    return sorted({int(i) % count for i in indices}) if count else []


def _meta_outputs(func: Any, outputs: list[int], args: tuple[Any, ...]) -> Any:
    """Empty meta tensors of the declared output shapes; a symbolic size takes its value from the
    inputs' shapes. ``None`` where a size cannot be known."""
    import torch
    from tvm import tirx

    inputs = [p for i, p in enumerate(func.params) if i not in outputs]
    sizes: dict[str, int] = {}
    for param, value in zip(inputs, args, strict=False):
        buffer = func.buffer_map.get(param, None)
        shape = getattr(value, "shape", None)
        if buffer is None or shape is None:
            continue
        for dim, size in zip(buffer.shape, shape, strict=False):
            if isinstance(dim, tirx.Var):
                sizes[str(dim.name)] = int(size)
    made = []
    for index in outputs:
        buffer = func.buffer_map.get(func.params[index], None)
        dims = []
        for dim in buffer.shape if buffer is not None else [None]:
            if isinstance(dim, tirx.IntImm):
                dims.append(int(dim))
            elif isinstance(dim, tirx.Var) and str(dim.name) in sizes:
                dims.append(sizes[str(dim.name)])
            else:
                dims = []
                break
        made.append(torch.empty(dims, dtype=_torch_dtype(buffer.dtype), device=META) if dims else None)
    if not made:
        return None
    return made[0] if len(made) == 1 else made


def _nothing(*_args: Any, **_kwargs: Any) -> None:
    return None


class StandInProfiler:
    """What ``kernel.get_profiler()`` gives during the run: it checks nothing and benches in 0 ms;
    its ``func`` is the kernel, as TileLang's profiler's is."""

    def __init__(self, kernel: Any = None) -> None:
        self.func = kernel if kernel is not None else _nothing

    def assert_allclose(self, *_args: Any, **_kwargs: Any) -> None:
        return None

    def manual_assert_close(self, *_args: Any, **_kwargs: Any) -> None:
        return None

    def do_bench(self, *_args: Any, **_kwargs: Any) -> float:
        return 0.0

    def run_once(self, *_args: Any, **_kwargs: Any) -> float:
        return 0.0

    def __getattr__(self, name: str) -> Any:
        return _nothing


class StandInKernel:
    """What a compilation gives the program during the run: calling it runs nothing and returns
    outputs of the declared shapes on ``meta``; its profiler is a ``StandInProfiler``."""

    latency = 0.0
    ref_latency = 0.0

    def __init__(self, func: Any = None, out_idx: Any = None, config: dict[str, Any] | None = None) -> None:
        self.func = func
        self.outputs = _output_index(func, out_idx) if func is not None else []
        self.config = dict(config or {})
        """An ``@autotune`` kernel's stand-in for the best config: its first one."""
        self.kernel = self
        self._written: set[int] | None = None
        self._inputs = len(func.params) - len(self.outputs) if func is not None else 0

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        # on a GPU the launch writes what the kernel writes: those arguments' values are unknown now
        if self.func is None:
            _forget_twins((args, kwargs))
        else:
            if self._written is None:
                self._written = _written_inputs(self.func, self.outputs)
            _forget_twins(
                ([a for i, a in enumerate(args) if i in self._written or i >= self._inputs], kwargs)
            )
        if self.func is None or not self.outputs:
            return None
        return _meta_outputs(self.func, self.outputs, args)

    def get_profiler(self, *_args: Any, **_kwargs: Any) -> StandInProfiler:
        return StandInProfiler(self)

    def get_kernel_source(self, *_args: Any, **_kwargs: Any) -> str:
        return ""

    def __getattr__(self, name: str) -> Any:
        return _nothing


WRITING_CALL_WORDS = ("address", "ptr", "atomic", "ptx", "tma", "store", "copy", "asm", "mma")
"""A ``tir.*`` call whose name holds none of these takes its buffer element arguments as values;
one holding any may write them."""


def _written_inputs(func: Any, outputs: list[int]) -> set[int]:
    """Positions, among a launch's arguments (the inputs), of the buffers the kernel may write: all
    but those it only reads (loads as values, ``T.region`` for reading). Anything else (a store, a
    pointer to it, an element handed to a tile op) counts as a write, as does a failure to tell."""
    inputs = [p for i, p in enumerate(func.params) if i not in outputs]
    try:
        import tvm
        from tvm import tirx

        positions: dict[int, int] = {}
        """an input buffer's data variable (its handle) -> the input's position"""
        for index, param in enumerate(inputs):
            buffer = func.buffer_map.get(param, None)
            if buffer is not None:
                positions.setdefault(buffer.data.__chandle__(), index)
        written: set[int] = set()

        def mark(data: Any) -> None:
            index = positions.get(data.__chandle__())
            if index is not None:
                written.add(index)

        def visit(node: Any) -> None:
            if isinstance(node, tirx.BufferStore):
                mark(node.buffer.data)
            elif isinstance(node, tirx.Var):  # the pointer itself, handed on
                mark(node)
            elif isinstance(node, tirx.Call):
                name = str(node.op.name) if isinstance(node.op, tvm.ir.Op) else ""
                if name == "tl.region":
                    if isinstance(node.args[0], tirx.BufferLoad) and int(node.args[1]) != 1:
                        mark(node.args[0].buffer.data)
                    return
                safe = name.startswith("tir.") and not any(word in name for word in WRITING_CALL_WORDS)
                for arg in node.args:
                    if isinstance(arg, tirx.BufferLoad) and not safe:
                        mark(arg.buffer.data)

        tirx.stmt_functor.post_order_visit(func.body, visit)
        return written
    except Exception:
        return set(range(len(inputs)))


def _forget_twins(values: Any) -> None:
    if "irtrace.lowering.resolve.twins" in sys.modules:  # only where the meta stand-ins made twins
        from irtrace.lowering.resolve.twins import TWINS

        TWINS.forget(values)


def _first_config(tuned: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    configs = tuned.configs
    with contextlib.suppress(Exception):
        configs = configs(*args, **kwargs) if callable(configs) else configs
        first = next(iter(configs or ()), None)
        return dict(first) if isinstance(first, dict) else {}
    return {}


def _harmless_gpu_work(stack: contextlib.ExitStack, target: str) -> None:
    """Without a GPU: tensors asked for on ``cuda`` made on ``meta``, ``torch.cuda``'s device
    queries answered for ``target``, and comparisons of meta tensors passing."""
    import torch

    if torch.cuda.is_available():
        return
    stack.enter_context(_meta_cuda_mode())
    from irtrace.targets.backends import get_target

    spec = get_target(target).tvm_target
    arch = str(spec.get("arch", "")) if isinstance(spec, dict) else ""
    digits = "".join(c for c in arch.removeprefix("sm_") if c.isdigit())
    capability = (int(digits[:-1]), int(digits[-1])) if len(digits) >= 2 else (9, 0)

    class Event:
        def __init__(self, *_args: Any, **_kwargs: Any) -> None:
            pass

        record = synchronize = wait = _nothing

        def elapsed_time(self, _other: Any) -> float:
            return 0.0

    def on_meta(*values: Any) -> bool:
        return any(getattr(getattr(v, "device", None), "type", None) == META for v in values)

    original_allclose = torch.allclose
    original_assert_close = torch.testing.assert_close

    def allclose(a: Any, b: Any, *args: Any, **kwargs: Any) -> bool:
        return True if on_meta(a, b) else bool(original_allclose(a, b, *args, **kwargs))

    def assert_close(actual: Any, expected: Any, *args: Any, **kwargs: Any) -> None:
        if not on_meta(actual, expected):
            original_assert_close(actual, expected, *args, **kwargs)

    cuda_free_generator = _cuda_free_generator(torch.Generator)
    answers: list[tuple[Any, str, Any]] = [
        (torch, "Generator", cuda_free_generator),
        (torch.cuda, "get_device_capability", lambda *_a, **_k: capability),
        (torch.cuda, "get_device_name", lambda *_a, **_k: f"stand-in for {target}"),
        (torch.cuda, "current_device", lambda *_a, **_k: 0),
        (torch.cuda, "synchronize", _nothing),
        (torch.cuda, "Event", Event),
        (torch, "allclose", allclose),
        (torch.testing, "assert_close", assert_close),
    ]
    with contextlib.suppress(ImportError):  # TileLang's own check, which reads values with .item()
        import tilelang.utils.tensor as tilelang_tensor

        original_tilelang_close = tilelang_tensor.torch_assert_close

        def tilelang_assert_close(actual: Any, expected: Any, *args: Any, **kwargs: Any) -> None:
            if not on_meta(actual, expected):
                original_tilelang_close(actual, expected, *args, **kwargs)

        answers.append((tilelang_tensor, "torch_assert_close", tilelang_assert_close))
    for owner, attr, value in answers:
        replace_for(stack, owner, attr, value)


def replace_for(stack: contextlib.ExitStack, owner: Any, attr: str, value: Any) -> None:
    """``owner.attr`` is ``value`` until ``stack`` closes, when the original is put back."""
    stack.callback(setattr, owner, attr, getattr(owner, attr))
    setattr(owner, attr, value)


def _cuda_free_generator(generator: Any) -> Any:
    """``torch.Generator`` whose ``device="cuda"`` makes a CPU one (seeded alike): a program that
    seeds its inputs on the GPU (TileLang's fused MoE) goes on; the tensors it draws are on meta."""

    class AnyGenerator(type(generator)):  # type: ignore[misc]
        def __instancecheck__(cls, instance: Any) -> bool:  # the generators made before count too
            return isinstance(instance, generator)

    class CudaFreeGenerator(generator, metaclass=AnyGenerator):  # type: ignore[misc,valid-type]
        def __new__(cls, device: Any = "cpu") -> Any:
            return generator.__new__(cls, device="cpu" if _is_cuda(device) else device)

        def __init__(self, device: Any = "cpu") -> None:
            pass

    return CudaFreeGenerator


def _patch(stack: contextlib.ExitStack, places: list[tuple[Any, str]], value: Any) -> None:
    for owner, attr in places:
        original = getattr(owner, attr, None) if owner is not None else None
        if original is not None and not isinstance(original, type(sys)):
            replace_for(stack, owner, attr, value)


def _run_program(path: str, text: str, kernels: list[EntryKernel], target: str, send: Any) -> dict[str, Any]:
    """In the child: run the program through every kernel it builds; ``send(name, call)`` hears
    each kernel's first instance as it is found. ``target="auto"`` means ``target`` where TileLang
    finds no GPU, and ``target`` is the current TVM target while the program runs."""
    import tilelang
    import tilelang.jit
    from tilelang.autotuner.tuner import AutoTuneImpl

    from irtrace.lowering.jit_calls import current_call, definition_of, factory_call, observe_jit_calls
    from irtrace.lowering.loader import package_root
    from irtrace.lowering.tvm_targets import auto_target_fallback, make_tvm_target
    from irtrace.targets.backends import get_target

    real = os.path.realpath(path)
    found: set[str] = set()

    def note(name: str, call: dict[str, Any]) -> None:
        if name not in found:
            found.add(name)
            send(name, call)

    def note_definition(definition: str | None, call: dict[str, Any]) -> None:
        where, _, line = (definition or "").rpartition(":")
        if not where or os.path.realpath(where) != real:
            return
        for kernel in kernels:
            if str(kernel.first_line) == line or str(kernel.def_line) == line:
                note(kernel.name, call)
                return

    def compile_stand_in(func: Any, *args: Any, **kwargs: Any) -> StandInKernel:
        # a jit kernel's compilation, else the factory whose @T.prim_func this is
        call = current_call() or factory_call(func)
        if call is not None:
            note_definition(
                call.definition,
                {
                    "args": call.args.get("args", []),
                    "kwargs": call.args.get("kwargs", {}),
                    "constants": dict(call.constants),
                    "dynamic": dict(call.dynamic),
                },
            )
        out_idx = kwargs.get("out_idx", args[0] if args else None)
        return StandInKernel(func if hasattr(func, "buffer_map") else None, out_idx)

    def tune_stand_in(self: Any, *args: Any, **kwargs: Any) -> StandInKernel:
        kwargs.pop("__return_kernel", None)
        definition = definition_of(self.jit_impl.func)
        call = {
            "args": [encode_value(a) for a in args],
            "kwargs": {k: encode_value(v) for k, v in kwargs.items()},
        }
        note_definition(definition, {**call, "constants": {}, "dynamic": {}})
        return StandInKernel(config=_first_config(self, args, kwargs))

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
        # by module name: the attribute ``tilelang.jit`` is the decorator, ``tilelang.engine.lower``
        # the function
        modules = [sys.modules.get(n) for n in ("tilelang.jit", "tilelang.engine", "tilelang.engine.lower")]
        places = [(tilelang, "compile"), (tilelang, "lower"), (modules[0], "compile")]
        _patch(stack, [*places, *((m, "lower") for m in modules[1:])], compile_stand_in)
        _patch(stack, [(AutoTuneImpl, "__call__")], tune_stand_in)
        profiler = sys.modules.get("tilelang.profiler")
        bench = sys.modules.get("tilelang.profiler.bench")
        _patch(stack, [(profiler, "do_bench"), (bench, "do_bench")], lambda *_a, **_k: 0.0)
        with contextlib.suppress(Exception):
            _harmless_gpu_work(stack, target)
        try:
            # compiled with dont_inherit: this module's `from __future__ import annotations` must not
            # reach the program
            exec(compile_source(text, path), namespace)
        except SystemExit as error:
            outcome = "ended" if error.code in (None, 0) else f"exited with status {error.code}"
        except BaseException as error:  # the program's own failure: what it reached still counts
            outcome = f"{type(error).__name__}: {str(error).splitlines()[0][:200] if str(error) else ''}"
    return {"outcome": outcome}


def run_entry_point(
    path: str, text: str, kernels: list[EntryKernel], *, target: str, timeout_s: float
) -> dict[str, Any]:
    """``{"instances": {kernel: {"args", "kwargs", "constants", "dynamic"}}, "outcome": str}`` from
    running the program in a forked child; past ``timeout_s`` the child is killed, and the
    instances it sent before are kept. The child leads a process group of its own, and the whole
    group is killed when the run ends: a helper process the program forked dies with it."""
    warm_meta_tensors()
    read_end, write_end = os.pipe()
    scratch = tempfile.mkdtemp(prefix="tilelang-lsp-run-")
    pid = os.fork()
    if pid == 0:  # the child: never returns into the worker
        status = 0
        try:
            os.setpgid(0, 0)  # the program's own processes join this group, killed as one
            _die_with_parent()
            os.close(read_end)
            os.chdir(scratch)  # what the program writes by relative path (logs, caches) lands here
            null = os.open(os.devnull, os.O_RDONLY)
            os.dup2(null, 0)
            os.dup2(2, 1)
            sys.stdout = sys.stderr
            pipe = os.fdopen(write_end, "wb")

            def send(name: str, call: dict[str, Any]) -> None:
                pipe.write(json.dumps({"kernel": name, "call": call}, default=str).encode() + b"\n")
                pipe.flush()

            result = _run_program(path, text, kernels, target, send)
            pipe.write(json.dumps(result, default=str).encode() + b"\n")
            pipe.close()
        except BaseException:
            status = 1
        finally:
            os._exit(status)
    with contextlib.suppress(OSError):  # as the child does: whichever runs first makes the group
        os.setpgid(pid, pid)
    os.close(write_end)
    buffer = b""
    instances: dict[str, Any] = {}
    outcome: str | None = None
    deadline = time.monotonic() + timeout_s
    exited = False
    try:
        # the run ends at its outcome line, at the pipe's end, or once the child has exited and
        # left nothing unread: a helper the program forked may hold the pipe open for ever
        while outcome is None:
            left = deadline - time.monotonic()
            if left <= 0:
                os.kill(pid, signal.SIGKILL)
                outcome = f"stopped after {timeout_s:g} s"
                break
            ready, _, _ = select.select([read_end], [], [], min(left, CHILD_POLL_S))
            if not ready:
                if exited:
                    break
                exited = os.waitpid(pid, os.WNOHANG)[0] == pid
                continue
            chunk = os.read(read_end, 1 << 16)
            if not chunk:
                break
            buffer += chunk
            *lines, buffer = buffer.split(b"\n")
            for line in lines:
                outcome = _take_line(line, instances) or outcome
    finally:
        os.close(read_end)
        with contextlib.suppress(OSError):  # before the wait: the group's id stays the child's
            os.killpg(pid, signal.SIGKILL)
        if not exited:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)
        shutil.rmtree(scratch, ignore_errors=True)
    return {"instances": instances, "outcome": outcome or "the program's run gave no answer"}


CHILD_POLL_S = 0.2
"""How often a program's run looks whether its child has exited, when the pipe is quiet."""


def _die_with_parent() -> None:
    """Linux: be killed when the process that forked this one dies (a job killed at its time
    limit), or the program would run on unwatched."""
    with contextlib.suppress(Exception):
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def _take_line(line: bytes, instances: dict[str, Any]) -> str | None:
    """One line from the child: an instance (kept in ``instances``) or the run's outcome."""
    try:
        message = json.loads(line)
    except ValueError:
        return None
    if not isinstance(message, dict):
        return None
    if isinstance(message.get("kernel"), str) and isinstance(message.get("call"), dict):
        instances.setdefault(message["kernel"], message["call"])
        return None
    outcome = message.get("outcome")
    return outcome if isinstance(outcome, str) else None
