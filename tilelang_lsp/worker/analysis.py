"""Analyze one document with TileLang's real frontend and pipeline; runs inside the worker only.

Everything returned is a ``tilelang_lsp.protocol`` message (buffer facts, diagnostics, kernel
summaries), so the server never needs tilelang. A ``should_stop`` callback is polled after every
pass, which is how an edit cancels analysis of older text within one pass.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from msgspec.structs import replace

from irtrace.core.errors import IrtraceError, KernelSourceError
from irtrace.core.targets import DEFAULT_TARGET, TargetSpec, get_target
from irtrace.core.trace_writer import TraceWriter
from irtrace.recording.api import analyze_kernel
from irtrace.recording.facts import (
    CompilerDiagnostic,
    buffer_facts,
    capture_native_stderr,
    error_diagnostics,
    layout_stop_pass,
    native_log_diagnostics,
    reached,
)
from irtrace.recording.loader import find_kernels, load_kernel_module
from irtrace.recording.resolve.arguments import ProjectConfig, read_project_config, resolve_target
from irtrace.recording.resolve.candidates import Candidate, InstanceSources
from irtrace.recording.resolve.resolver import NEEDS_VALUES, instance_candidates, resolve_instance
from irtrace.recording.resolve.source import KernelSource, scan_kernels
from tilelang_lsp.protocol import FAILED, AnalysisResult, Diagnostic, IrText, KernelAnalysis
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
        from irtrace.recording.tvm_targets import make_tvm_target

        _TVM_TARGETS[target.name] = make_tvm_target(target)
    return _TVM_TARGETS[target.name]


def _never() -> bool:
    return False


def analyze(
    path: str,
    text: str,
    *,
    default_target: str = DEFAULT_TARGET,
    override_target: str | None = None,
    full: bool = False,
    race_check: bool = True,
    kernels_only: list[str] | None = None,
    should_stop: Callable[[], bool] = _never,
    on_kernel: Callable[[str, int], None] | None = None,
    trace_path: str | None = None,
    instances: InstanceSources | None = None,
    source_map: bool = False,
) -> AnalysisResult:
    """Load ``text`` as the file ``path``, build each kernel and lower it up to layout inference.

    ``full`` runs the whole pipeline instead (the kernel summary); ``override_target`` analyzes
    for that target rather than each kernel's own (side-by-side layouts in hover). ``instances``
    says where programs' real instances are found (recorded traces, the entry point) and which one
    the user picked per kernel. ``source_map`` stores source maps in the trace file (``trace_path``).
    """
    started = time.perf_counter()
    file = Path(path)
    if not uses_tilelang(text):
        # decided from the text before anything runs: a script's top level never executes here
        return AnalysisResult(skipped=NOT_TILELANG, elapsed_ms=(time.perf_counter() - started) * 1000)
    sources = {k.name: k for k in scan_kernels(text)}
    project = read_project_config(file)
    imported_before = set(sys.modules)
    kernels: list[KernelAnalysis] = []
    diagnostics: list[Diagnostic] = []
    try:
        dialect = _analyze_module(
            file,
            text,
            sources,
            project,
            kernels,
            diagnostics,
            default_target=default_target,
            override_target=override_target,
            full=full,
            race_check=race_check,
            kernels_only=kernels_only,
            should_stop=should_stop,
            on_kernel=on_kernel,
            trace_path=trace_path,
            instances=instances or InstanceSources(),
            source_map=source_map,
        )
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
    file: Path,
    text: str,
    sources: dict[str, KernelSource],
    project: ProjectConfig,
    kernels: list[KernelAnalysis],
    diagnostics: list[Diagnostic],
    *,
    default_target: str,
    override_target: str | None,
    full: bool,
    race_check: bool,
    kernels_only: list[str] | None,
    should_stop: Callable[[], bool],
    on_kernel: Callable[[str, int], None] | None,
    trace_path: str | None,
    instances: InstanceSources,
    source_map: bool = False,
) -> str | None:
    """Each kernel of the module analyzed into ``kernels``; the module's dialect, ``None`` when it
    did not load."""
    try:
        loaded = load_kernel_module(file, text=text)
    except KernelSourceError as error:
        code = "syntax" if isinstance(error.__cause__, SyntaxError) else "import"
        diag = error_diagnostics(error, file, code=code)
        diagnostics.append(diagnostic_message(diag, 1))
        return None
    # the program runs as on the machine the analysis is for: an extra target, else the project's
    run_target = override_target or resolve_target(None, loaded.dialect, default_target, project)[0]
    candidates = instance_candidates(file, text, list(sources.values()), instances, run_target)
    try:
        for kernel in find_kernels(loaded):
            source = sources.get(kernel.name)
            if kernel.kind.may_be_helper and source is None:
                continue  # a helper function, not a kernel factory
            if kernels_only is not None and kernel.name not in kernels_only:
                continue
            if should_stop():
                raise Cancelled("cancelled by a newer edit")
            line = source.line if source is not None else kernel.line
            if on_kernel is not None:
                on_kernel(kernel.name, line or 1)
            kernels.append(
                _analyze_kernel(
                    kernel,
                    source,
                    loaded,
                    project,
                    line,
                    default_target=default_target,
                    override_target=override_target,
                    full=full,
                    race_check=race_check,
                    should_stop=should_stop,
                    trace_path=trace_path,
                    diagnostics=diagnostics,
                    candidates=candidates.get(kernel.name, []),
                    pick=instances.picks.get(kernel.name),
                    source_map=source_map,
                )
            )
    finally:
        sys.modules.pop(loaded.module.__name__, None)
    return loaded.dialect


def _analyze_kernel(
    kernel: Any,
    source: KernelSource | None,
    loaded: Any,
    project: ProjectConfig,
    line: int | None,
    *,
    default_target: str,
    override_target: str | None,
    full: bool,
    race_check: bool,
    should_stop: Callable[[], bool],
    trace_path: str | None,
    diagnostics: list[Diagnostic],
    candidates: list[Candidate],
    pick: str | None,
    source_map: bool = False,
) -> KernelAnalysis:
    file = loaded.path
    target_name, target_origin = resolve_target(source, loaded.dialect, default_target, project)
    if override_target is not None:
        target_name, target_origin = override_target, "extra target"
    target = get_target(target_name)
    resolved = resolve_instance(
        kernel, source, file, project, candidates, pick=pick, tvm_target=tvm_target(target)
    )
    spec = resolved.spec
    summary = KernelAnalysis(
        name=kernel.name,
        kind=str(kernel.kind),
        line=line,
        target=target.name,
        target_origin=target_origin,
        call=resolved.call,
        args_origin=resolved.origin,
        args_from_project=resolved.from_project,
        args_symbolic=resolved.symbolic,
        args_unknown=resolved.unknown,
        args_autotune=resolved.autotune,
        args=resolved.shown,
        full=full,
        instances=resolved.instances,
    )
    if resolved.error is not None:
        diagnostics.append(
            diagnostic_message(
                CompilerDiagnostic(message=resolved.error, code="arguments", line=line, file=str(file)), line
            )
        )
        return replace(summary, status=FAILED, error=resolved.error)
    if source is not None and source.directive is not None and source.directive.error:
        diagnostics.append(
            diagnostic_message(
                CompilerDiagnostic(
                    message=source.directive.error,
                    code="directive",
                    line=source.directive.line,
                    file=str(file),
                ),
                line,
            )
        )
    stop = layout_stop_pass(target)
    writer = TraceWriter(trace_path)
    try:
        with capture_native_stderr() as log:
            try:
                analyzed = analyze_kernel(
                    loaded,
                    kernel,
                    spec,
                    target,
                    writer,
                    tvm_target=tvm_target(target),
                    stop_after=None if full else stop,
                    pass_configs={RACE_CHECK_CONFIG: False} if race_check else None,
                    should_stop=should_stop,
                    # hints need no IR text; a trace file (trace and IR commands) does
                    capture_ir=trace_path is not None,
                    symbolic=bool(resolved.symbolic),
                    source_map=source_map and trace_path is not None,
                )
            except IrtraceError as error:
                if resolved.symbolic:
                    # the kernel needs a number where the source gives none: say what would give it
                    message = (
                        f"{kernel.name}: no value for {', '.join(resolved.symbolic)} (as symbols it does "
                        f"not build: {error.message.splitlines()[0][:160]}); {NEEDS_VALUES}"
                    )
                    diagnostics.append(
                        diagnostic_message(
                            CompilerDiagnostic(
                                message=message,
                                severity="warning",
                                code="arguments",
                                line=line,
                                file=str(file),
                            ),
                            line,
                        )
                    )
                    return replace(
                        summary,
                        status=FAILED,
                        error=f"no value for {', '.join(resolved.symbolic)}",
                        needs_values=resolved.symbolic,
                    )
                diagnostics.append(diagnostic_message(error_diagnostics(error, file, code="frontend"), line))
                return replace(summary, status=FAILED, error=error.message)
    finally:
        writer.close()
    built, recorded = analyzed.built, analyzed.recorded
    symbols = source.symbols if source is not None else {}
    if recorded is None:  # a tile of symbolic size: TileLang's layout inference would crash on it
        summary = replace(summary, build_ms=analyzed.build_s * 1000, stop_pass=None if full else stop)
        facts = buffer_facts(built.func, None)
        return replace(summary, buffers=tuple(buffer_message(f, symbols) for f in facts))
    if recorded.cancelled:
        raise Cancelled("cancelled by a newer edit")
    passes = recorded.run.passes
    ok = recorded.error is None and (full or reached(passes, stop))
    summary = replace(
        summary,
        build_ms=analyzed.build_s * 1000,
        passes=len(passes),
        pass_names=tuple(p.name for p in passes),
        lowering_ms=(recorded.run.total_s or 0.0) * 1000,
        stop_pass=None if full else stop,
    )
    if not full:
        diagnostics.extend(diagnostic_message(d, line) for d in native_log_diagnostics(log.text, file))
    if not ok and recorded.error is not None:
        failed = next((p for p in passes if p.failed), None)
        code = "layout-inference" if failed is not None and "LayoutInference" in failed.name else "lowering"
        if failed is None:
            code = "semantic-check"
        summary = replace(
            summary,
            status=FAILED,
            error=str(recorded.error).strip().splitlines()[0] if str(recorded.error).strip() else code,
            failed_pass=failed.name if failed is not None else None,
        )
        diag = error_diagnostics(recorded.error, file, code=code)
        diagnostics.append(diagnostic_message(diag, line))
    stopped = recorded.stopped_module if ok else None
    if full:
        summary = replace(summary, shared_bytes=shared_memory_bytes(recorded.stopped_module) if ok else None)
        if ok and target.backend == "cuda" and recorded.kernel_source is not None:
            plan, problem = compile_input(recorded)
            summary = replace(summary, machine_code=plan, machine_code_error=problem)
        return summary
    facts = buffer_facts(built.func, stopped)
    return replace(
        summary,
        buffers=tuple(buffer_message(f, symbols) for f in facts),
        shared_bytes=sum(f.bytes or 0 for f in facts if f.role == "alloc" and f.scope.startswith("shared")),
    )


def ir_after_pass(
    path: str,
    text: str,
    kernel: str,
    pass_name: str,
    *,
    default_target: str,
    target: str | None = None,
    instances: InstanceSources | None = None,
) -> IrText:
    """The IR after ``pass_name`` (``name`` or ``name#2`` for a later occurrence) of a full lowering."""
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        trace_file = str(Path(folder) / "ir.jsonl")
        result = analyze(
            path,
            text,
            default_target=default_target,
            override_target=target,
            full=True,
            kernels_only=[kernel],
            trace_path=trace_file,
            instances=instances,
        )
        from irtrace.core.trace_reader import load_trace

        trace = load_trace(trace_file)
    if not trace.runs:
        reasons = "; ".join(d.message for d in result.diagnostics) or "no run was recorded"
        raise ValueError(f"kernel {kernel!r} could not be built: {reasons}")
    run = trace.runs[0]
    record = run.find_pass(pass_name)
    return IrText(
        kernel=kernel,
        target=run.target,
        pass_name=record.name,
        index=record.index,
        text=trace.ir_after(record) if record.ir_after else trace.ir_before(record),
    )
