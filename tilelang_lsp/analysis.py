"""Analyze one document with TileLang's real frontend and pipeline; runs inside the worker only.

Everything returned is plain JSON data (buffer facts, diagnostics, kernel summaries), so the
server never needs tilelang. A ``should_stop`` callback is polled after every pass, which is how
an edit cancels analysis of older text within one pass.
"""

from __future__ import annotations

import re
import sys
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from irtrace.core.errors import IrtraceError, KernelSourceError
from irtrace.core.specs import KernelSpec, format_value
from irtrace.core.targets import TargetSpec, get_target
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
    shared_memory_bytes,
)
from irtrace.recording.loader import (
    AUTOTUNE,
    FACTORY,
    PRIMFUNC,
    bind_call,
    describe_value,
    find_kernels,
    load_kernel_module,
    target_context,
)
from tilelang_lsp.source import (
    CallSite,
    KernelSource,
    ProjectConfig,
    read_project_config,
    resolve_arguments,
    resolve_target,
    scan_kernels,
    uses_tilelang,
)

RACE_CHECK_CONFIG = "tl.disable_data_race_check"
NOT_TILELANG = "the file does not import tilelang, so it is not executed"


class Cancelled(Exception):
    """A newer edit made this analysis pointless."""


_TVM_TARGETS: dict[str, Any] = {}


def tvm_target(target: TargetSpec) -> Any:
    """TileLang's target object for ``target``, made once per process."""
    if target.name not in _TVM_TARGETS:
        from irtrace.core.targets import make_tvm_target

        _TVM_TARGETS[target.name] = make_tvm_target(target)
    return _TVM_TARGETS[target.name]


def _diagnostic(diag: CompilerDiagnostic, fallback_line: int | None) -> dict[str, Any]:
    data = asdict(diag)
    if data["line"] is None:
        data["line"] = fallback_line
        data["located"] = False
    else:
        data["located"] = True
    return data


def _never() -> bool:
    return False


def analyze(
    path: str,
    text: str,
    *,
    default_target: str = "cuda:sm_90",
    override_target: str | None = None,
    full: bool = False,
    race_check: bool = True,
    kernels_only: list[str] | None = None,
    should_stop: Callable[[], bool] = _never,
    on_kernel: Callable[[str, int], None] | None = None,
    trace_path: str | None = None,
) -> dict[str, Any]:
    """Load ``text`` as the file ``path``, build each kernel and lower it up to layout inference.

    ``full`` runs the whole pipeline instead (the kernel summary); ``override_target`` analyzes
    for that target rather than each kernel's own (side-by-side layouts in hover).
    """
    started = time.perf_counter()
    file = Path(path)
    result: dict[str, Any] = {"kernels": [], "diagnostics": [], "dialect": None}
    if not uses_tilelang(text):
        # decided from the text before anything runs: a script's top level never executes here
        result["skipped"] = NOT_TILELANG
        result["elapsed_ms"] = (time.perf_counter() - started) * 1000
        return result
    sources = {k.name: k for k in scan_kernels(text)}
    project = read_project_config(file)
    imported_before = set(sys.modules)
    try:
        _analyze_module(
            file,
            text,
            sources,
            project,
            result,
            default_target=default_target,
            override_target=override_target,
            full=full,
            race_check=race_check,
            kernels_only=kernels_only,
            should_stop=should_stop,
            on_kernel=on_kernel,
            trace_path=trace_path,
        )
    finally:
        forget_user_modules(imported_before)
    result["elapsed_ms"] = (time.perf_counter() - started) * 1000
    return result


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
    result: dict[str, Any],
    *,
    default_target: str,
    override_target: str | None,
    full: bool,
    race_check: bool,
    kernels_only: list[str] | None,
    should_stop: Callable[[], bool],
    on_kernel: Callable[[str, int], None] | None,
    trace_path: str | None,
) -> None:
    try:
        loaded = load_kernel_module(file, text=text)
    except KernelSourceError as error:
        code = "syntax" if isinstance(error.__cause__, SyntaxError) else "import"
        diag = error_diagnostics(error, file, code=code)
        result["diagnostics"].append(_diagnostic(diag, 1))
        return
    try:
        result["dialect"] = loaded.dialect
        for kernel in find_kernels(loaded):
            source = sources.get(kernel.name)
            if kernel.kind == FACTORY and source is None:
                continue  # a helper function, not a kernel factory
            if kernels_only is not None and kernel.name not in kernels_only:
                continue
            if should_stop():
                raise Cancelled("cancelled by a newer edit")
            line = source.line if source is not None else kernel.line
            if on_kernel is not None:
                on_kernel(kernel.name, line or 1)
            result["kernels"].append(
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
                    diagnostics=result["diagnostics"],
                )
            )
    finally:
        sys.modules.pop(loaded.module.__name__, None)


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
    diagnostics: list[dict[str, Any]],
) -> dict[str, Any]:
    file = loaded.path
    choice = (
        resolve_arguments(source, project, manifest_call(file, kernel.name)) if source is not None else None
    )
    target_name, target_origin = resolve_target(source, loaded.dialect, default_target, project)
    if override_target is not None:
        target_name, target_origin = override_target, "extra target"
    target = get_target(target_name)
    args = choice.args if choice else ()
    kwargs = dict(choice.kwargs) if choice else {}
    symbolic = list(choice.symbolic) if choice else []
    if symbolic:
        from tvm import tirx

        # A T.const nobody gave a value: TileLang substitutes whatever is passed, so a variable
        # of the same name keeps the size symbolic, as T.dynamic would.
        kwargs.update({name: tirx.Var(name, "int32") for name in symbolic})
    spec = KernelSpec(str(file), kernel.name, args, kwargs, called=kernel.kind != PRIMFUNC)
    shown = {k: v for k, v in kwargs.items() if k not in symbolic}
    call_text = ", ".join(
        [*(format_value(a) for a in args), *(f"{k}={format_value(v)}" for k, v in shown.items())]
    )
    summary: dict[str, Any] = {
        "name": kernel.name,
        "kind": kernel.kind,
        "line": line,
        "target": target.name,
        "target_origin": target_origin,
        "call": f"{kernel.name}({call_text})" if spec.called else kernel.name,
        "args_origin": choice.origin if choice else "module-level PrimFunc",
        "args_from_project": list(choice.from_project) if choice else [],
        "args_missing": list(choice.missing) if choice else [],
        "args_symbolic": symbolic,
        "args_autotune": {},
        "args": {k: format_value(v) for k, v in shown.items()},
        "status": "ok",
        "error": None,
        "buffers": [],
        "full": full,
    }
    missing = list(choice.missing) if choice else []
    if kernel.kind == AUTOTUNE:
        # What TileLang would tune over, the first config stands in for: the parameters the
        # arguments found leave out come from it (irtrace.recording.loader.bind_call).
        try:
            with target_context(tvm_target(target)):
                call = bind_call(kernel, spec, file)
        except IrtraceError as error:
            if not missing:  # else a configs function wanting the missing ones raised: say what is missing
                summary["status"] = "failed"
                summary["error"] = error.message
                diagnostics.append(_diagnostic(error_diagnostics(error, file, code="arguments"), line))
                return summary
        else:
            summary["args_autotune"] = {k: describe_value(v) for k, v in call.autotune_defaults.items()}
            missing = [name for name in missing if name not in call.autotune_defaults]
            summary["args_missing"] = missing
    if missing:
        summary["status"] = "failed"
        summary["error"] = f"no value for {', '.join(missing)}"
        diagnostics.append(
            _diagnostic(
                CompilerDiagnostic(
                    message=(
                        f"{kernel.name}: no value for parameter(s) {', '.join(missing)}; add a "
                        "`# tilelang: args(...)` directive above it, a call in this file, a default, "
                        "or [tool.tilelang-lsp.args] in pyproject.toml"
                    ),
                    severity="warning",
                    code="arguments",
                    line=line,
                    file=str(file),
                ),
                line,
            )
        )
        return summary
    if source is not None and source.directive is not None and source.directive.error:
        diagnostics.append(
            _diagnostic(
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
                )
            except IrtraceError as error:
                summary["status"] = "failed"
                summary["error"] = error.message
                diagnostics.append(_diagnostic(error_diagnostics(error, file, code="frontend"), line))
                return summary
    finally:
        writer.close()
    built, recorded = analyzed.built, analyzed.recorded
    summary["build_ms"] = analyzed.build_s * 1000
    if recorded.cancelled:
        raise Cancelled("cancelled by a newer edit")
    passes = recorded.run.passes
    ok = recorded.error is None and (full or reached(passes, stop))
    summary["passes"] = len(passes)
    summary["pass_names"] = [p.name for p in passes]
    summary["lowering_ms"] = (recorded.run.total_s or 0.0) * 1000
    summary["stop_pass"] = None if full else stop
    if not full:
        diagnostics.extend(_diagnostic(d, line) for d in native_log_diagnostics(log.text, file))
    if not ok and recorded.error is not None:
        failed = next((p for p in passes if p.failed), None)
        code = "layout-inference" if failed is not None and "LayoutInference" in failed.name else "lowering"
        if failed is None:
            code = "semantic-check"
        summary["status"] = "failed"
        summary["error"] = (
            str(recorded.error).strip().splitlines()[0] if str(recorded.error).strip() else code
        )
        summary["failed_pass"] = failed.name if failed is not None else None
        diag = error_diagnostics(recorded.error, file, code=code)
        diagnostics.append(_diagnostic(diag, line))
    stopped = recorded.stopped_module if ok else None
    if full:
        summary["shared_bytes"] = shared_memory_bytes(recorded.stopped_module) if ok else None
        if ok and target.backend == "cuda" and recorded.kernel_source is not None:
            summary["machine_code"] = machine_code_request(recorded)
    else:
        facts = buffer_facts(built.func, stopped)
        symbols = source.symbols if source is not None else {}
        summary["buffers"] = [_named_in_source(asdict(f), symbols) for f in facts]
        summary["shared_bytes"] = sum(
            f.bytes or 0 for f in facts if f.role == "alloc" and f.scope.startswith("shared")
        )
    return summary


def machine_code_request(recorded: Any) -> dict[str, Any]:
    """What the server needs to compile a kernel's source for the code lens (nvcc runs there, in a
    thread, so this worker is free for the next edit): TileLang's nvcc plan, the source and the
    dynamic shared memory of each kernel function. ``error`` says why not (no nvcc)."""
    from irtrace.recording.machine_code import MachineCodeError, dynamic_smem_from_module, plan_compile

    try:
        plan = plan_compile(recorded.run.target_detail, recorded.run.pass_configs)
    except MachineCodeError as error:
        return {"error": error.message}
    return {
        "plan": plan.to_json(),
        "source": recorded.kernel_source,
        "dynamic_smem": dynamic_smem_from_module(recorded.stopped_module),
    }


MANIFEST = "irtrace.toml"


def manifest_call(file: Path, kernel: str) -> CallSite | None:
    """The kernel's spec in the nearest ``irtrace.toml`` above ``file`` (the arguments the project
    records it with; expressions allowed), or ``None``. A manifest that does not parse is ignored."""
    from irtrace.core.errors import IrtraceError as ManifestError
    from irtrace.recording.manifest import load_manifest

    folder = file.resolve().parent
    for candidate in [folder, *folder.parents]:
        path = candidate / MANIFEST
        if not path.is_file():
            continue
        try:
            requests = load_manifest(path)
        except ManifestError:
            return None
        for request in requests:
            spec = request.spec
            location = (request.base_dir or candidate) / spec.path
            if spec.name == kernel and spec.called and location.resolve() == file.resolve():
                return CallSite(0, spec.args, dict(spec.kwargs), origin=f"the spec in {path}")
        return None
    return None


def _named_in_source(fact: dict[str, Any], symbols: dict[str, str]) -> dict[str, Any]:
    """Symbolic dims under the names the source gives them (``M = T.dynamic("tokens")``: ``M``)."""
    renamed = {ir: py for ir, py in symbols.items() if ir != py}
    if not renamed:
        return fact
    pattern = re.compile(r"\b(" + "|".join(re.escape(name) for name in renamed) + r")\b")

    def rename(dims: list[Any]) -> list[Any]:
        return [pattern.sub(lambda m: renamed[m[0]], d) if isinstance(d, str) else d for d in dims]

    return {**fact, "shape": rename(fact["shape"]), "allocated_shape": rename(fact["allocated_shape"])}


def ir_after_pass(
    path: str, text: str, kernel: str, pass_name: str, *, default_target: str, target: str | None = None
) -> dict[str, Any]:
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
        )
        from irtrace.core.trace_reader import load_trace

        trace = load_trace(trace_file)
    if not trace.runs:
        raise KeyError(f"kernel {kernel!r} could not be built: {result['diagnostics']}")
    run = trace.runs[0]
    record = run.find_pass(pass_name)
    return {
        "kernel": kernel,
        "target": run.target,
        "pass": record.name,
        "index": record.index,
        "text": trace.ir_after(record) if record.ir_after else trace.ir_before(record),
    }
