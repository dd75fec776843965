"""``irtrace repro``: a standalone script that rebuilds the IR a failed pass received and runs that
one pass for that target, so a compiler bug can be reported with a small reproducer.

TVMScript text does not parse back for TileLang's mid-pipeline IR (the printer declares launch
threads and block buffers in forms its own parser rejects), so the IR is rebuilt exactly: the
kernel is lowered again from the run's spec, the module is caught right before the failed pass
and stored in TVM's JSON form (``tvm.ir.save_json``), and it must print exactly as the trace
recorded it. The pass is then run alone on that module, in this process, inside the run's target
and pass configs; only a pass that fails with the recorded error is written into the script.
Nested passes are tried innermost first, then the passes they ran in.

A trace is data: the kernel is imported only from the file the user names on the command line
(never from the path in the spec), its call is rebuilt from the spec's literal arguments (never
evaluated), and every trace field written into the script is a Python literal made by ``repr``.
"""

from __future__ import annotations

import ast
import base64
import hashlib
import json
import re
import textwrap
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from irtrace.base.errors import InputError, IrtraceError, NotInTraceError, UsageError
from irtrace.ci.coverage import error_headline
from irtrace.lowering.instrumentation import compile_session, stacked_pass_instrument
from irtrace.targets.compat import require_supported_tilelang
from irtrace.targets.specs import KernelSpec
from irtrace.trace.model import PHASE_CODEGEN, STATUS_OK, KernelRun, PassRecord, Trace, text_sha256

CODEGEN_STEP = "codegen"
"""Name of the recorder's codegen step (its ``raw_name`` is the codegen function)."""
_JSON_LINE = 100


class ReproError(IrtraceError):
    """No reproducer can be written for this run (it did not fail, or the failure did not recur)."""

    exit_code = UsageError.exit_code


@dataclass(frozen=True)
class Reproducer:
    """A failed pass reproduced in isolation, and the script that does it again."""

    run: KernelRun
    failed: PassRecord
    """The pass the script runs (the innermost failed pass that fails alone)."""
    recorded_error: str
    """The error's headline as the trace recorded it."""
    reproduced_error: str
    """The headline of the error the pass raised when irtrace ran it alone."""
    script: str
    dropped_configs: tuple[str, ...] = ()
    """The trace's pass configs left out (``irtrace.lowering.trace_configs``), one line each."""


def failed_passes(run: KernelRun) -> list[PassRecord]:
    """The run's failed passes, innermost first (a failed pass's enclosing passes fail with it)."""
    return sorted((p for p in run.passes if p.failed), key=lambda p: (-p.depth, -p.index))


def default_script_name(run: KernelRun) -> str:
    """``repro_KERNEL_TARGET.py`` with anything but letters, digits and ``_`` replaced, kernel and
    target cut to 80 characters each so a long kernel name still makes a valid file name."""
    kernel, target = (re.sub(r"[^A-Za-z0-9_]+", "_", part)[:80] for part in (run.kernel, run.target))
    return re.sub(r"_+", "_", f"repro_{kernel}_{target}").strip("_") + ".py"


def build_reproducer(
    trace: Trace,
    run: KernelRun,
    kernel_file: str | Path | None,
    *,
    trace_name: str | None = None,
    compile_flags: bool = False,
) -> Reproducer:
    """Rebuild the IR before ``run``'s failed pass, check that the pass fails alone, write the script.

    ``kernel_file`` is the file to import the kernel from, as the user named it (required once
    the run is one repro can rebuild): the path in the run's spec is never imported. The run's
    pass configs are decoded against TileLang's registered types, and its compile flags kept only
    with ``compile_flags`` (``run_with_trace_configs``).
    """
    from irtrace.lowering.trace_configs import run_with_trace_configs

    kernel_file = require_rebuildable(run, kernel_file, "repro")
    run, dropped = run_with_trace_configs(run, compile_flags=compile_flags)
    candidates = failed_passes(run)
    recorded = error_headline(mask_targets(candidates[0].error or run.error or ""))
    failing = reproducible_pass(run, kernel_file, dropped)
    script = render_script(
        run, failing.record, failing.saved, failing.target, trace_name or trace.path or "the trace"
    )
    reproduced = error_headline(mask_targets(failing.outcome))
    return Reproducer(run, failing.record, recorded, reproduced, script, tuple(dropped))


def require_rebuildable(run: KernelRun, kernel_file: str | Path | None, command: str) -> str | Path:
    """``kernel_file`` once ``run`` is a failure ``command`` can rebuild (it failed in a pass, was
    recorded from a kernel file with literal arguments, and the user named that file); else the
    error saying why not, before anything imports TileLang."""
    if run.status == STATUS_OK:
        raise ReproError(f"{run.kernel} on {run.target} lowered without error; there is nothing to {command}")
    if not failed_passes(run):
        raise ReproError(
            f"{run.kernel} on {run.target} failed before its first pass ({error_headline(run.error)}); "
            f"build the kernel (its factory raised) to {command} it"
        )
    if run.spec.startswith(("captured:", "resumed:")):
        raise ReproError(
            f"{run.kernel} was not recorded from a kernel file (captured by `irtrace run` or resumed); "
            f"record it with `irtrace record path.py::kernel(args)` to get a trace that {command} can rebuild"
        )
    if kernel_file is None:
        raise UsageError(
            f"{command} imports only a kernel file named on the command line: give --kernel-file FILE "
            f"(the run was recorded from {run.spec.partition('::')[0]!r})"
        )
    rebuild_spec(run, kernel_file)  # a spec that is not literals, or no such file: said before TileLang loads
    return kernel_file


@dataclass(frozen=True)
class FailingPass:
    """A failed pass of a run that fails alone, on the module it received, with the recorded error."""

    record: PassRecord
    step: Step
    saved: SavedModule
    """The module the pass received, rebuilt by lowering the kernel again."""
    target: dict[str, Any]
    """The run's target as a JSON object (``target_json``)."""
    expected_error: str
    """The error the trace recorded for the run's innermost failed pass."""
    outcome: str
    """The error the pass raised when run alone."""


def reproducible_pass(run: KernelRun, kernel_file: str | Path, dropped: Sequence[str] = ()) -> FailingPass:
    """The innermost failed pass of ``run`` (an outer one when it cannot be run alone) that, run
    alone on the module it received, fails with the recorded error; ``ReproError`` naming why
    each failed pass did not when none does (and which of the trace's configs were left out)."""
    candidates = failed_passes(run)
    expected = candidates[0].error or run.error or ""
    spec = rebuild_spec(run, kernel_file)
    target = target_json(run)
    steps = {record.index: failing_step(record) for record in candidates}
    modules: dict[int, SavedModule] = {}
    if not all(isinstance(step, str) for step in steps.values()):  # else no need to lower again
        modules = capture_modules(run, spec, [p.index for p in candidates])
    tried = []
    for record in candidates:
        step = steps[record.index]
        if isinstance(step, str):
            tried.append(f"{record.name}: {step}")
            continue
        saved = modules.get(record.index)
        if saved is None:
            tried.append(f"{record.name}: the lowering did not reach it again")
            continue
        if text_sha256(saved.text) != record.ir_before:
            raise ReproError(
                f"{run.kernel} on {run.target} lowers differently now: the module {record.name} receives "
                f"is not the one in the trace ({_why_different(run, spec)}); "
                "record the trace again and rerun repro"
            )
        outcome = run_alone(step, saved.json, run, target)
        if outcome is None:
            tried.append(f"{record.name}: ran without error on its own")
            continue
        if not same_error(outcome, expected):
            tried.append(
                f"{record.name}: failed differently on its own ({error_headline(mask_targets(outcome))})"
            )
            continue
        return FailingPass(record, step, saved, target, expected, outcome)
    left_out = f" (left out of the trace's pass configs: {'; '.join(dropped)})" if dropped else ""
    raise ReproError(
        f"the failure of {run.kernel} on {run.target} did not recur with one pass run alone: "
        + "; ".join(tried)
        + left_out
    )


def rebuild_spec(run: KernelRun, kernel_file: str | Path) -> KernelSpec:
    """The run's kernel and call on ``kernel_file``: its arguments are the spec's literals only
    (numbers, strings, containers, ``T.float16``); an expression is refused, never evaluated."""
    from irtrace.lowering.loader import resolve_kernel_file
    from irtrace.targets.specs import parse_spec

    file = resolve_kernel_file(kernel_file)
    try:
        spec = parse_spec(run.spec, expressions=False)
    except UsageError as error:
        raise ReproError(
            f"repro rebuilds the call from literal arguments only, and the run's spec has another: "
            f"{error.message}"
        ) from None
    return replace(spec, path=str(file))


def _why_different(run: KernelRun, spec: KernelSpec) -> str:
    """What likely changed since the recording: the kernel file (when the trace holds its hash)
    or tilelang."""
    from irtrace.lowering.loader import source_as_imported

    if (
        run.kernel_file_sha256
        and text_sha256(source_as_imported(Path(spec.path)) or "") != run.kernel_file_sha256
    ):
        return f"{spec.path} is not the kernel file the trace recorded"
    return f"recorded with tilelang {run.tilelang_version!r}"


def target_json(run: KernelRun) -> dict[str, Any]:
    """The run's full target as a JSON object whose ``repr`` is a Python literal (no NaN)."""
    try:
        target = json.loads(run.target_detail)
    except (ValueError, RecursionError):
        target = None
    if isinstance(target, dict) and python_literal(target) is not None:
        import tilelang  # noqa: F401  (TileLang's TVM, and the target kinds it registers)
        import tvm

        try:
            tvm.target.Target(target)
        except Exception:  # TVM's own error types for a bad target
            pass
        else:
            return target
    raise ReproError(
        f"the run's target_detail is not a TVM target ({_show(run.target_detail)}); record the trace again"
    )


def python_literal(value: Any) -> str | None:
    """``repr(value)`` when it reads back as the same value with ``ast.literal_eval``, else ``None``.

    Every trace field written into the script goes through here: it can only be data.
    """
    text = repr(value)
    try:
        same: bool = ast.literal_eval(text) == value
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None
    return text if same else None


def same_error(seen: str, recorded: str | None) -> bool:
    """Whether two errors say the same thing, target JSON (which may or may not carry a host) aside."""
    return error_headline(mask_targets(seen)) == error_headline(mask_targets(recorded or ""))


def mask_targets(error: str) -> str:
    """``error`` with every target JSON object (``{"kind": ...}``, nested objects included) masked."""
    out = []
    position = 0
    while (start := error.find('{"kind"', position)) >= 0:
        depth, end = 0, start
        for end in range(start, len(error)):
            depth += {"{": 1, "}": -1}.get(error[end], 0)
            if depth == 0:
                break
        out.append(error[position:start] + "<target>")
        position = end + 1
    return "".join(out) + error[position:]


# ----------------------------------------------------------------------------- capture


@dataclass(frozen=True)
class SavedModule:
    """A module as a pass received it: TVM's exact JSON form and its printed text."""

    json: str
    text: str


def capture_modules(run: KernelRun, spec: KernelSpec, indexes: Sequence[int]) -> dict[int, SavedModule]:
    """Lower ``spec`` (the run's kernel, see ``rebuild_spec``) again for the run's target and keep
    the module each pass in ``indexes`` (the trace's pass indexes) received."""
    require_supported_tilelang()
    import tilelang
    import tvm

    prepared = _prepare(run, spec)
    capture = ModuleCapture(set(indexes))
    try:
        with (
            compile_session(f"irtrace-repro:{run.kernel}", [capture]),
            tvm.transform.PassContext(
                opt_level=3, config=prepared.pass_configs, instruments=[capture.create_pass_instrument()]
            ),
            prepared.tvm_target,
        ):
            tilelang.lower(prepared.built.func, target=prepared.tvm_target)
    except Exception:  # the failure being reproduced
        pass
    return capture.saved


def _prepare(run: KernelRun, spec: KernelSpec) -> Any:
    """The run's kernel built for its target from the user's kernel file, as ``irtrace record``
    built it."""
    from irtrace.lowering.api import RecordRequest, bind_unit, build_unit, lowering_units

    request = RecordRequest(spec, (run.target,), dict(run.pass_configs))
    try:
        # the spec's Python name, else the run's (a spec naming no kernel records each by its name)
        units = [u for u in lowering_units(request) if u.kernel.name == (spec.name or run.kernel)]
    except InputError as error:
        raise InputError(f"{error.message} (repro rebuilds {run.kernel!r} from {spec.path})") from None
    if not units:
        raise NotInTraceError(f"{spec.path} defines no kernel {run.kernel!r}")
    prepared = build_unit(units[0], bind_unit(units[0]))
    if prepared.built is None:
        assert prepared.error is not None
        raise ReproError(f"{run.kernel} cannot be built any more: {prepared.error.message}")
    return prepared


class ModuleCapture:
    """A TileLang instrumentation tool counting pass starts as the recorder does (codegen included)
    and saving the module at the wanted ones."""

    pass_instrument_priority = 1000

    def __init__(self, wanted: set[int]) -> None:
        self.wanted = wanted
        self.saved: dict[int, SavedModule] = {}
        self.next_index = 0

    def _started(self, mod: Any) -> None:
        if self.next_index in self.wanted:
            import tvm

            self.saved[self.next_index] = SavedModule(str(tvm.ir.save_json(mod)), str(mod))
        self.next_index += 1

    # TileLang PassInstrumentationTool
    def create_pass_instrument(self) -> Any:
        return stacked_pass_instrument(self)

    def pipeline_scope(self, base_phase: str) -> Any:
        import contextlib

        return contextlib.nullcontext()

    def run_codegen(self, event: Any, next_call: Callable[[], Any]) -> Any:
        self._started(event.mod)
        return next_call()

    def finish(self, error: BaseException | None) -> None:
        pass

    # TileLang PassEventObserver
    def enter_pass_context(self) -> None:
        pass

    def exit_pass_context(self) -> None:
        pass

    def pass_started(self, mod: Any, event: Any) -> None:
        self._started(mod)

    def pass_finished(self, mod: Any, event: Any, state: Any) -> None:
        pass

    def passes_incomplete(self, passes: Sequence[Any], error: BaseException | None) -> None:
        pass

    def callback_mismatch(self, actual: str, expected: str | None) -> None:
        pass


# ----------------------------------------------------------------------------- running one pass


_PASS_NAME = re.compile(r"[A-Za-z_]\w*\.[A-Za-z_]\w*")
_CODEGEN_NAME = re.compile(r"target\.build\.[A-Za-z_]\w*")
"""Global functions the trace may name: a pass (``ns.Name``, made by ``ns.transform.Name``) or a
codegen function; nothing else is looked up and called."""


def pass_factory(record: PassRecord) -> str | None:
    """The global function that makes the pass (``tl.LayoutInference``: ``tl.transform.LayoutInference``)."""
    if not _PASS_NAME.fullmatch(record.raw_name):
        return None
    namespace, _, name = record.raw_name.partition(".")
    return f"{namespace}.transform.{name}"


Step = Callable[[Any, Any], Any]
"""Runs one failed step on a module inside its target: a pass, or the codegen function."""


def failing_step(record: PassRecord) -> Step | str:
    """The failed pass (or codegen function) made by name as the script makes it, or why it cannot be."""
    import tvm

    if record.raw_name == "pass_fn":
        return "an anonymous Python pass, which cannot be made by name"
    if _is_codegen(record):
        if not _CODEGEN_NAME.fullmatch(record.raw_name):
            return f"{record.raw_name!r} is not a codegen function (target.build.NAME)"
        codegen = tvm.get_global_func(record.raw_name, allow_missing=True)
        if codegen is None:
            return f"no codegen function {record.raw_name} is registered"
        return lambda module, target: codegen(module, target)
    factory = pass_factory(record)
    make = tvm.get_global_func(factory, allow_missing=True) if factory else None
    if make is None:
        return f"no pass factory {factory or record.raw_name} is registered"
    try:
        made = make()
    except Exception:
        return f"{factory} takes arguments that the trace does not hold"
    return lambda module, target: made(module)


def run_alone(step: Step, module_json: str, run: KernelRun, target_detail: dict[str, Any]) -> str | None:
    """Run ``step`` on the saved module inside the run's target and pass configs, as the script
    will; the error it raised, or ``None`` when it ran through."""
    import tvm

    from irtrace.lowering.recorder import describe_error

    module = tvm.ir.load_json(module_json)
    target = tvm.target.Target(target_detail)
    try:
        with tvm.transform.PassContext(opt_level=3, config=dict(run.pass_configs)), target:
            step(module, target)
    except Exception as error:
        return describe_error(error)
    return None


def _is_codegen(record: PassRecord) -> bool:
    return record.phase == PHASE_CODEGEN and record.name == CODEGEN_STEP


# ----------------------------------------------------------------------------- the script


def render_script(
    run: KernelRun,
    record: PassRecord,
    saved: SavedModule,
    target: dict[str, Any],
    trace_name: str,
    *,
    reduced: tuple[int, int] | None = None,
) -> str:
    """The reproducer: the saved module, the target, the configs, and the one call that fails.
    ``reduced`` (statements before, after) says the module is ``irtrace reduce``'s smaller one.

    Trace fields appear only as the Python literals ``python_literal`` makes, in assignments;
    the docstring and the code around them are fixed text.
    """
    packed = base64.b64encode(zlib.compress(saved.json.encode("utf-8"), 9)).decode("ascii")
    chunks = [packed[i : i + _JSON_LINE] for i in range(0, len(packed), _JSON_LINE)]
    module_lines = "\n".join(f'    "{chunk}"' for chunk in chunks)
    what = f"codegen ({record.raw_name})" if _is_codegen(record) else record.name
    if _is_codegen(record):
        call = f"tvm.get_global_func({_literal(record.raw_name)})(module, target)"
    else:
        call = f"tvm.get_global_func({_literal(pass_factory(record))})()(module)"
    # The module's text from this lowering (its hash is the trace's): one comment per line.
    ir_comment = textwrap.indent(saved.text.rstrip("\n"), "# ", lambda line: True)
    if reduced is None:
        written_by, module_heading = "repro", "The module FAILING_STEP received, as the trace holds it:"
        about_module = """The module the step received is
stored below exactly (TVM's JSON form); its TVMScript text, as the trace holds it, is at the end
of this file."""
    else:
        written_by, module_heading = "reduce", "The reduced module FAILING_STEP fails on:"
        about_module = f"""The module is a reduced form of the
one the step received ({reduced[1]} TIR statements of {reduced[0]} left) on which the step still
fails the same way; it is stored below exactly (TVM's JSON form), its TVMScript text is at the
end of this file."""
    return f'''#!/usr/bin/env python3
"""Reproducer written by `irtrace {written_by}`: one TileLang compiler step that fails on its own.

It needs only tilelang (the version in TILELANG_VERSION below). {about_module}
The script loads the module, checks that it prints as recorded, and runs the one
failing step (FAILING_STEP) inside the recording's target and pass configs.

Run it with `python THIS_FILE`: while the bug is there it stops with the compiler's error
(exit 1); once it is fixed it prints "did not reproduce" and exits 0. RECORDED_ERROR is the
error the trace recorded.
"""

import base64
import hashlib
import sys
import zlib

import tilelang  # noqa: F401  (registers TileLang's passes, ops and IR node types)
import tvm

KERNEL = {_literal(run.kernel)}
TARGET_NAME = {_literal(run.target)}
TILELANG_VERSION = {_literal(run.tilelang_version)}
TRACE_FILE = {_literal(trace_name)}
RECORDED_ERROR = {_literal(error_headline(record.error or run.error))}
FAILING_STEP = {_literal(what)}
TARGET = {_literal(target)}
PASS_CONFIGS = {_literal(dict(run.pass_configs))}
MODULE_SHA256 = {_literal(hashlib.sha256(saved.text.encode("utf-8")).hexdigest())}
MODULE_JSON = (
{module_lines}
)


def main() -> int:
    module = tvm.ir.load_json(zlib.decompress(base64.b64decode(MODULE_JSON)).decode("utf-8"))
    if hashlib.sha256(str(module).encode("utf-8")).hexdigest() != MODULE_SHA256:
        print("warning: the module does not print as recorded (another tilelang?)", file=sys.stderr)
    target = tvm.target.Target(TARGET)
    with tvm.transform.PassContext(opt_level=3, config=PASS_CONFIGS), target:
        {call}
    print(f"{{FAILING_STEP}} ran without error: the failure did not reproduce")
    return 0


if __name__ == "__main__":
    sys.exit(main())

# {module_heading}
{ir_comment}
'''


def _literal(value: Any) -> str:
    """``value`` as a Python literal for the script; a value with none is refused."""
    text = python_literal(value)
    if text is None:
        raise ReproError(f"{_show(value)} from the trace cannot be written into the script as a literal")
    return text


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
