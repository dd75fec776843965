"""Record kernels for targets into a trace: the entry points the CLI and the language server share.

``record_kernels`` records kernel specs for their targets (the CLI, the MCP server), in this process or
in worker processes; ``analyze_kernel`` builds one kernel found in a loaded module and lowers it
up to a pass (the language server's worker).
"""

from __future__ import annotations

import re
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any, Protocol

from msgspec.structs import replace as struct_replace

from irtrace.base import interrupts
from irtrace.base.errors import IrtraceError, KernelSourceError, OutputError, UsageError
from irtrace.lowering.executor import Task, run_tasks
from irtrace.lowering.loader import (
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
from irtrace.lowering.recorder import (
    CaptureOptions,
    LoweringOptions,
    RecordedLowering,
    RunHeader,
    begin_run_record,
    crash_safe,
    record_failure,
    record_lowering,
)
from irtrace.lowering.resolve.candidates import InstanceSources
from irtrace.lowering.resolve.resolver import NEEDS_VALUES, ResolvedInstance, describe, resolve_kernels
from irtrace.lowering.tvm_targets import auto_target_fallback, make_tvm_target
from irtrace.lowering.warmup import warm_error_path
from irtrace.perf.schedule import RunKey, longest_first
from irtrace.targets.backends import TargetSpec, first_target, resolve_targets
from irtrace.targets.specs import KernelSpec
from irtrace.trace.model import KernelRun, PassRecord
from irtrace.trace.writer import TraceWriter


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
    bench_shape: Mapping[str, int] = field(default_factory=dict)
    """The manifest's ``bench_shape``: sizes of symbolic dimensions for ``--bench``."""
    instances: InstanceSources | None = None
    """Where a kernel named without arguments finds its instance (``irtrace.lowering.resolve``:
    a directive, recorded runs, the entry point, a call in the file, then symbols); ``None``: its
    defaults, as the CLI's ``irtrace record`` takes it."""
    source_map: bool = False
    """Store each module's source map (``--source-map``; ``irtrace.lowering.spans``)."""


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
    bench_shape: Mapping[str, int] = field(default_factory=dict)
    """The request's ``bench_shape`` (the manifest's sizes of symbolic dimensions for ``--bench``)."""
    source_map: bool = False
    """The request's ``source_map``."""
    resolved: ResolvedInstance | None = None
    """The instance the resolver found, for a kernel named without arguments (``instances``)."""


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
    resolved: ResolvedInstance | None = None
    """The instance the resolver found, for a kernel named without arguments (``instances``)."""


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
    text = source_as_imported(loaded.path) if request.instances is not None else None
    for kernel in kernels:
        spec = replace(request.spec, name=kernel.name)
        for target in targets:
            tvm_target = make_tvm_target(target)
            if text is None or request.spec.called or not kernel.kind.takes_arguments:
                yield LoweringUnit(request, loaded, kernel, spec, target, tvm_target)
                continue
            assert request.instances is not None
            with running_kernel_code(loaded.path, f"finding the instance of {kernel.name}"):
                resolved = resolve_kernels(
                    loaded.path, text, [kernel], request.instances, target.name, tvm_target=tvm_target
                )[kernel.name]
            pick = request.instances.pick
            if pick is not None and pick not in resolved.instances:
                found = ", ".join(resolved.instances) or "none (it is resolved from its source)"
                raise UsageError(f"--instance {pick!r}: {kernel.name} has no such instance; it has: {found}")
            resolved_spec = replace(resolved.spec, path=request.spec.path)
            yield LoweringUnit(request, loaded, kernel, resolved_spec, target, tvm_target, resolved)


@dataclass(frozen=True)
class KernelInstances:
    """What the resolver finds for one kernel of a file: the instance it takes, and the others."""

    kernel: str
    target: str
    chosen: ResolvedInstance
    others: tuple[ResolvedInstance, ...] = ()
    """The instance each other real candidate (``chosen.instances``) gives, in their order."""


def file_instances(request: RecordRequest) -> list[KernelInstances]:
    """Each kernel of the request's file resolved for its first target, as ``irtrace record``
    would take it named without arguments, with every other real candidate resolved too. Nothing
    is lowered; the entry point runs with GPU work made harmless (no GPU needed)."""
    assert request.instances is not None
    found: list[KernelInstances] = []
    for unit in lowering_units(request):
        if found and found[-1].kernel == unit.kernel.name:
            continue  # the first target tells which instance; the others take the same
        chosen = unit.resolved
        if chosen is None:  # a module-level PrimFunc, or a spec with its arguments written
            continue
        others = []
        text = source_as_imported(unit.loaded.path)
        assert text is not None  # the resolver read it to resolve the unit
        for label in chosen.instances:
            if label == chosen.origin:
                continue
            where = replace(request.instances, pick=label)
            with running_kernel_code(unit.loaded.path, f"finding the instance of {unit.kernel.name}"):
                others.append(
                    resolve_kernels(
                        unit.loaded.path,
                        text,
                        [unit.kernel],
                        where,
                        unit.target.name,
                        tvm_target=unit.tvm_target,
                    )[unit.kernel.name]
                )
        found.append(KernelInstances(unit.kernel.name, unit.target.name, chosen, tuple(others)))
    return found


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
    if built is not None and unit.resolved is not None and unit.resolved.symbolic:
        tiles = symbolic_tiles(built.func)
        if tiles:  # TileLang's layout inference would crash the process on them
            error = KernelSourceError(
                f"{unit.kernel.name}: not lowered: tile(s) {', '.join(tiles)} take their shape from "
                f"{', '.join(unit.resolved.symbolic)}, which nobody gives ({NEEDS_VALUES})"
            )
            built = None
    configs = {**(built.pass_configs if built else {}), **unit.request.pass_configs}
    name = unit.request.name or unit.kernel.name
    args = call.args_json()
    if unit.resolved is not None:  # which instance, and why: the trace says what the summary says
        args["resolved"] = dict(describe(unit.resolved))
    return PreparedLowering(
        name,
        unit.spec,
        unit.target,
        unit.tvm_target,
        built,
        error,
        configs,
        args,
        source_as_imported(unit.loaded.path),
        unit.request.bench_shape,
        unit.request.source_map,
        unit.resolved,
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
    header = RunHeader(
        prepared.name, prepared.spec.text, prepared.args, kernel_file_text=prepared.kernel_file_text
    )
    options = LoweringOptions(
        prepared.target,
        prepared.tvm_target,
        prepared.pass_configs,
        stop_after=tuple(stop_after),
        capture=CaptureOptions(
            # crash-safe: every record reaches the file before the next pass runs, so a native crash
            # loses nothing; a --jobs worker prints on a pool and runs a crashed task again crash-safe
            threaded=not crash_safe(),
            warnings=True,  # each warning kept with the run that logged it
            source_map=prepared.source_map,
        ),
    )
    return record_lowering(prepared.built.func, writer, header, options)


AfterRun = Callable[[KernelRun, "PreparedLowering | None"], None]
"""Called after each run is written, with the built kernel when this process built it (not in
worker processes): ``irtrace record --machine-code`` and ``--bench`` go on from there."""


class RecordProgress(Protocol):
    """Hears how a recording goes: a terminal's progress display (``irtrace.cli.record_progress``)."""

    def planned(self, total: int) -> None:
        """The number of kernel x target runs to record, once all were planned."""

    def started(self, index: int, label: str) -> None:
        """Run ``index`` (``matmul on hip:gfx942``) began lowering."""

    def ended(self, index: int, label: str) -> None:
        """Run ``index`` is done (ok, failed or stopped)."""


_SHARD = re.compile(r"\s*(\d+)\s*/\s*(\d+)\s*\Z")


@dataclass(frozen=True)
class Shard:
    """``I/N``: the Ith of N contiguous slices of the planned work (1-based)."""

    index: int
    count: int

    @classmethod
    def parse(cls, text: str) -> Shard:
        match = _SHARD.match(text)
        if match is None or not 1 <= int(match.group(1)) <= int(match.group(2)):
            raise UsageError(f"--shard {text!r}: write I/N with 1 <= I <= N, such as 1/4")
        return cls(int(match.group(1)), int(match.group(2)))

    def take(self, items: Sequence[WorkItem]) -> list[WorkItem]:
        """This shard's slice: sizes differ by at most one item."""
        total = len(items)
        return list(items[(self.index - 1) * total // self.count : self.index * total // self.count])


@dataclass(frozen=True)
class WorkItem:
    """One kernel for one target with its arguments evaluated, or a request that failed to load."""

    unit: LoweringUnit | None = None
    call: KernelCall | None = None
    error: IrtraceError | None = None
    """Why the request's file or arguments could not be loaded (then there is no unit)."""


@dataclass
class Recording:
    """What ``record_kernels`` wrote: the runs, and the errors of requests that could not be loaded."""

    runs: list[KernelRun] = field(default_factory=list)
    errors: list[IrtraceError] = field(default_factory=list)


def plan_work(requests: Iterable[RecordRequest]) -> Iterator[WorkItem]:
    """Every kernel x target of every request, in order, lazily (each file is loaded when reached).

    A request that cannot be loaded is one error item, and an argument that cannot be evaluated
    for a target ends that request there; the other requests go on.
    """
    for request in requests:
        try:
            for unit in lowering_units(request):
                yield WorkItem(unit, bind_unit(unit))
        except OutputError:
            raise
        except IrtraceError as error:
            interrupts.raise_if_requested()
            yield WorkItem(error=error)


def record_kernels(
    requests: Iterable[RecordRequest],
    writer: TraceWriter,
    *,
    jobs: int = 1,
    shard: Shard | None = None,
    repeat: int = 1,
    isolate: bool = False,
    timeout: float | None = None,
    after_run: AfterRun | None = None,
    progress: RecordProgress | None = None,
    run_times: Mapping[RunKey, float] | None = None,
) -> Recording:
    """Record every kernel of every request for each of its targets into ``writer``, in order.

    In this process, one item after the other as ``plan_work`` loads them; with ``jobs`` > 1,
    ``isolate`` or ``timeout``, in ``jobs`` forked worker processes (``--isolate`` is a pool of
    one, ``timeout`` implies it) where a crash or a hang fails that run only
    (``irtrace.lowering.executor``). ``shard`` records one slice of the planned items; ``repeat``
    lowers each that many times and keeps the fastest times. A kernel that cannot be built or
    lowered is a failed run; a request that cannot be loaded is an error, and the rest go on.
    An ``OutputError`` (the trace cannot be written) and an interrupt stop everything.
    Every file is loaded first, so the number of runs is known from the start (``progress``).
    With ``jobs`` > 1, workers take the longest runs first: by ``run_times`` (a previous trace's,
    ``irtrace.perf.schedule.previous_run_times``) where it has them, else by target; the trace
    is the same and in the same order.
    """
    items: Iterable[WorkItem] = plan_work(requests)
    if shard is not None:
        items = shard.take(list(items))
    items = list(items)
    planned_runs = sum(item.error is None for item in items)
    if progress is not None:
        progress.planned(planned_runs)
    pooled = jobs > 1 or isolate or timeout is not None
    units: list[WorkItem] = []
    errors_before: dict[int, list[IrtraceError]] = {}
    """Load errors, by the number of the unit they came before: reported in plan order."""

    def tasks() -> Iterator[Task]:
        for item in items:
            if item.error is not None:
                errors_before.setdefault(len(units), []).append(item.error)
                continue
            units.append(item)
            yield partial(_record_item, item, repeat=repeat, keep_built=not pooled)

    recording = Recording()
    if planned_runs > 1:
        # a failing pass is timed without TVM's one-time error setup (1-2 s, once per process);
        # a single run is spared it: there the setup would cost more than it corrects
        warm_error_path()
    order = None
    if pooled and jobs > 1:
        keys = [_run_key(item) for item in items if item.error is None]
        order = longest_first(keys, run_times or {})
    results = run_tasks(
        tasks(),
        writer,
        order=order,
        workers=max(jobs, 1) if pooled else None,
        timeout=timeout,
        stand_in=lambda index, writer: _stand_in(units[index], writer),
        on_task=None if progress is None else partial(_tell_progress, progress, units),
    )
    for index, result in enumerate(results):
        recording.errors += errors_before.pop(index, [])
        if result.error is not None:
            recording.errors.append(result.error)
        recording.runs += result.runs
        if after_run is not None:
            for run in result.runs:
                after_run(run, result.value)
    for index in sorted(errors_before):
        recording.errors += errors_before[index]
    return recording


def _run_key(item: WorkItem) -> RunKey:
    """What the item's run will be called in the trace: its kernel, spec and target."""
    assert item.unit is not None
    unit = item.unit
    return (unit.request.name or unit.kernel.name, unit.spec.text, unit.target.name)


def _tell_progress(progress: RecordProgress, units: Sequence[WorkItem], index: int, began: bool) -> None:
    unit = units[index].unit
    assert unit is not None
    label = f"{unit.request.name or unit.kernel.name} on {unit.target.name}"
    (progress.started if began else progress.ended)(index, label)


def _record_item(
    item: WorkItem, writer: TraceWriter, *, repeat: int, keep_built: bool
) -> PreparedLowering | None:
    """One planned item recorded into ``writer``; the built kernel, for ``after_run`` in this process."""
    assert item.unit is not None and item.call is not None
    _, prepared = record_unit(item.unit, item.call, writer, repeat=repeat)
    return prepared if keep_built else None


def _stand_in(item: WorkItem, writer: TraceWriter) -> KernelRun:
    """The run of an item whose worker was stopped while it built the kernel (before its run began)."""
    assert item.unit is not None and item.call is not None
    unit = item.unit
    name = unit.request.name or unit.kernel.name
    target_detail = str(unit.tvm_target)
    return begin_run_record(
        writer, unit.target.name, name, unit.spec.text, item.call.args_json(), target_detail, {}
    )


def record_unit(
    unit: LoweringUnit, call: KernelCall, writer: TraceWriter, *, repeat: int = 1
) -> tuple[KernelRun, PreparedLowering]:
    """Build and lower one unit into ``writer``; with ``repeat`` > 1, lower it that many times and
    keep the last lowering with each pass's (and the total's) smallest time over all of them.

    Repeated lowerings are made in memory and the kept one is copied once they are done.
    """
    prepared = build_unit(unit, call)
    if repeat <= 1:
        return _run_of(record_prepared(prepared, writer)), prepared
    lowered: list[KernelRun] = []
    scratch = TraceWriter()
    for attempt in range(repeat):
        if attempt:
            prepared = build_unit(unit, call)  # lowering changes its PrimFunc in place
        scratch = TraceWriter()  # memory only
        lowered.append(_run_of(record_prepared(prepared, scratch)))
    return writer.add_run(fastest_times(lowered[-1], lowered), scratch.trace().texts), prepared


def _run_of(result: RecordedLowering | KernelRun) -> KernelRun:
    return result.run if isinstance(result, RecordedLowering) else result


def fastest_times(kept: KernelRun, runs: Sequence[KernelRun]) -> KernelRun:
    """``kept`` with each pass's wall and self time, and the total, at their minimum over ``runs``.

    A pass takes the minimum over the runs that have a pass of the same name at its index (all
    of them, when lowering is deterministic).
    """
    passes = []
    for record in kept.passes:
        same = [
            other.passes[record.index]
            for other in runs
            if record.index < len(other.passes) and other.passes[record.index].name == record.name
        ]
        passes.append(_fastest(record, same))
    totals = [run.total_s for run in runs if run.total_s is not None]
    return struct_replace(kept, passes=tuple(passes), total_s=min(totals) if totals else kept.total_s)


def _fastest(record: PassRecord, same: Sequence[PassRecord]) -> PassRecord:
    if not same:
        return record
    return struct_replace(
        record,
        wall_s=min(other.wall_s for other in same),
        self_s=min(other.self_s for other in same),
    )


@dataclass
class AnalyzedKernel:
    """One kernel built and lowered (up to a pass) for one target."""

    built: BuiltKernel
    recorded: RecordedLowering | None
    """``None`` when the kernel was built but not lowered (``symbolic_tiles``)."""
    build_s: float
    """Seconds the factory or jit kernel took to give its PrimFunc."""


def symbolic_tiles(func: Any) -> list[str]:
    """The allocated buffers (tiles) of ``func`` whose shape holds a symbol. TileLang 0.1.15's
    layout inference crashes the process on a copy into such a tile (``Copy::InferBulkLayout``,
    a segmentation fault, measured on a ``[64, N]`` shared tile), so a kernel built with symbols
    for sizes nobody gave is not lowered when it has one: its declared facts are what is known."""
    from tvm import tirx
    from tvm.tirx.stmt_functor import post_order_visit

    found: list[str] = []

    def visit(node: Any) -> None:
        for buffer in getattr(node, "alloc_buffers", None) or ():
            if any(not isinstance(dim, tirx.IntImm) for dim in buffer.shape):
                found.append(str(buffer.name))

    post_order_visit(func.body, visit)
    return found


def analyze_kernel(
    loaded: LoadedModule,
    kernel: KernelDefinition,
    spec: KernelSpec,
    writer: TraceWriter,
    options: LoweringOptions,
    *,
    symbolic: bool = False,
) -> AnalyzedKernel:
    """Build ``kernel`` with ``spec``'s arguments for ``options.target`` and lower it as ``options``
    say (up to their ``stop_after``), recording into ``writer``.

    A kernel that cannot be built raises ``IrtraceError``; a lowering failure is in the result.
    ``options.pass_configs`` are defaults under the kernel's own. ``symbolic`` (the spec passes
    symbols for sizes nobody gave): a kernel with a tile of symbolic size is built and not
    lowered (``symbolic_tiles``).
    """
    tvm_target = options.tvm_target or make_tvm_target(options.target)
    began = time.perf_counter()
    with target_context(tvm_target):
        call = bind_call(kernel, spec, loaded.path)
    built = build_primfunc(kernel, spec, tvm_target, loaded.path, call)
    build_s = time.perf_counter() - began
    if symbolic and symbolic_tiles(built.func):
        return AnalyzedKernel(built, None, build_s)
    header = RunHeader(
        kernel.name, spec.text, call.args_json(), kernel_file_text=source_as_imported(loaded.path)
    )
    options = replace(
        options, tvm_target=tvm_target, pass_configs={**options.pass_configs, **built.pass_configs}
    )
    return AnalyzedKernel(built, record_lowering(built.func, writer, header, options), build_s)
