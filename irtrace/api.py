"""Record kernels for targets into a trace: the entry points the CLI and the language server share.

``record_request`` records a kernel spec for its targets (the CLI); ``analyze_kernel`` builds one
kernel found in a loaded module and lowers it up to a pass (the language server's worker).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from irtrace.errors import IrtraceError, KernelSourceError
from irtrace.loader import (
    BuiltKernel,
    KernelCall,
    KernelDefinition,
    LoadedModule,
    bind_call,
    build_primfunc,
    load_spec_module,
    select_kernels,
    target_context,
)
from irtrace.recorder import RecordedLowering, record_failure, record_lowering
from irtrace.specs import KernelSpec
from irtrace.targets import TargetSpec, make_tvm_target, resolve_targets
from irtrace.trace import KernelRun, TraceWriter


@dataclass(frozen=True)
class RecordRequest:
    """One kernel spec to record, with its targets and extra pass configs."""

    spec: KernelSpec
    """The kernel spec; its path is a file (relative to ``base_dir``) or a dotted module name."""
    targets: tuple[str, ...] = ()
    """Target names (``all`` allowed); empty means the dialect's default."""
    pass_configs: Mapping[str, Any] = field(default_factory=dict)
    """Added on top of the kernel's own (``--pass-config``)."""
    name: str | None = None
    """Name to record the kernel under instead of its Python name."""
    base_dir: Path | None = None
    """Folder that a relative spec path is relative to (a manifest's folder)."""


@dataclass
class PreparedLowering:
    """One kernel of a request built for one target: ready to lower, or why it could not be built."""

    name: str
    """Name the kernel is recorded under."""
    spec: KernelSpec
    """The request's spec, naming this kernel."""
    target: TargetSpec
    tvm_target: Any
    built: BuiltKernel | None
    error: KernelSourceError | None
    """Why the factory failed for this target (then ``built`` is ``None``)."""
    pass_configs: dict[str, Any]
    """The kernel's own pass configs with the request's on top."""
    args: dict[str, Any] = field(default_factory=dict)
    """The run header's ``args``: the evaluated arguments and any filled in by ``@autotune``."""


def prepare_request(request: RecordRequest) -> Iterator[PreparedLowering]:
    """Load the request's file or module and build each of its kernels for each of its targets, lazily.

    A file that cannot be loaded, or an argument that cannot be evaluated, raises; a factory
    that raises for one target is yielded with its error, so callers can record it and go on.
    Arguments are evaluated per target, inside its context, as the factory itself runs.
    """
    loaded = load_spec_module(request.spec.path, request.base_dir)
    kernels = select_kernels(loaded, request.spec)
    targets = resolve_targets(request.targets, loaded.dialect)
    for kernel in kernels:
        spec = replace(request.spec, name=kernel.name)
        for target in targets:
            tvm_target = make_tvm_target(target)
            with target_context(tvm_target):
                call: KernelCall = bind_call(kernel, spec, loaded.path)
            built: BuiltKernel | None = None
            error: KernelSourceError | None = None
            try:
                built = build_primfunc(kernel, spec, tvm_target, loaded.path, call)
            except KernelSourceError as raised:
                error = raised
            configs = {**(built.pass_configs if built else {}), **request.pass_configs}
            yield PreparedLowering(
                request.name or kernel.name, spec, target, tvm_target, built, error, configs, call.args_json()
            )


def record_request(
    request: RecordRequest,
    writer: TraceWriter,
    *,
    stop_after: Sequence[str] = (),
) -> list[RecordedLowering | KernelRun]:
    """Lower one request for each of its targets; a kernel that cannot be built or lowered is
    recorded as a failed run and the others go on."""
    results: list[RecordedLowering | KernelRun] = []
    for prepared in prepare_request(request):
        args = prepared.args
        if prepared.built is None:
            assert prepared.error is not None
            results.append(
                record_failure(
                    writer,
                    prepared.target,
                    kernel=prepared.name,
                    spec=prepared.spec.text,
                    args=args,
                    error=prepared.error.message,
                )
            )
            continue
        results.append(
            record_lowering(
                prepared.built.func,
                prepared.target,
                writer,
                kernel=prepared.name,
                spec=prepared.spec.text,
                args=args,
                pass_configs=prepared.pass_configs,
                tvm_target=prepared.tvm_target,
                stop_after=stop_after,
            )
        )
    return results


def record_requests(
    requests: Iterable[RecordRequest], writer: TraceWriter
) -> tuple[list[KernelRun], list[IrtraceError]]:
    """Record every request; a request that cannot be loaded is reported and the rest go on."""
    runs: list[KernelRun] = []
    errors: list[IrtraceError] = []
    for request in requests:
        try:
            for result in record_request(request, writer):
                runs.append(result.run if isinstance(result, RecordedLowering) else result)
        except IrtraceError as error:
            errors.append(error)
    return runs, errors


@dataclass
class AnalyzedKernel:
    """One kernel built and lowered (up to a pass) for one target."""

    built: BuiltKernel
    recorded: RecordedLowering
    build_s: float
    """Seconds the factory or jit kernel took to give its PrimFunc."""


def analyze_kernel(
    loaded: LoadedModule,
    kernel: KernelDefinition,
    spec: KernelSpec,
    target: TargetSpec,
    writer: TraceWriter,
    *,
    tvm_target: Any = None,
    stop_after: str | None = None,
    pass_configs: Mapping[str, Any] | None = None,
    should_stop: Callable[[], bool] | None = None,
    capture_ir: bool = True,
) -> AnalyzedKernel:
    """Build ``kernel`` with ``spec``'s arguments for ``target`` and lower it up to ``stop_after``
    (the whole pipeline when ``None``), recording into ``writer``.

    A kernel that cannot be built raises ``IrtraceError``; a lowering failure is in the result.
    ``pass_configs`` are defaults under the kernel's own; ``should_stop`` cancels between passes.
    """
    tvm_target = tvm_target or make_tvm_target(target)
    began = time.perf_counter()
    with target_context(tvm_target):
        call = bind_call(kernel, spec, loaded.path)
    built = build_primfunc(kernel, spec, tvm_target, loaded.path, call)
    build_s = time.perf_counter() - began
    recorded = record_lowering(
        built.func,
        target,
        writer,
        kernel=kernel.name,
        spec=spec.text,
        args=call.args_json(),
        pass_configs={**(pass_configs or {}), **built.pass_configs},
        tvm_target=tvm_target,
        stop_after=() if stop_after is None else (stop_after,),
        should_stop=should_stop,
        capture_ir=capture_ir,
    )
    return AnalyzedKernel(built, recorded, build_s)
