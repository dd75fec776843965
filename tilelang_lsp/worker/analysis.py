"""Analyze one document with TileLang's real frontend and pipeline; runs inside the worker only.

Everything returned is a ``tilelang_lsp.protocol`` message (buffer facts, diagnostics, kernel
summaries), so the server never needs tilelang. A ``should_stop`` callback is polled after every
pass, which is how an edit cancels analysis of older text within one pass.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from msgspec.structs import replace

from irtrace.base.errors import IrtraceError, KernelSourceError
from irtrace.lowering.api import AnalyzedKernel, analyze_kernel
from irtrace.lowering.facts import (
    CompilerDiagnostic,
    buffer_facts,
    capture_native_stderr,
    error_diagnostics,
    layout_stop_pass,
    native_log_diagnostics,
    reached,
)
from irtrace.lowering.loader import KernelDefinition, LoadedModule, find_kernels, load_kernel_module
from irtrace.lowering.recorder import CaptureOptions, LoweringOptions, RecordedLowering
from irtrace.lowering.resolve.arguments import ProjectConfig, read_project_config, resolve_target
from irtrace.lowering.resolve.candidates import Candidate, InstanceSources
from irtrace.lowering.resolve.resolver import (
    NEEDS_VALUES,
    ResolvedInstance,
    instance_candidates,
    resolve_instance,
)
from irtrace.lowering.resolve.source import KernelSource, scan_kernels
from irtrace.targets.backends import TargetSpec, get_target
from irtrace.trace.model import PassRecord
from irtrace.trace.writer import TraceWriter
from tilelang_lsp.protocol import (
    FAILED,
    AnalysisResult,
    Analyze,
    Diagnostic,
    DocumentRequest,
    IrAfterPass,
    IrText,
    KernelAnalysis,
    LineMaps,
    Trace,
)
from tilelang_lsp.source.text import uses_tilelang
from tilelang_lsp.worker.facts import buffer_message, diagnostic_message, shared_memory_bytes
from tilelang_lsp.worker.machine_code import compile_input

RACE_CHECK_CONFIG = "tl.disable_data_race_check"
NOT_TILELANG = "the file does not import tilelang, so it is not executed"


class Cancelled(Exception):
    """A newer edit made this analysis pointless."""


_TVM_TARGETS: dict[str, Any] = {}


def tvm_target(target: TargetSpec) -> Any:
    """TileLang's target object for ``target``, made once per process."""
    if target.name not in _TVM_TARGETS:
        from irtrace.lowering.tvm_targets import make_tvm_target

        _TVM_TARGETS[target.name] = make_tvm_target(target)
    return _TVM_TARGETS[target.name]


def _never() -> bool:
    return False


@dataclass(frozen=True)
class AnalysisJob:
    """A worker request as the analysis runs it, derived once from the typed request (which it
    carries whole: the document, its targets, where instances are found) and passed to every step."""

    request: DocumentRequest
    full: bool = False
    """The whole pipeline (the kernel summary, a trace file), not only up to layout inference."""
    race_check: bool = True
    """Turn TileLang's data race check on (it is off by default)."""
    kernels_only: tuple[str, ...] | None = None
    trace_path: str | None = None
    """Write the lowering, IR texts included, into this trace file."""
    should_stop: Callable[[], bool] = _never
    """Asked before each kernel and after every pass: a newer edit cancels the analysis."""
    on_kernel: Callable[[str, int], None] | None = None
    """Told each kernel's name and line before it is built (the worker's ``Progress``)."""
    source_map: bool = False
    """Store source maps in the trace file (``LineMaps``: ``tilelang_lsp.worker.source_lines``)."""

    @classmethod
    def of(
        cls,
        request: DocumentRequest,
        *,
        should_stop: Callable[[], bool] = _never,
        on_kernel: Callable[[str, int], None] | None = None,
        trace_path: str | None = None,
    ) -> AnalysisJob:
        """The job a request asks for: ``Analyze`` as it says; ``Trace`` and ``IrAfterPass``, one
        kernel's whole lowering into a trace file (``trace_path`` for ``IrAfterPass``)."""
        if isinstance(request, Analyze):
            return cls(request, request.full, request.race_check, None, trace_path, should_stop, on_kernel)
        if isinstance(request, Trace):
            trace_path = request.output
        if isinstance(request, LineMaps):  # the pipeline as `irtrace record` runs it: no race check
            return cls(request, True, False, (request.kernel,), trace_path, should_stop, on_kernel, True)
        if isinstance(request, (Trace, IrAfterPass)):
            return cls(request, True, True, (request.kernel,), trace_path, should_stop, on_kernel)
        raise ValueError(f"unknown worker request {type(request).__name__}")

    @property
    def instances(self) -> InstanceSources:
        return InstanceSources(traces=self.request.instance_traces, picks=dict(self.request.instance_picks))

    def lowering_options(self, target: TargetSpec, stop: str) -> LoweringOptions:
        """How a kernel of this job is lowered for ``target``: up to ``stop`` unless ``full``, with
        the data race check asked for, IR texts only for a trace file (hints need none)."""
        return LoweringOptions(
            target,
            tvm_target(target),
            {RACE_CHECK_CONFIG: False} if self.race_check else {},
            stop_after=() if self.full else (stop,),
            should_stop=self.should_stop,
            capture=CaptureOptions(
                ir=self.trace_path is not None, source_map=self.source_map and self.trace_path is not None
            ),
        )


@dataclass(frozen=True)
class Document:
    """The document's text as read once per analysis: its kernels as the source shows them and
    its project's ``[tool.tilelang-lsp]``."""

    file: Path
    text: str
    sources: dict[str, KernelSource]
    project: ProjectConfig


def analyze(job: AnalysisJob | DocumentRequest) -> AnalysisResult:
    """Load the request's text as its file, build each kernel and lower it up to layout inference
    (the whole pipeline for ``full``); for the request's ``target``, rather than each kernel's own
    (side-by-side layouts in hover); with the instances its traces and picks give."""
    job = job if isinstance(job, AnalysisJob) else AnalysisJob.of(job)
    started = time.perf_counter()
    request = job.request
    if not uses_tilelang(request.text):
        # decided from the text before anything runs: a script's top level never executes here
        return AnalysisResult(skipped=NOT_TILELANG, elapsed_ms=(time.perf_counter() - started) * 1000)
    file = Path(request.path)
    document = Document(
        file, request.text, {k.name: k for k in scan_kernels(request.text)}, read_project_config(file)
    )
    imported_before = set(sys.modules)
    kernels: list[KernelAnalysis] = []
    diagnostics: list[Diagnostic] = []
    try:
        dialect = _analyze_module(job, document, kernels, diagnostics)
    finally:
        forget_user_modules(imported_before)
    return AnalysisResult(
        kernels=tuple(kernels),
        diagnostics=tuple(diagnostics),
        dialect=dialect,
        elapsed_ms=(time.perf_counter() - started) * 1000,
    )


def _installed_folders() -> tuple[Path, ...]:
    """Folders of installed code: the environment, and irtrace and tilelang_lsp themselves."""
    import irtrace

    folders = {Path(folder).resolve() for folder in (sys.prefix, sys.base_prefix, sys.exec_prefix)}
    folders |= {Path(__file__).resolve().parent, Path(irtrace.__file__).resolve().parent}
    return tuple(folders)


_INSTALLED = _installed_folders()


def forget_user_modules(imported_before: set[str]) -> None:
    """Drop the modules this analysis imported from the user's folders (the document's package,
    its helper modules), so the next analysis sees them as they are on disk then. Installed
    modules (tilelang's lazily imported parts) stay: importing those twice would break them."""
    for name in set(sys.modules) - imported_before:
        module = sys.modules.get(name)
        where = getattr(module, "__file__", None)
        if where is None:
            spec = getattr(module, "__spec__", None)
            locations = list(getattr(spec, "submodule_search_locations", None) or [])
            where = locations[0] if locations else None
        if where is not None and not any(Path(where).resolve().is_relative_to(f) for f in _INSTALLED):
            sys.modules.pop(name, None)


def _analyze_module(
    job: AnalysisJob, document: Document, kernels: list[KernelAnalysis], diagnostics: list[Diagnostic]
) -> str | None:
    """Each kernel of the module analyzed into ``kernels``; the module's dialect, ``None`` when it
    did not load."""
    file, request = document.file, job.request
    try:
        loaded = load_kernel_module(file, text=document.text)
    except KernelSourceError as error:
        code = "syntax" if isinstance(error.__cause__, SyntaxError) else "import"
        diagnostics.append(diagnostic_message(error_diagnostics(error, file, code=code), 1))
        return None
    # the program runs as on the machine the analysis is for: an extra target, else the project's
    run_target = (
        request.target or resolve_target(None, loaded.dialect, request.default_target, document.project)[0]
    )
    instances = job.instances
    candidates = instance_candidates(
        file, document.text, list(document.sources.values()), instances, run_target
    )
    try:
        for kernel in find_kernels(loaded):
            source = document.sources.get(kernel.name)
            if kernel.kind.may_be_helper and source is None:
                continue  # a helper function, not a kernel factory
            if job.kernels_only is not None and kernel.name not in job.kernels_only:
                continue
            if job.should_stop():
                raise Cancelled("cancelled by a newer edit")
            line = source.line if source is not None else kernel.line
            if job.on_kernel is not None:
                job.on_kernel(kernel.name, line or 1)
            found = KernelInDocument(kernel, source, loaded, document, line)
            choices = candidates.get(kernel.name, [])
            kernels.append(
                _analyze_kernel(job, found, choices, instances.picks.get(kernel.name), diagnostics)
            )
    finally:
        sys.modules.pop(loaded.module.__name__, None)
    return loaded.dialect


@dataclass(frozen=True)
class KernelInDocument:
    """One kernel of the loaded document, with what its source says of it."""

    kernel: KernelDefinition
    source: KernelSource | None
    """``None`` for a module-level PrimFunc (no function around it to read)."""
    loaded: LoadedModule
    document: Document
    line: int | None

    @property
    def file(self) -> Path:
        return self.loaded.path

    def diagnostic(
        self, message: str, code: str, *, severity: str = "error", line: int | None = None
    ) -> Diagnostic:
        where = self.line if line is None else line
        found = CompilerDiagnostic(
            message=message, severity=severity, code=code, line=where, file=str(self.file)
        )
        return diagnostic_message(found, self.line)


def _analyze_kernel(
    job: AnalysisJob,
    found: KernelInDocument,
    candidates: list[Candidate],
    pick: str | None,
    diagnostics: list[Diagnostic],
) -> KernelAnalysis:
    """One kernel: its target and instance, then its build and lowering, into its summary (a
    ``Cancelled`` when the job's ``should_stop`` ended the lowering)."""
    target, target_origin = _kernel_target(job, found)
    resolved = resolve_instance(
        found.kernel,
        found.source,
        found.file,
        found.document.project,
        candidates,
        pick=pick,
        tvm_target=tvm_target(target),
    )
    summary = _instance_summary(job, found, target, target_origin, resolved)
    if resolved.error is not None:
        diagnostics.append(found.diagnostic(resolved.error, "arguments"))
        return replace(summary, status=FAILED, error=resolved.error)
    directive = found.source.directive if found.source is not None else None
    if directive is not None and directive.error:
        diagnostics.append(found.diagnostic(directive.error, "directive", line=directive.line))
    stop = layout_stop_pass(target)
    outcome = _build_and_lower(job, found, resolved, job.lowering_options(target, stop), diagnostics)
    if isinstance(outcome, NotBuilt):
        return replace(summary, status=FAILED, error=outcome.error, needs_values=outcome.needs_values)
    analyzed, log_text = outcome
    summary = replace(summary, build_ms=analyzed.build_s * 1000, stop_pass=None if job.full else stop)
    return _lowered_summary(job, found, summary, target, analyzed, log_text, diagnostics)


def _lowered_summary(
    job: AnalysisJob,
    found: KernelInDocument,
    summary: KernelAnalysis,
    target: TargetSpec,
    analyzed: AnalyzedKernel,
    log_text: str,
    diagnostics: list[Diagnostic],
) -> KernelAnalysis:
    """A built kernel's summary from its lowering: the passes, what went wrong, and the buffers
    (hints) or the whole pipeline's facts (the code lens)."""
    stop = layout_stop_pass(target)
    symbols = found.source.symbols if found.source is not None else {}
    recorded = analyzed.recorded
    if recorded is None:  # a tile of symbolic size: TileLang's layout inference would crash on it
        facts = buffer_facts(analyzed.built.func, None)
        return replace(summary, buffers=tuple(buffer_message(f, symbols) for f in facts))
    if recorded.cancelled:
        raise Cancelled("cancelled by a newer edit")
    passes = recorded.run.passes
    summary = replace(
        summary,
        passes=len(passes),
        pass_names=tuple(p.name for p in passes),
        lowering_ms=(recorded.run.total_s or 0.0) * 1000,
    )
    if not job.full:
        diagnostics.extend(
            diagnostic_message(d, found.line) for d in native_log_diagnostics(log_text, found.file)
        )
    ok = recorded.error is None and (job.full or reached(passes, stop))
    if not ok and recorded.error is not None:
        summary = _lowering_failure(summary, found, recorded.error, recorded.run.passes, diagnostics)
    if job.full:
        return _pipeline_summary(summary, target, recorded, ok)
    facts = buffer_facts(analyzed.built.func, recorded.stopped_module if ok else None)
    return replace(
        summary,
        buffers=tuple(buffer_message(f, symbols) for f in facts),
        shared_bytes=sum(f.bytes or 0 for f in facts if f.role == "alloc" and f.scope.startswith("shared")),
    )


def _kernel_target(job: AnalysisJob, found: KernelInDocument) -> tuple[TargetSpec, str]:
    """The target a kernel is analyzed for, and where it came from: the request's extra target,
    else the kernel's own (directive, decorator, compile call, project, default)."""
    request = job.request
    if request.target is not None:
        return get_target(request.target), "extra target"
    name, origin = resolve_target(
        found.source, found.loaded.dialect, request.default_target, found.document.project
    )
    return get_target(name), origin


def _instance_summary(
    job: AnalysisJob,
    found: KernelInDocument,
    target: TargetSpec,
    target_origin: str,
    resolved: ResolvedInstance,
) -> KernelAnalysis:
    """The kernel's summary before it is built: which call, for which target, and why."""
    return KernelAnalysis(
        name=found.kernel.name,
        kind=str(found.kernel.kind),
        line=found.line,
        target=target.name,
        target_origin=target_origin,
        call=resolved.call,
        args_origin=resolved.origin,
        args_from_project=resolved.from_project,
        args_symbolic=resolved.symbolic,
        args_unknown=resolved.unknown,
        args_autotune=resolved.autotune,
        args=resolved.shown,
        full=job.full,
        instances=resolved.instances,
    )


@dataclass(frozen=True)
class NotBuilt:
    """Why a kernel did not build (its diagnostic is already said)."""

    error: str
    needs_values: tuple[str, ...] = ()
    """Sizes nobody gave, when it did not build with symbols for them."""


def _build_and_lower(
    job: AnalysisJob,
    found: KernelInDocument,
    resolved: ResolvedInstance,
    options: LoweringOptions,
    diagnostics: list[Diagnostic],
) -> tuple[AnalyzedKernel, str] | NotBuilt:
    """The kernel built and lowered as ``options`` say, with what TileLang logged meanwhile; or,
    when it does not build, why (its diagnostic said)."""
    writer = TraceWriter(job.trace_path)
    try:
        with capture_native_stderr() as log:
            try:
                analyzed = analyze_kernel(
                    found.loaded,
                    found.kernel,
                    resolved.spec,
                    writer,
                    options,
                    symbolic=bool(resolved.symbolic),
                )
            except IrtraceError as error:
                return _build_failure(found, resolved, error, diagnostics)
    finally:
        writer.close()
    return analyzed, log.text


def _build_failure(
    found: KernelInDocument, resolved: ResolvedInstance, error: IrtraceError, diagnostics: list[Diagnostic]
) -> NotBuilt:
    """A kernel that did not build: with symbols for sizes nobody gave, what would give them (a
    warning); else the frontend's error."""
    name = found.kernel.name
    if resolved.symbolic:
        symbols = ", ".join(resolved.symbolic)
        message = (
            f"{name}: no value for {symbols} (as symbols it does not build: "
            f"{error.message.splitlines()[0][:160]}); {NEEDS_VALUES}"
        )
        diagnostics.append(found.diagnostic(message, "arguments", severity="warning"))
        return NotBuilt(f"no value for {symbols}", needs_values=resolved.symbolic)
    diagnostics.append(diagnostic_message(error_diagnostics(error, found.file, code="frontend"), found.line))
    return NotBuilt(error.message)


def _lowering_failure(
    summary: KernelAnalysis,
    found: KernelInDocument,
    error: BaseException,
    passes: Sequence[PassRecord],
    diagnostics: list[Diagnostic],
) -> KernelAnalysis:
    """The summary of a lowering that failed, and its diagnostic: in which pass, with which code."""
    failed = next((p for p in passes if p.failed), None)
    code = "layout-inference" if failed is not None and "LayoutInference" in failed.name else "lowering"
    if failed is None:
        code = "semantic-check"
    diagnostics.append(diagnostic_message(error_diagnostics(error, found.file, code=code), found.line))
    text = str(error).strip()
    return replace(
        summary,
        status=FAILED,
        error=text.splitlines()[0] if text else code,
        failed_pass=failed.name if failed is not None else None,
    )


def _pipeline_summary(
    summary: KernelAnalysis, target: TargetSpec, recorded: RecordedLowering, ok: bool
) -> KernelAnalysis:
    """A whole lowering's summary (the code lens): shared memory, and for CUDA the nvcc plan."""
    summary = replace(summary, shared_bytes=shared_memory_bytes(recorded.stopped_module) if ok else None)
    if ok and target.backend == "cuda" and recorded.kernel_source is not None:
        plan, problem = compile_input(recorded)
        summary = replace(summary, machine_code=plan, machine_code_error=problem)
    return summary


def ir_after_pass(request: IrAfterPass) -> IrText:
    """The IR after ``pass_name`` (``name`` or ``name#2`` for a later occurrence) of a full lowering."""
    import tempfile

    from irtrace.trace.reader import load_trace

    with tempfile.TemporaryDirectory() as folder:
        trace_file = str(Path(folder) / "ir.jsonl")
        result = analyze(AnalysisJob.of(request, trace_path=trace_file))
        trace = load_trace(trace_file)
    kernel = request.kernel
    if not trace.runs:
        reasons = "; ".join(d.message for d in result.diagnostics) or "no run was recorded"
        raise ValueError(f"kernel {kernel!r} could not be built: {reasons}")
    run = trace.runs[0]
    record = run.find_pass(request.pass_name)
    return IrText(
        kernel=kernel,
        target=run.target,
        pass_name=record.name,
        index=record.index,
        text=trace.ir_after(record) if record.ir_after else trace.ir_before(record),
    )
