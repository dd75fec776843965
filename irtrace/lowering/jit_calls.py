"""What a captured kernel was instantiated with: the program's own call, seen through TileLang's
``@tilelang.jit`` entry while a capture is active.

``observe_jit_calls()`` wraps ``JITImpl.compile`` (every ``@tilelang.jit`` compilation, eager
calls included) and ``TirTemplate.get_tir`` (where an eager kernel's ``T.const`` sizes are
bound) for as long as it is entered, then puts TileLang's own methods back. A capture recorder
asks ``current_instance()`` when a compilation starts.
"""

from __future__ import annotations

import contextlib
import inspect
import os
import sys
import sysconfig
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

from irtrace.lowering.loader import describe_value
from irtrace.trace.schema import Instance, TensorArg


@dataclass
class JitCall:
    """One ``@tilelang.jit`` compilation in progress, as the program called it."""

    args: dict[str, Any]
    """``{"args": [...], "kwargs": {...}}``: tensors as ``{"shape", "dtype", "device"}``, other values
    as ``irtrace record`` shows a spec's arguments."""
    constants: dict[str, int] = field(default_factory=dict)
    dynamic: dict[str, int] = field(default_factory=dict)
    tensors: dict[str, TensorArg] = field(default_factory=dict)
    definition: str | None = None
    """``path:line`` of the kernel's Python function."""
    function: str | None = None
    """The name of that function: a ``@tilelang.jit`` function's or a factory's (``matmul``)."""


_CALLS = threading.local()
"""Per thread: the stack of ``JitCall`` being compiled (TileLang compiles in the caller's thread)."""


def _call_stack() -> list[JitCall]:
    stack: list[JitCall] | None = getattr(_CALLS, "stack", None)
    if stack is None:
        stack = _CALLS.stack = []
    return stack


def tensor_arg(value: Any) -> TensorArg | None:
    """``value`` described as a tensor (anything with an integer ``shape``, a ``dtype`` and a
    ``device``, as torch tensors have); ``None`` for anything else."""
    shape = getattr(value, "shape", None)
    dtype = getattr(value, "dtype", None)
    if shape is None or dtype is None or not hasattr(value, "device"):
        return None
    try:
        dims = [int(dim) for dim in shape]
    except (TypeError, ValueError):
        return None
    return TensorArg(shape=dims, dtype=str(dtype).removeprefix("torch."), device=str(value.device))


def describe_argument(value: Any) -> Any:
    """An argument of the program's call as JSON: a tensor by shape, dtype and device."""
    tensor = tensor_arg(value)
    if tensor is not None:
        return {"shape": tensor.shape, "dtype": tensor.dtype, "device": tensor.device}
    return describe_value(value)


def _call_json(args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    return {
        "args": [describe_argument(a) for a in args],
        "kwargs": {str(k): describe_argument(v) for k, v in kwargs.items()},
    }


def _named_arguments(
    function: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """The call with its positional arguments named by the function's parameters, in order
    (``block_M=128`` reads better than a bare ``128``); unchanged when one cannot be named
    (``*args``, positional-only parameters)."""
    try:
        parameters = list(inspect.signature(function).parameters.values())
    except (TypeError, ValueError):
        return args, kwargs
    if len(args) > len(parameters):
        return args, kwargs
    named = {}
    for parameter, value in zip(parameters, args, strict=False):
        if parameter.kind is not inspect.Parameter.POSITIONAL_OR_KEYWORD or parameter.name in kwargs:
            return args, kwargs
        named[parameter.name] = value
    return (), {**named, **kwargs}


def _note_template(template: Any, given_tensors: dict[str, Any], kwargs: dict[str, Any], func: Any) -> None:
    """Fill the current call's sizes from an eager kernel's phase-2 instantiation: ``T.const``
    values as TileLang bound them, ``T.dynamic`` ones from the call's tensors."""
    import tvm

    stack = _call_stack()
    if not stack:
        return
    call = stack[-1]
    for name, value in given_tensors.items():
        tensor = tensor_arg(value)
        if tensor is not None:
            call.tensors[str(name)] = tensor
    matcher = getattr(template, "matcher", None)
    if matcher and not getattr(template, "is_lazy_style", False):
        values = template._parse_phase2_key(**given_tensors, **kwargs)
        for var, value in zip(matcher, values, strict=True):
            call.constants[str(getattr(var, "orig_name", var.name))] = int(value)
    buffers = getattr(func, "buffer_map", None) or {}
    for param, buffer in buffers.items():
        tensor = call.tensors.get(str(param.name))
        if tensor is None:
            continue
        for index, dim in enumerate(buffer.shape):
            if isinstance(dim, tvm.tirx.Var) and index < len(tensor.shape):
                call.dynamic[str(dim.name)] = tensor.shape[index]


_FACTORY_CALLS: dict[int, tuple[Any, JitCall]] = {}
"""Per ``@T.prim_func`` function built inside a factory (by ``id``, with the function kept alive):
the factory's call, for when its PrimFunc is lowered by ``tilelang.lower``/``tilelang.compile``."""


def _factory_call(frame: FrameType | None) -> JitCall | None:
    """The call of the function running in ``frame`` (a kernel factory), as a ``JitCall``."""
    if frame is None or frame.f_code.co_filename.startswith("<"):
        return None
    if not frame.f_code.co_name.isidentifier():  # ``<module>``: a module-level PrimFunc has no factory
        return None
    code = frame.f_code
    names = code.co_varnames[: code.co_argcount + code.co_kwonlyargcount]
    kwargs = {name: frame.f_locals[name] for name in names if name in frame.f_locals}
    where = f"{_shown_path(os.path.realpath(code.co_filename))}:{code.co_firstlineno}"
    return JitCall(_call_json((), kwargs), definition=where, function=code.co_name)


def factory_call(func: Any) -> JitCall | None:
    """The factory call that built the PrimFunc ``func`` (while ``observe_factories`` is entered)."""
    noted = _FACTORY_CALLS.get(id(getattr(func, "orig_func", None)))
    return noted[1] if noted is not None else None


def _lowering_noting_factory(original: Any) -> Any:
    """``tilelang.lower``/``tilelang.compile`` that note the factory call behind the PrimFunc they
    are given (outside a ``@tilelang.jit`` compilation, which notes its own)."""

    def lower(func: Any, *args: Any, **kwargs: Any) -> Any:
        noted = _FACTORY_CALLS.get(id(getattr(func, "orig_func", None)))
        if noted is None or current_call() is not None:
            return original(func, *args, **kwargs)
        stack = _call_stack()
        stack.append(noted[1])
        try:
            return original(func, *args, **kwargs)
        finally:
            stack.pop()

    return lower


@contextlib.contextmanager
def observe_factories() -> Iterator[None]:
    """While entered, a PrimFunc built by a factory (``@T.prim_func`` inside a function) and then
    lowered with ``tilelang.lower`` or ``tilelang.compile`` is known by the factory's call."""
    import tilelang
    import tilelang.language

    original_prim_func = tilelang.language.prim_func

    def prim_func_noting_factory(func: Any = None, **kwargs: Any) -> Any:
        caller = sys._getframe(1)
        made = original_prim_func(func, **kwargs)
        if func is None:  # @T.prim_func(...) with options: the decorator comes back first
            return made
        with contextlib.suppress(Exception):  # noting the call never changes what the program gets
            call = _factory_call(caller)
            if call is not None:
                _FACTORY_CALLS[id(func)] = (func, call)
        return made

    entries = [(tilelang, "lower"), (tilelang, "compile")]
    originals = [(owner, name, getattr(owner, name)) for owner, name in entries]
    # TileLang tells a lazy ``@tilelang.jit`` function by ``T.prim_func is eager.prim_func``
    # (``has_internal_prim_func``): both names must be the wrapper, or autotuned lazy kernels are
    # taken for eager ones ("out_idx is only supported in lazy mode")
    eager = sys.modules.get("tilelang.language.eager")
    same_in_eager = eager is not None and getattr(eager, "prim_func", None) is original_prim_func
    tilelang.language.prim_func = prim_func_noting_factory
    if same_in_eager:
        eager.prim_func = prim_func_noting_factory  # type: ignore[union-attr]
    for owner, name, original in originals:
        setattr(owner, name, _lowering_noting_factory(original))
    try:
        yield
    finally:
        tilelang.language.prim_func = original_prim_func
        if same_in_eager:
            eager.prim_func = original_prim_func  # type: ignore[union-attr]
        for owner, name, original in originals:
            setattr(owner, name, original)
        _FACTORY_CALLS.clear()


@contextlib.contextmanager
def observe_jit_calls() -> Iterator[None]:
    """While entered, every ``@tilelang.jit`` compilation of this process notes its call for
    ``current_instance``, and so does every factory's PrimFunc lowered with ``tilelang.lower`` or
    ``tilelang.compile``; TileLang's methods are restored on exit."""
    from tilelang.jit import JITImpl
    from tilelang.language.eager.builder import TirTemplate

    original_compile = JITImpl.compile
    original_get_tir = TirTemplate.get_tir

    def compile_noting_call(self: Any, *args: Any, **kwargs: Any) -> Any:
        stack = _call_stack()
        function = getattr(self.func, "orig_func", self.func)
        named_args, named_kwargs = _named_arguments(function, args, kwargs)
        stack.append(
            JitCall(
                _call_json(named_args, named_kwargs),
                definition=definition_of(self.func),
                function=getattr(function, "__name__", None),
            )
        )
        try:
            return original_compile(self, *args, **kwargs)
        finally:
            stack.pop()

    def get_tir_noting_sizes(self: Any, tensor_args: Any, given_tensor_args: Any, kwargs: Any) -> Any:
        func = original_get_tir(self, tensor_args, given_tensor_args, kwargs)
        with contextlib.suppress(Exception):  # recording the call never changes what the program gets
            _note_template(self, dict(given_tensor_args), dict(kwargs), func)
        return func

    JITImpl.compile = compile_noting_call  # type: ignore[method-assign]
    TirTemplate.get_tir = get_tir_noting_sizes  # type: ignore[method-assign]
    try:
        with observe_factories():
            yield
    finally:
        JITImpl.compile = original_compile  # type: ignore[method-assign]
        TirTemplate.get_tir = original_get_tir  # type: ignore[method-assign]


def definition_of(func: Any) -> str | None:
    """``path:line`` where the Python function behind a jit kernel begins (its first decorator)."""
    code = getattr(getattr(func, "orig_func", func), "__code__", None)
    if code is None or code.co_filename.startswith("<"):
        return None
    return f"{_shown_path(os.path.realpath(code.co_filename))}:{code.co_firstlineno}"


def current_call() -> JitCall | None:
    """The ``@tilelang.jit`` compilation this thread is in, if any."""
    stack = _call_stack()
    return stack[-1] if stack else None


def _int_env(name: str) -> int | None:
    try:
        return int(os.environ[name])
    except (KeyError, ValueError):
        return None


def _test_id() -> str | None:
    """The running pytest test (``PYTEST_CURRENT_TEST`` without its `` (call)`` phase)."""
    current = os.environ.get("PYTEST_CURRENT_TEST")
    if not current:
        return None
    test, _, phase = current.rpartition(" (")
    return test if test and phase.endswith(")") else current


def _library_folders() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Folders whose frames are not the program's (TileLang, TVM, irtrace, the standard library),
    and those inside them that are (installed packages, when they lie in the standard library's)."""
    paths = sysconfig.get_paths()
    folders = [paths["stdlib"], str(Path(__file__).resolve().parents[1])]
    for name in ("tilelang", "tvm", "tvm_ffi"):
        module = sys.modules.get(name)
        file = getattr(module, "__file__", None)
        if file:
            folders.append(str(Path(file).resolve().parent))
    packages = {paths["purelib"], paths["platlib"]}
    return (
        tuple(os.path.realpath(f) + os.sep for f in folders),
        tuple(os.path.realpath(f) + os.sep for f in packages),
    )


def call_site(frame: FrameType | None = None) -> str | None:
    """``path:line`` of the innermost frame outside TileLang, TVM, irtrace and the standard
    library: the program's own line that compiled the kernel. The path is relative to the
    working folder when it lies inside it."""
    libraries, packages = _library_folders()
    frame = frame or sys._getframe(1)
    while frame is not None:
        filename = frame.f_code.co_filename
        if not filename.startswith("<"):
            path = os.path.realpath(filename)
            ours = path.startswith(libraries) and not (
                path.startswith(packages) and not path.startswith(libraries[1:])
            )
            if not ours:
                return f"{_shown_path(path)}:{frame.f_lineno}"
        frame = frame.f_back
    return None


def _shown_path(path: str) -> str:
    cwd = os.path.realpath(os.getcwd())
    return os.path.relpath(path, cwd) if path.startswith(cwd + os.sep) else path


def current_instance() -> Instance:
    """Where and with what the compilation starting now in this thread was instantiated."""
    pid = os.getpid()
    rank, world_size = _int_env("RANK"), _int_env("WORLD_SIZE")
    process = f"pid {pid}"
    if rank is not None:
        process += f", rank {rank}" + (f" of {world_size}" if world_size is not None else "")
    call = current_call()
    return Instance(
        process=process,
        pid=pid,
        rank=rank,
        world_size=world_size,
        call_site=call_site(sys._getframe(1)),
        definition=call.definition if call else None,
        test_id=_test_id(),
        constants=dict(call.constants) if call else {},
        dynamic=dict(call.dynamic) if call else {},
        tensors=dict(call.tensors) if call else {},
    )
