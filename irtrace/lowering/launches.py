"""What a captured program passes each time it launches a kernel it compiled: each argument's
shape, dtype and strides, or a scalar's value, counted by distinct signature (as TritonParse's
launch tracing does for Triton, compactly).

``observe_launches`` wraps TileLang's ``JITKernel`` while a capture runs: its ``__init__`` (the
compilation, where the capture's runs begin) ties the kernel to its runs, and its ``__call__``
counts the launch's signature, a tuple made of what the arguments already hold (no copy, no
device synchronization). When the capture ends, each run gets a ``launches`` record.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from irtrace.trace.model import KernelRun
from irtrace.trace.schema import LaunchArg, LaunchSignature
from irtrace.trace.writer import TraceWriter

MAX_SIGNATURES = 64
"""Distinct signatures kept per kernel; launches past them are counted as dropped."""
KEPT_ELEMENTS = 1 << 16
"""Integer and bool tensors up to this many elements have their values kept (a copy on their
device, at a signature's first launch): ``--bench`` launches with them, since random values in
offsets, lengths or masks (``cu_seqlens``) make a kernel read out of bounds or trap."""


@dataclass
class _Launched:
    """One compiled kernel of the program: its runs, its inputs' names and its launches."""

    kernel: Any
    """The ``JITKernel``, held so that its ``id`` is not reused while the capture runs."""
    runs: list[int]
    params: list[str]
    counts: dict[tuple[Any, ...], int] = field(default_factory=dict)
    dropped: int = 0
    kept: dict[tuple[Any, ...], dict[int, Any]] = field(default_factory=dict)
    """A signature's integer and bool tensors (by position), copied at its first launch."""


_SCALARS = (int, float, bool)


def _argument_key(value: Any, tensor: Any) -> Any:
    """What identifies an argument in a signature: a tensor's shape, dtype and strides (as torch
    holds them: no copy), a scalar's type and value, another object's type. Kept to a few
    attribute reads: it runs at every launch."""
    if isinstance(value, tensor):
        return ("tensor", value.shape, value.dtype, value.stride())
    kind = type(value)
    if kind in _SCALARS:
        return ("scalar", kind, value)
    return ("object", kind.__name__)


def _kept_values(args: tuple[Any, ...], tensor: Any) -> dict[int, Any]:
    """Copies of the small integer and bool tensors among a launch's arguments (``KEPT_ELEMENTS``)."""
    return {
        index: value.detach().clone()
        for index, value in enumerate(args)
        if isinstance(value, tensor)
        and not (value.is_floating_point() or value.is_complex())
        and value.numel() <= KEPT_ELEMENTS
        and value.device.type != "meta"
    }


def _launch_arg(key: Any, param: str) -> LaunchArg:
    if key[0] == "tensor":
        dtype = str(key[2]).removeprefix("torch.")
        return LaunchArg(param=param, shape=[int(d) for d in key[1]], dtype=dtype, strides=list(key[3]))
    if key[0] == "scalar":
        return LaunchArg(param=param, value=key[2])
    return LaunchArg(param=param, kind=key[1])


def _input_names(kernel: Any) -> list[str]:
    """The names of the parameters a launch's positional arguments go to (outputs left out)."""
    func = getattr(kernel, "prim_func", None)
    params = list(getattr(func, "params", None) or [])
    out_idx = getattr(kernel, "out_idx", None) or []
    outputs = (
        {int(i) % len(params) for i in ([out_idx] if isinstance(out_idx, int) else out_idx)}
        if params
        else set()
    )
    return [str(p.name) for i, p in enumerate(params) if i not in outputs]


def signatures_of(launched: _Launched) -> list[LaunchSignature]:
    """The kernel's distinct signatures, most launched first."""
    ordered = sorted(launched.counts.items(), key=lambda item: -item[1])
    signatures = []
    for key, count in ordered:
        names = [*launched.params, *[""] * max(0, len(key) - len(launched.params))]
        signatures.append(
            LaunchSignature(args=[_launch_arg(k, n) for k, n in zip(key, names, strict=False)], count=count)
        )
    return signatures


@contextlib.contextmanager
def observe_launches(run_ids: Callable[[], set[int]]) -> Iterator[dict[int, _Launched]]:
    """While entered, each ``JITKernel`` compiled is tied to the runs begun during its compilation
    (``run_ids`` gives the runs begun so far) and each of its launches is counted. Yields the
    kernels by ``id``; TileLang's methods are restored on exit."""
    import torch
    from tilelang.jit.kernel import JITKernel

    tensor = torch.Tensor
    kernels: dict[int, _Launched] = {}
    original_init = JITKernel.__init__
    original_call = JITKernel.__call__

    def init_noting_runs(self: Any, *args: Any, **kwargs: Any) -> None:
        before = run_ids()
        original_init(self, *args, **kwargs)
        with contextlib.suppress(Exception):  # noting never changes what the program gets
            runs = sorted(run_ids() - before)
            if runs:
                kernels[id(self)] = _Launched(self, runs, _input_names(self))

    def call_counting(self: Any, *args: Any, **kwargs: Any) -> Any:
        launched = kernels.get(id(self))
        if launched is not None:
            key = tuple([_argument_key(a, tensor) for a in args])
            if key in launched.counts:
                launched.counts[key] += 1
            elif len(launched.counts) < MAX_SIGNATURES:
                launched.counts[key] = 1
                with contextlib.suppress(Exception):  # keeping values never changes the launch
                    launched.kept[key] = _kept_values(args, tensor)
            else:
                launched.dropped += 1
        return original_call(self, *args, **kwargs)

    JITKernel.__init__ = init_noting_runs  # type: ignore[method-assign]
    JITKernel.__call__ = call_counting  # type: ignore[method-assign]
    try:
        yield kernels
    finally:
        JITKernel.__init__ = original_init  # type: ignore[method-assign]
        JITKernel.__call__ = original_call  # type: ignore[method-assign]


def write_launches(writer: TraceWriter, kernels: dict[int, _Launched]) -> dict[int, KernelRun]:
    """A ``launches`` record for every run of a kernel that was launched; the runs as written."""
    written: dict[int, KernelRun] = {}
    for launched in kernels.values():
        if not launched.counts:
            continue
        signatures = signatures_of(launched)
        for run_id in launched.runs:
            with contextlib.suppress(KeyError):  # a run of another process's writer (after a fork)
                written[run_id] = writer.add_launches(run_id, signatures, launched.dropped)
    return written


def launch_values(kernels: dict[int, _Launched]) -> dict[int, dict[str, Any]]:
    """Run id -> the integer and bool tensors its kernel's most launched signature passed, by the
    parameter each went to (``_kept_values``)."""
    found: dict[int, dict[str, Any]] = {}
    for launched in kernels.values():
        if not launched.counts:
            continue
        key = max(launched.counts, key=lambda k: launched.counts[k])
        values = {
            launched.params[index]: value
            for index, value in launched.kept.get(key, {}).items()
            if index < len(launched.params)
        }
        for run_id in launched.runs:
            found[run_id] = values
    return found
