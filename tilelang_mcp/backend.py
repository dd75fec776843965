"""Everything tilelang-mcp takes from irtrace and passdiff, in one module.

Two halves. The *jobs* (``run_job``) run in the worker and lower user kernels, each wholly in a
forked child (``irtrace.lowering.executor``, a pool of one) with a time and a memory limit: the worker
itself never imports or runs a kernel file. The *readers* work on trace files the jobs wrote and
need no tilelang, so the server calls them directly. Importing this module imports no tilelang.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any

import msgspec

from irtrace.base.errors import ExitCode, IrtraceError, KernelSourceError
from irtrace.ci.check import check_traces
from irtrace.ci.check_report import render_text, report_document
from irtrace.ci.coverage import (
    coverage_matrix,
    error_headline,
    failing_pass,
    matrix_document,
    matrix_markdown,
)
from irtrace.ci.policy import Policy, load_policy
from irtrace.diff import (
    NormalizeRules,
    RunComparison,
    TextDiff,
    compare_runs,
    count_line_changes,
    diff_span,
    label_in_run,
)
from irtrace.lowering.api import RecordRequest, analyze_kernel, lowering_units, record_kernels
from irtrace.lowering.executor import run_tasks
from irtrace.lowering.facts import (
    CompilerDiagnostic,
    buffer_facts,
    capture_native_stderr,
    error_diagnostics,
    layout_stop_pass,
    native_log_diagnostics,
    reached,
)
from irtrace.lowering.loader import is_module_name
from irtrace.lowering.recorder import CaptureOptions, LoweringOptions
from irtrace.lowering.resolve.candidates import InstanceSources
from irtrace.lowering.resolve.resolver import NEEDS_VALUES
from irtrace.lowering.resolve.resolver import describe as describe_instance
from irtrace.targets.backends import TARGETS, aliases_of, get_target
from irtrace.targets.specs import KernelSpec, parse_spec
from irtrace.trace.model import STATUS_OK, KernelRun, PassRecord, Trace, occurrence_labels
from irtrace.trace.reader import load_trace
from irtrace.trace.summary import NEW_STAGE, line_changes
from irtrace.trace.writer import TraceWriter
from tilelang_mcp.protocol import (
    Diagnostics,
    Facts,
    Job,
    JobRequest,
    Record,
    Recorded,
    RunInstance,
)

__all__ = [  # what the server uses, irtrace's types included
    "SOURCE",
    "CompilerDiagnostic",
    "IrtraceError",
    "JobError",
    "JobLimits",
    "KernelRun",
    "KernelSpec",
    "RunComparison",
    "TextDiff",
    "Trace",
    "canonical_targets",
    "check_report",
    "compare_lowerings",
    "coverage_document",
    "describe_job_error",
    "dump",
    "failure_input",
    "find_ir",
    "instance_document",
    "load_trace",
    "parse_kernel_spec",
    "pass_rows",
    "pass_span_diff",
    "resource_lines",
    "run_job",
    "run_summary",
    "source_line_document",
    "spec_file",
    "target_table",
    "with_path",
]

RACE_CHECK_CONFIG = "tl.disable_data_race_check"
"""Diagnostics force TileLang's data race check on, as the language server does."""
NO_IR = CaptureOptions(ir=False)
"""Facts and diagnostics read the module and the log, never IR texts."""


class JobError(Exception):
    """A job could not give a result: the message says why, for the agent."""


@dataclass(frozen=True)
class JobLimits:
    """What one job may use: wall-clock seconds and memory above what the worker already holds."""

    timeout_s: float
    memory_mb: int


# ----------------------------------------------------------------------------- specs and targets


MAX_SPEC_CHARS = 16_384
"""Longest spec an agent may give: a file and literal arguments fit many times over, and parsing a
longer one would cost the server memory and time before any limit reaches it."""


def parse_kernel_spec(text: str) -> KernelSpec:
    """``path.py[::name[(args)]]`` parsed without importing anything; a module name is refused,
    since only files under the allowed roots may run. An agent's arguments are literals only
    (numbers, strings, booleans, None, tuples, lists, dicts, dtype names such as ``T.float16``),
    as a trace's are: an expression is refused, never evaluated (prompt injection reaches them)."""
    if len(text) > MAX_SPEC_CHARS:
        raise JobError(f"the spec is {len(text)} characters long; at most {MAX_SPEC_CHARS} are read")
    spec = parse_spec(text, expressions=False)
    if is_module_name(spec.path):
        raise JobError(
            f"{spec.path!r} is a module name; tilelang-mcp takes kernel files only (path.py::name(args))"
        )
    return spec


def spec_file(text: str) -> str:
    """The file an agent's spec names, split off without parsing the rest: the server checks the
    file against the roots, and the name and arguments are parsed (``parse_kernel_spec``) in the
    job's child, under its limits. A module name is refused here too."""
    if len(text) > MAX_SPEC_CHARS:
        raise JobError(f"the spec is {len(text)} characters long; at most {MAX_SPEC_CHARS} are read")
    path = text.partition("::")[0].strip()
    if not path:
        raise JobError(
            f"the spec {text[:200]!r} has no file; write path.py, path.py::name or path.py::name(args)"
        )
    if is_module_name(path):
        raise JobError(
            f"{path!r} is a module name; tilelang-mcp takes kernel files only (path.py::name(args))"
        )
    return path


def with_path(text: str, path: Path) -> str:
    """The spec ``text`` with its file replaced by ``path`` (an absolute, checked path); the rest
    of it stays text, for the job's child to parse."""
    _, sep, rest = text.partition("::")
    return f"{path}{sep}{rest}"


def canonical_targets(names: Sequence[str]) -> list[str]:
    """Target names as irtrace spells them (``cuda`` is ``DEFAULT_TARGET``); ``all`` kept."""
    return [name if name == "all" else get_target(name).name for name in names]


def target_table() -> list[dict[str, Any]]:
    """Every target with its vendor, family, chips and aliases."""
    return [
        {
            "name": spec.name,
            "vendor": spec.vendor,
            "family": spec.family,
            "hardware": spec.hardware,
            "dialect": spec.dialect,
            "aliases": aliases_of(spec.name),
        }
        for spec in TARGETS.values()
    ]


# ----------------------------------------------------------------------------- traces (server side)


def load_trace_bounded(path: Path, limits: JobLimits, store: Path) -> Trace:
    """The trace at ``path``, read first by a child process under ``limits`` (its memory and
    time), which writes a copy into ``store``; the server loads only that copy, so a hostile
    trace (a decompression bomb) costs the child, never the server."""
    import subprocess
    import sys
    import tempfile

    from irtrace.base.errors import TraceFormatError

    with tempfile.TemporaryDirectory(dir=store, prefix="load-") as folder:
        copy = Path(folder) / "trace.jsonl"
        command = [
            sys.executable,
            "-m",
            "tilelang_mcp.trace_copy",
            str(limits.memory_mb),
            str(path),
            str(copy),
        ]
        try:
            done = subprocess.run(
                command, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=limits.timeout_s
            )
        except subprocess.TimeoutExpired:
            raise JobError(f"reading {str(path)!r} took longer than {limits.timeout_s:g} s") from None
        if done.returncode != 0 or not copy.is_file():
            lines = [line for line in done.stderr.splitlines() if line.strip()]
            if done.returncode == ExitCode.TRACE_FORMAT and lines:
                raise TraceFormatError(lines[-1])
            why = lines[-1] if lines and done.returncode > 0 else f"exit {done.returncode}"
            limit = f"--memory-limit {limits.memory_mb} MB"
            raise JobError(f"{str(path)!r} cannot be loaded within the limits ({limit}): {why}")
        loaded = load_trace(copy)
    return replace(loaded, path=str(path))  # the copy is gone: reports name the file given


# ----------------------------------------------------------------------------- jobs (worker side)


Interruptible = Callable[[], contextlib.AbstractContextManager[None]]
"""A context the worker gives a job: while the job waits for its child inside it, a
``KeyboardInterrupt`` (the worker's cancel) may be raised, and the child is killed cleanly."""


def run_job(request: JobRequest, close_fds: Sequence[int], interruptible: Interruptible) -> Any:
    """Run one job in a forked child under the request's limits; ``close_fds`` are the worker's
    protocol descriptors, closed in the child so kernel code cannot write to them. Only while
    the job waits for its child is it inside ``interruptible``: a cancel there kills the child
    and fails the job, and never lands where a trace file is being opened or finished."""
    limits = JobLimits(request.timeout_s, request.memory_mb)
    if isinstance(request, Record):
        return _record_job(request, limits, close_fds, interruptible)
    if isinstance(request, Facts):
        return _analysis_job(partial(_facts, request), limits, close_fds, interruptible)
    if isinstance(request, Diagnostics):
        return _analysis_job(partial(_diagnostics, request), limits, close_fds, interruptible)
    raise JobError(f"unknown job {type(request).__name__}")


def _enter_child(limits: JobLimits, close_fds: Sequence[int]) -> None:
    """In the forked child, before any kernel code: no stdin, no protocol pipe, no cancel timer's
    handler, a memory cap."""
    import resource

    for fd in close_fds:
        with contextlib.suppress(OSError):
            os.close(fd)
    with contextlib.suppress(Exception):  # Linux: die with the worker, or a hang would spin on
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    with contextlib.suppress(AttributeError, ValueError):  # the worker's cancel watch is not the kernel's
        signal.signal(signal.SIGALRM, signal.SIG_DFL)
    # The cap counts address space on top of the worker's own (tilelang and torch are mapped).
    extra = limits.memory_mb * 2**20
    with open("/proc/self/statm") as statm:
        mapped = int(statm.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    cap = mapped + extra if hard == resource.RLIM_INFINITY else min(hard, mapped + extra)
    resource.setrlimit(resource.RLIMIT_AS, (cap, hard))


def _isolated(
    job: Callable[[TraceWriter], Any],
    writer: TraceWriter,
    limits: JobLimits,
    close_fds: Sequence[int],
    interruptible: Interruptible,
) -> tuple[Any, list[KernelRun], str | None]:
    """``job(writer)`` in a forked worker (a pool of one, ``irtrace.lowering.executor``): its JSON
    result, the runs it wrote, and why it was stopped (``None`` when it finished). Errors it
    raised come back as ``JobError``; so does an interrupt, after the child is killed."""
    tasks = run_tasks(
        [job],
        writer,
        workers=1,
        timeout=limits.timeout_s,
        in_worker=lambda: _enter_child(limits, close_fds),
    )
    try:
        with contextlib.closing(tasks), interruptible():  # closed: the child is killed however it ends
            (result,) = tasks
    except KeyboardInterrupt:
        raise JobError("the job was interrupted") from None
    except RuntimeError as failure:  # the job raised something else than an IrtraceError
        raise JobError(_out_of_memory(str(failure), limits)) from None
    if result.error is not None:
        raise JobError(_out_of_memory(result.error.message, limits))
    stopped = None
    if result.stopped is not None:
        killed = [run for run in result.runs if run.stopped_by is not None]
        if killed:  # the run says where, in the executor's words
            stopped = killed[-1].error
        else:
            stopped = result.stopped.describe(
                "before any lowering began (while importing the file, evaluating the arguments or "
                "building the kernel)"
            )
    return result.value, result.runs, stopped


def _out_of_memory(message: str, limits: JobLimits) -> str:
    if "MemoryError" in message or "bad_alloc" in message:
        return f"the kernel ran out of memory (limit {limits.memory_mb} MB above the worker's): {message}"
    return message


def agent_pass_configs(given: Mapping[str, Any]) -> dict[str, Any]:
    """An agent's pass configs, decoded as a trace's are (``irtrace.lowering.trace_configs``):
    registered configs of their types only; compile flags (nvcc's command line) and options that
    write files are refused, naming the first."""
    from irtrace.lowering.trace_configs import decode_trace_configs

    decoded = decode_trace_configs(dict(given), where="the tool call")
    if decoded.dropped:
        raise JobError(f"pass config {decoded.dropped[0]}: tilelang-mcp does not pass it")
    return decoded.configs


def _record_job(
    request: Record, limits: JobLimits, close_fds: Sequence[int], interruptible: Interruptible
) -> Recorded:
    """Lower a spec for its targets into ``request.output``: the CLI's ``irtrace record``; with
    the instance each run was lowered with."""
    from irtrace.lowering.bench import bench_for
    from irtrace.lowering.machine_code import machine_code_for

    recording_request = RecordRequest(
        parse_kernel_spec(request.spec),
        request.targets,
        agent_pass_configs(request.pass_configs),
        instances=instance_sources(request),
        source_map=request.source_map,
    )

    def job(writer: TraceWriter) -> list[dict[str, Any]]:
        instances: list[dict[str, Any]] = []
        with (
            machine_code_for(writer, request.machine_code) as compiler,
            bench_for(writer, request.bench) as bench_hook,
        ):
            hooks = [hook for hook in (compiler.after_run if compiler else None, bench_hook) if hook]

            def after_run(run: KernelRun, prepared: Any) -> None:
                if prepared is not None:
                    instances.append(_run_instance(run, prepared))
                for hook in hooks:
                    hook(run, prepared)

            recording = record_kernels([recording_request], writer, after_run=after_run)
        if recording.errors:
            raise recording.errors[0]
        return instances

    writer = TraceWriter(request.output)
    try:
        instances, runs, stopped = _isolated(job, writer, limits, close_fds, interruptible)
    except BaseException:
        writer.abandon(keep=False)
        Path(request.output).unlink(missing_ok=True)
        raise
    if not runs:
        writer.abandon(keep=False)
        Path(request.output).unlink(missing_ok=True)
        raise JobError(stopped or "nothing was lowered")
    writer.close()
    return Recorded(
        output=request.output,
        runs=len(runs),
        stopped=stopped,
        instances=tuple(msgspec.convert(found, RunInstance) for found in instances or ()),
    )


def _run_instance(run: KernelRun, prepared: Any) -> dict[str, Any]:
    """The instance a run was lowered with, as JSON (it comes back from the job's child)."""
    if prepared.resolved is not None:
        described = dict(describe_instance(prepared.resolved))
    else:
        described = {"call": prepared.spec.text.partition("::")[2] or prepared.name, "origin": "the spec"}
    return {"kernel": run.kernel, "target": run.target, **described}


def _analysis_job(
    analyze: Callable[[], dict[str, Any]],
    limits: JobLimits,
    close_fds: Sequence[int],
    interruptible: Interruptible,
) -> dict[str, Any]:
    writer = TraceWriter(None)
    result, _, stopped = _isolated(lambda _writer: analyze(), writer, limits, close_fds, interruptible)
    if stopped is not None:
        raise JobError(stopped)
    assert isinstance(result, dict)
    return result


def instance_sources(request: Job) -> InstanceSources:
    """Where a kernel named without arguments finds its instance: the language server's resolver
    (``irtrace.lowering.resolve``), with the root's recorded traces (``instance_traces``)."""
    return InstanceSources(traces=request.instance_traces, manifest_root=request.manifest_root)


def _units(request: Facts | Diagnostics) -> Iterator[Any]:
    target = request.target  # None: the dialect's default
    recording_request = RecordRequest(
        parse_kernel_spec(request.spec), (target,) if target else (), instances=instance_sources(request)
    )
    return lowering_units(recording_request)


def _analyze_unit(
    unit: Any, *, stop_after: tuple[str, ...] = (), pass_configs: Mapping[str, Any] | None = None
) -> Any:
    """``analyze_kernel`` on a unit, without IR texts (facts and diagnostics need none); a kernel
    that needs a value nobody gives says what gives it."""
    options = LoweringOptions(
        unit.target, unit.tvm_target, pass_configs or {}, stop_after=stop_after, capture=NO_IR
    )
    try:
        return analyze_kernel(
            unit.loaded,
            unit.kernel,
            unit.spec,
            TraceWriter(None),
            options,
            symbolic=unit.resolved is not None and bool(unit.resolved.symbolic),
        )
    except IrtraceError as error:
        resolved = unit.resolved
        if resolved is None or not resolved.symbolic:
            raise
        raise JobError(
            f"{unit.kernel.name}: no value for {', '.join(resolved.symbolic)} (as symbols it does not build: "
            f"{error.message.splitlines()[0][:160]}); {NEEDS_VALUES}"
        ) from None


def _not_reached(recorded: Any) -> str | None:
    if recorded is None:
        return "not lowered: a tile's shape holds a symbol (TileLang's layout inference crashes on it)"
    return error_headline(str(recorded.error)) if recorded.error is not None else None


def instance_document(instance: RunInstance) -> dict[str, Any]:
    """A run's instance as ``buffer_facts`` answers it (``describe``'s keys: empty ones left out)."""
    data = msgspec.to_builtins(instance)
    return {
        key: value
        for key, value in data.items()
        if key not in ("kernel", "target") and (value or key in ("call", "origin"))
    }


def _instance(unit: Any) -> dict[str, Any]:
    """The instance a unit was analyzed with, in the resolver's words."""
    if unit.resolved is not None:
        return dict(describe_instance(unit.resolved))
    return {"call": unit.spec.text.partition("::")[2] or unit.kernel.name, "origin": "the spec"}


def _facts(request: Facts) -> dict[str, Any]:
    """Each kernel of the spec lowered up to layout inference, and its buffers (the language
    server's hover facts), those declared on ``line`` when it is given."""
    line = request.line
    kernels = []
    for unit in _units(request):
        stop = layout_stop_pass(unit.target)
        analyzed = _analyze_unit(unit, stop_after=(stop,))
        recorded = analyzed.recorded
        ok = recorded is not None and recorded.error is None and reached(recorded.run.passes, stop)
        facts = buffer_facts(analyzed.built.func, recorded.stopped_module if ok and recorded else None)
        buffers = [msgspec.to_builtins(fact) for fact in facts if line is None or fact.line == line]
        kernels.append(
            {
                "kernel": unit.kernel.name,
                "spec": unit.spec.text,
                "instance": _instance(unit),
                "target": unit.target.name,
                "stop_pass": stop,
                "reached": ok,
                "error": _not_reached(recorded),
                "buffers": buffers,
            }
        )
    return {"kernels": kernels}


def _diagnostics(request: Diagnostics) -> dict[str, Any]:
    """Errors and warnings of the real frontend and pipeline for each kernel of the spec."""
    spec = parse_kernel_spec(request.spec)
    file = Path(spec.path)
    found: list[dict[str, Any]] = []
    kernels: list[dict[str, Any]] = []
    try:
        units = list(_units(request))
    except KernelSourceError as error:
        code = "syntax" if isinstance(error.__cause__, SyntaxError) else "import"
        return {"kernels": [], "diagnostics": [asdict(error_diagnostics(error, file, code=code))]}
    for unit in units:
        entry: dict[str, Any] = {"kernel": unit.kernel.name, "target": unit.target.name, "status": "ok"}
        kernels.append(entry)
        with capture_native_stderr() as log:
            try:
                analyzed = _analyze_unit(unit, pass_configs={RACE_CHECK_CONFIG: False})
            except (IrtraceError, JobError) as error:
                entry["status"] = "failed"
                if isinstance(error, JobError):
                    warning = CompilerDiagnostic(str(error), "warning", "arguments", file=str(file))
                    found.append(asdict(warning))
                else:
                    found.append(asdict(error_diagnostics(error, file, code="frontend")))
                continue
        recorded = analyzed.recorded
        found.extend(asdict(d) for d in native_log_diagnostics(log.text, file))
        if recorded is not None and recorded.error is not None:
            failed = next((p for p in recorded.run.passes if p.failed), None)
            code = "lowering" if failed is not None else "semantic-check"
            if failed is not None and "LayoutInference" in failed.name:
                code = "layout-inference"
            entry["status"] = "failed"
            entry["failed_pass"] = failed.name if failed is not None else None
            found.append(asdict(error_diagnostics(recorded.error, file, code=code)))
    return {"kernels": kernels, "diagnostics": found}


# ----------------------------------------------------------------------------- trace readers (server side)


def pass_rows(trace: Trace, run: KernelRun) -> list[dict[str, Any]]:
    """One compact row per pass: label, phase, self time, whether it changed the IR, +/- lines
    (counted by passdiff's line diff, as ``irtrace show`` and ``passdiff pass`` count them)."""
    rows = []
    cache: dict[tuple[str, str], tuple[int, int]] = {}
    for label, record in zip(occurrence_labels(p.name for p in run.passes), run.passes, strict=True):
        counts = line_changes(trace, record, count_line_changes, cache)
        row: dict[str, Any] = {
            "pass": label,
            "ms": round(record.self_s * 1000, 2),
            "changed": record.changed,
        }
        if counts is None:
            row["lines"] = NEW_STAGE
        elif record.changed:
            row["lines"] = f"+{counts[0]} -{counts[1]}"
        if record.depth:
            row["depth"] = record.depth
        if record.phase != "lower":
            row["phase"] = record.phase
        if record.failed:
            row["failed"] = True
        rows.append(row)
    return rows


def run_summary(trace: Trace, run: KernelRun) -> dict[str, Any]:
    """A run's header facts: status, time, pass counts, and where and why it failed."""
    data: dict[str, Any] = {
        "kernel": run.kernel,
        "target": run.target,
        "spec": run.spec,
        "status": run.status,
        "total_ms": round(run.total_s * 1000, 1) if run.total_s is not None else None,
        "passes": len(run.passes),
        "changed": sum(p.changed for p in run.passes),
        "pass_configs": dict(run.pass_configs),
    }
    if run.status != STATUS_OK:
        failed = failing_pass(run)
        data["failed_pass"] = label_in_run(run, failed) if failed is not None else None
        data["running"] = run.running
        data["stopped_by"] = run.stopped_by
        # a killed child's run says why (timed out, died) on the run; a failed pass on the pass
        error = run.error if run.stopped_by else (failed.error if failed is not None else None) or run.error
        data["error"] = error_headline(error)
    if run.resources:
        data["resources"] = [item.to_json() | {"function": item.function} for item in run.resources]
    if run.bench is not None:
        data["bench"] = run.bench.to_json()
    if run.launches:  # what a captured program passed at launch, by distinct signature
        data["launches"] = msgspec.to_builtins(list(run.launches))
    return data


def failure_input(trace: Trace, run: KernelRun) -> tuple[str, str] | None:
    """``(label, IR)`` of the module the failing pass received, for a run that failed in a pass."""
    failed = failing_pass(run)
    if failed is None or failed.ir_before is None:
        return None
    return label_in_run(run, failed), trace.ir_before(failed)


SOURCE = "source"
"""The ``pass_name`` that asks for the final kernel source."""


def find_ir(trace: Trace, run: KernelRun, pass_name: str, side: str) -> tuple[str, str]:
    """``(label, text)``: the IR after (or before) a pass, or the kernel source for ``source``."""
    if pass_name == SOURCE:
        source = trace.kernel_source(run)
        if source is None:
            raise JobError(f"{run.kernel} on {run.target} has no kernel source: {run.status}")
        return SOURCE, source
    record: PassRecord = resolve_query(run, pass_name)
    label = label_in_run(run, record)
    if side == "before":
        return label, trace.ir_before(record)
    if record.ir_after is None:
        raise JobError(f"pass {label} failed, so there is no IR after it; ask for side='before'")
    return label, trace.ir_after(record)


def resolve_query(run: KernelRun, query: str) -> PassRecord:
    from irtrace.diff import resolve_pass

    return resolve_pass(run, query)


def rules(normalize: bool) -> NormalizeRules:
    return NormalizeRules() if normalize else NormalizeRules.none()


def pass_span_diff(trace: Trace, run: KernelRun, from_pass: str, to_pass: str, normalize: bool) -> TextDiff:
    """What the passes ``from_pass`` through ``to_pass`` did together."""
    return diff_span(trace, run, from_pass, to_pass, rules(normalize))


def compare_lowerings(
    trace_a: Trace, run_a: KernelRun, trace_b: Trace, run_b: KernelRun, normalize: bool
) -> RunComparison:
    """Where two lowerings first part: passdiff's alignment by the pipeline's tree."""
    return compare_runs(trace_a, run_a, trace_b, run_b, rules(normalize))


def coverage_document(trace: Trace) -> tuple[dict[str, Any], str]:
    """The coverage matrix of a trace, as JSON and as Markdown."""
    matrix = coverage_matrix(trace.runs)
    return matrix_document(matrix), matrix_markdown(matrix)


def check_report(new: Trace, baseline: Trace, policy: str | None) -> tuple[dict[str, Any], str]:
    """``irtrace check``: the new trace against the baseline under a policy (defaults if ``None``)."""
    report = check_traces(new, baseline, load_policy(policy) if policy is not None else Policy())
    return report_document(report), render_text(report)


def source_line_document(trace: Trace, run: KernelRun, line: int, pass_name: str | None) -> dict[str, Any]:
    """What line ``line`` of the kernel's file became after each pass (or after ``pass_name``), as
    ``irtrace ir TRACE --line LINE --json`` gives it (``irtrace-line/1``). A line past the end of
    the kernel's file as the trace stores it is an error, not an empty answer."""
    from irtrace.facts.instruction_classes import counts_document, line_instructions
    from irtrace.facts.source_map import (
        LineQuery,
        generated_texts,
        line_document,
        line_through_passes,
        require_maps,
    )

    require_maps(run)
    source = trace.kernel_file(run)
    if source is not None:
        count = source.count("\n") + (0 if source.endswith("\n") else 1)
        if line > count:
            raise JobError(f"line {line} is past the end of {run.kernel}'s file ({count} lines)")
    only = resolve_query(run, pass_name) if pass_name is not None else None
    found = line_through_passes(trace, run, LineQuery(line), only)
    generated = generated_texts(trace, run, LineQuery(line)) if only is None else []
    counts = line_instructions(trace, run, LineQuery(line)) if only is None else None
    machine = counts_document(counts) if counts is not None else None
    return line_document(run.kernel, run.target, str(line), found, generated, machine)


def resource_lines(run: KernelRun) -> list[str]:
    """One line per kernel function: registers, spills, shared memory, barriers, stack."""
    from irtrace.lowering.machine_code import describe_resources

    return describe_resources(run.resources)


def describe_job_error(error: BaseException) -> str:
    """One line for an error raised while checking or reading inputs."""
    if isinstance(error, IrtraceError):
        return error.message
    return str(error) or type(error).__name__


def dump(data: Any) -> str:
    return json.dumps(data, separators=(",", ":"), ensure_ascii=False, default=str)
