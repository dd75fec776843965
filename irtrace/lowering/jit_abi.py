"""The PrimFunc TileLang's JIT really compiles for a kernel definition: its calling convention on it.

``tilelang.compile`` and ``@tilelang.jit`` do not lower the PrimFunc the definition builds, but a
copy stamped by ``tilelang.jit.abi.prepare_tvm_ffi_callee_allocated_outputs`` (from
``JITKernel._compile_and_create_adapter``): ``tilelang_out_idx`` names the outputs, and where the
execution backend resolved for the target allocates them itself (CUDA and Ascend's TVM-FFI),
``tilelang_callee_allocated_outputs`` asks ``MakePackedAPI`` for that host ABI. A recording lowers
that copy, so that it equals a captured run of the same kernel. TileLang's own function does the
stamping; a release without it, or a target whose backend this machine cannot resolve, leaves the
PrimFunc as built.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any

from irtrace.base.errors import KernelSourceError


@dataclass(frozen=True)
class JitCompileArgs:
    """What a definition gives TileLang's compile besides the PrimFunc (``@tilelang.jit(...)``)."""

    out_idx: Any = None
    """The definition's ``out_idx`` (a list, an int or ``None``); ``T.empty`` outputs are on the PrimFunc."""
    execution_backend: str | None = None
    """``None``: TileLang's default (``TILELANG_EXECUTION_BACKEND``, else ``auto``)."""

    @classmethod
    def of(cls, jit: Any) -> JitCompileArgs:
        """The arguments a ``JITImpl`` passes to ``tilelang.compile``."""
        backend = getattr(jit, "execution_backend", None)
        return cls(getattr(jit, "out_idx", None), str(backend) if backend is not None else None)


def as_jit_compiles(func: Any, compile_args: JitCompileArgs, target: Any, where: str) -> Any:
    """``func`` as TileLang's JIT would hand it to lowering for ``target``. An ``out_idx`` TileLang
    refuses (out of range, or unlike the ``T.empty`` outputs) is a ``KernelSourceError``."""
    try:
        from tilelang.backend.module import create_backend_context
        from tilelang.jit.abi import prepare_tvm_ffi_callee_allocated_outputs
    except ImportError:  # a release that stamps nothing compiles the PrimFunc as built
        return func
    backend = _execution_backend(create_backend_context, compile_args, target)
    # JITKernel stamps only for TVM-FFI: Cython, NVRTC and Metal's torch backend take the PrimFunc as built
    if backend is None or getattr(backend, "name", None) != "tvm_ffi":
        return func
    options: dict[str, bool] = {}
    # TileLang 0.1.14's function marks tilelang_out_idx only and takes no backend capability
    if (
        "supports_callee_allocated_outputs"
        in inspect.signature(prepare_tvm_ffi_callee_allocated_outputs).parameters
    ):
        options["supports_callee_allocated_outputs"] = bool(
            getattr(backend, "supports_callee_allocated_outputs", False)
        )
    try:
        stamped, _ = prepare_tvm_ffi_callee_allocated_outputs(func, compile_args.out_idx, **options)
    except (ValueError, TypeError) as error:  # TileLang's compile raises the same for this out_idx
        raise KernelSourceError(f"{where}: TileLang's compile refuses its outputs: {error}") from error
    return stamped


def _execution_backend(create_backend_context: Any, compile_args: JitCompileArgs, target: Any) -> Any:
    """The execution backend TileLang resolves for ``target`` here; ``None`` when it resolves none
    (a backend this machine lacks, such as NVRTC without ``cuda-python``)."""
    requested = compile_args.execution_backend
    if requested is None:
        from tilelang import env

        default = getattr(env, "get_default_execution_backend", None)
        requested = str(default()) if callable(default) else "auto"
    try:
        return create_backend_context(target, None, requested).execution_backend
    except Exception:  # TileLang's own refusal (ValueError, AssertionError): compiled nowhere here
        return None


def as_jit_compiles_module(module: Any, target: Any, where: str) -> Any:
    """A module a program compiled for one target (``irtrace run``), with the output marks TileLang's
    JIT would give it for ``target`` instead: the first target's callee-allocation mark dropped,
    then ``as_jit_compiles`` with the outputs the functions declare (``tilelang_out_idx``)."""
    from tilelang import tvm
    from tvm.tirx import PrimFunc

    try:
        from tilelang.jit.abi import CALLEE_ALLOCATED_OUTPUTS_ATTR as callee_allocated
    except ImportError:  # a release that marks no callee allocation has nothing to drop
        callee_allocated = None
    changed = {}
    for var, func in module.functions.items():
        if not isinstance(func, PrimFunc):
            continue
        bare = func
        if callee_allocated is not None and func.attrs is not None and callee_allocated in func.attrs:
            bare = func.without_attr(callee_allocated)
        marked = as_jit_compiles(bare, JitCompileArgs(), target, where)
        if not marked.same_as(func):
            changed[var] = marked
    if not changed:
        return module
    functions = {var: changed.get(var, func) for var, func in module.functions.items()}
    return tvm.IRModule(functions, attrs=module.attrs, global_infos=module.global_infos)
