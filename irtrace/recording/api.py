"""Record kernels for targets into a trace: the entry points the CLI and the language server share.

``record_request`` records a kernel spec for its targets (the CLI); ``analyze_kernel`` builds one
kernel found in a loaded module and lowers it up to a pass (the language server's worker).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from irtrace.core import interrupts
from irtrace.core.errors import IrtraceError, KernelSourceError, OutputError
from irtrace.core.specs import KernelSpec
from irtrace.core.targets import TargetSpec, first_target, resolve_targets
from irtrace.core.trace import KernelRun
from irtrace.core.trace_writer import TraceWriter
from irtrace.recording.loader import (
    BuiltKernel,
    KernelCall,
    KernelDefinition,
    LoadedModule,
    bind_call,
    build_primfunc,
    load_spec_module,
    select_kernels,
    source_as_imported,
    target_context,
)
from irtrace.recording.recorder import RecordedLowering, record_failure, record_lowering
from irtrace.recording.tvm_targets import auto_target_fallback, make_tvm_target


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
    kernel_file_text: str | None = None
    """The kernel's file as imported, stored in the trace (readers show it, never the file)."""


@dataclass(frozen=True)
class LoweringUnit:
    """One kernel of a request and one of its targets, before its arguments are evaluated."""

    request: RecordRequest
    loaded: LoadedModule
    kernel: KernelDefinition
    spec: KernelSpec
    """The request's spec, naming this kernel."""
    target: TargetSpec
    tvm_target: Any


@contextmanager
def running_kernel_code(path: Path | str, doing: str) -> Iterator[None]:
    """``sys.argv`` as ``python FILE`` gives it while kernel code runs; its ``sys.exit`` (a
    module-level ``argparse`` that fails, say) becomes a ``KernelSourceError``."""
    saved = sys.argv[:]
    sys.argv = [str(path)]
    try:
        yield
    except SystemExit as exit_:
        raise KernelSourceError(
            f"{doing} called sys.exit({exit_.code!r}) (a module-level sys.exit or argparse?); "
            'keep script code under `if __name__ == "__main__":`'
        ) from None
    finally:
        sys.argv = saved


def lowering_units(request: RecordRequest) -> Iterator[LoweringUnit]:
    """Load the request's file or module and yield each of its kernels for each of its targets.

    A file that cannot be loaded raises (``KernelSourceError`` for a module that raises or exits).
    """
    # A file that compiles at import with target="auto" gets the request's first target.
    with (
        running_kernel_code(request.spec.path, f"importing {request.spec.path}"),
        auto_target_fallback(first_target(request.targets)),
    ):
        loaded = load_spec_module(request.spec.path, request.base_dir)
    kernels = select_kernels(loaded, request.spec)
    targets = resolve_targets(request.targets, loaded.dialect)
    for kernel in kernels:
        spec = replace(request.spec, name=kernel.name)
        for target in targets:
            yield LoweringUnit(request, loaded, kernel, spec, target, make_tvm_target(target))


def bind_unit(unit: LoweringUnit) -> KernelCall:
    """Evaluate the spec's arguments for the unit's target, inside its context."""
    with (
        target_context(unit.tvm_target),
        running_kernel_code(unit.loaded.path, f"evaluating {unit.spec.text}"),
    ):
        return bind_call(unit.kernel, unit.spec, unit.loaded.path)


def build_unit(unit: LoweringUnit, call: KernelCall) -> PreparedLowering:
    """Build the unit's PrimFunc; a factory that raises gives a ``PreparedLowering`` with its error."""
    built: BuiltKernel | None = None
    error: KernelSourceError | None = None
    try:
        with running_kernel_code(unit.loaded.path, f"building {unit.kernel.name}{unit.spec.call_text}"):
            built = build_primfunc(unit.kernel, unit.spec, unit.tvm_target, unit.loaded.path, call)
    except KernelSourceError as raised:
        interrupts.raise_if_requested()  # a Ctrl-C inside the factory is not the factory's error
        error = raised
    configs = {**(built.pass_configs if built else {}), **unit.request.pass_configs}
    name = unit.request.name or unit.kernel.name
    return PreparedLowering(
        name,
        unit.spec,
        unit.target,
        unit.tvm_target,
        built,
        error,
        configs,
        call.args_json(),
        source_as_imported(unit.loaded.path),
    )


def prepare_request(request: RecordRequest) -> Iterator[PreparedLowering]:
    """Load the request's file or module and build each of its kernels for each of its targets, lazily.

    A file that cannot be loaded, or an argument that cannot be evaluated, raises; a factory
    that raises for one target is yielded with its error, so callers can record it and go on.
    Arguments are evaluated per target, inside its context, as the factory itself runs.
    """
    for unit in lowering_units(request):
        yield build_unit(unit, bind_unit(unit))


def record_prepared(
    prepared: PreparedLowering, writer: TraceWriter, *, stop_after: Sequence[str] = ()
) -> RecordedLowering | KernelRun:
    """Record one built kernel (or its factory's failure) into ``writer``."""
    if prepared.built is None:
        assert prepared.error is not None
        return record_failure(
            writer,
            prepared.target,
            kernel=prepared.name,
            spec=prepared.spec.text,
            args=prepared.args,
            error=prepared.error.message,
            kernel_file_text=prepared.kernel_file_text,
        )
    return record_lowering(
        prepared.built.func,
        prepared.target,
        writer,
        kernel=prepared.name,
        spec=prepared.spec.text,
        args=prepared.args,
        pass_configs=prepared.pass_configs,
        tvm_target=prepared.tvm_target,
        stop_after=stop_after,
        # every record reaches the file before the next pass runs: a native crash loses nothing
        threaded=False,
        kernel_file_text=prepared.kernel_file_text,
    )


AfterRun = Callable[[KernelRun, "PreparedLowering | None"], None]
"""Called after each run is written, with the built kernel when this process built it (not with
``isolate``): ``irtrace record --machine-code`` and ``--bench`` go on from there."""


def record_request(
    request: RecordRequest,
    writer: TraceWriter,
    *,
    stop_after: Sequence[str] = (),
    isolate: bool = False,
    timeout: float | None = None,
    after_run: AfterRun | None = None,
) -> list[RecordedLowering | KernelRun]:
    """Lower one request for each of its targets; a kernel that cannot be built or lowered is
    recorded as a failed run and the others go on.

    With ``isolate`` (implied by ``timeout``), each kernel is built and lowered in a child
    process (``irtrace.recording.isolation``): a crash or a hang ends that run only.
    """
    from irtrace.recording.isolation import record_in_child

    results: list[RecordedLowering | KernelRun] = []
    for unit in lowering_units(request):
        call = bind_unit(unit)
        prepared: PreparedLowering | None = None
        recorded: Sequence[RecordedLowering | KernelRun]
        if isolate or timeout is not None:
            recorded = record_in_child(unit, call, writer, timeout=timeout, stop_after=stop_after)
        else:
            prepared = build_unit(unit, call)
            recorded = [record_prepared(prepared, writer, stop_after=stop_after)]
        results.extend(recorded)
        interrupts.raise_if_requested()
        if after_run is not None:
            for result in recorded:
                after_run(result.run if isinstance(result, RecordedLowering) else result, prepared)
    return results


def record_requests(
    requests: Iterable[RecordRequest],
    writer: TraceWriter,
    *,
    isolate: bool = False,
    timeout: float | None = None,
    after_run: AfterRun | None = None,
) -> tuple[list[KernelRun], list[IrtraceError]]:
    """Record every request; a request that cannot be loaded is reported and the rest go on.

    An ``OutputError`` (the trace cannot be written) and an interrupt stop everything.
    """
    runs: list[KernelRun] = []
    errors: list[IrtraceError] = []
    for request in requests:
        try:
            for result in record_request(
                request, writer, isolate=isolate, timeout=timeout, after_run=after_run
            ):
                runs.append(result.run if isinstance(result, RecordedLowering) else result)
        except OutputError:
            raise
        except IrtraceError as error:
            interrupts.raise_if_requested()
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
        kernel_file_text=source_as_imported(loaded.path),
    )
    return AnalyzedKernel(built, recorded, build_s)
