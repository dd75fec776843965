"""``irtrace repro``: a standalone script that rebuilds the IR a failed pass received and runs that
one pass for that target, so a compiler bug can be reported with a small reproducer.

TVMScript text does not parse back for TileLang's mid-pipeline IR (the printer declares launch
threads and block buffers in forms its own parser rejects), so the IR is rebuilt exactly: the
kernel is lowered again from the run's spec, the module is caught right before the failed pass
and stored in TVM's JSON form (``tvm.ir.save_json``), and it must print exactly as the trace
recorded it. The pass is then run alone on that module, in this process, inside the run's target
and pass configs; only a pass that fails with the recorded error is written into the script.
Nested passes are tried innermost first, then the passes they ran in.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import textwrap
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from irtrace.compat import compile_session, require_supported_tilelang, stacked_pass_instrument
from irtrace.coverage import error_headline
from irtrace.errors import InputError, IrtraceError, NotInTraceError, UsageError
from irtrace.trace import PHASE_CODEGEN, STATUS_OK, KernelRun, PassRecord, Trace, text_sha256

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


def failed_passes(run: KernelRun) -> list[PassRecord]:
    """The run's failed passes, innermost first (a failed pass's enclosing passes fail with it)."""
    return sorted((p for p in run.passes if p.failed), key=lambda p: (-p.depth, -p.index))


def default_script_name(run: KernelRun) -> str:
    """``repro_KERNEL_TARGET.py`` with anything but letters, digits and ``_`` replaced."""
    return re.sub(r"[^A-Za-z0-9_]+", "_", f"repro_{run.kernel}_{run.target}").strip("_") + ".py"


def build_reproducer(
    trace: Trace, run: KernelRun, *, base_dir: Path | None = None, trace_name: str | None = None
) -> Reproducer:
    """Rebuild the IR before ``run``'s failed pass, check that the pass fails alone, write the script.

    ``base_dir`` is the folder a relative spec path is relative to (a manifest's folder); the
    current folder by default.
    """
    if run.status == STATUS_OK:
        raise ReproError(f"{run.kernel} on {run.target} lowered without error; there is nothing to reproduce")
    candidates = failed_passes(run)
    if not candidates:
        raise ReproError(
            f"{run.kernel} on {run.target} failed before its first pass ({error_headline(run.error)}); "
            "build the kernel (its factory raised) to reproduce it"
        )
    if run.spec.startswith("captured:"):
        raise ReproError(
            f"{run.kernel} was captured from a script by `irtrace run`; record it with `irtrace record "
            "path.py::kernel(args)` to get a trace that repro can rebuild"
        )
    recorded = error_headline(mask_targets(candidates[0].error or run.error or ""))
    modules = capture_modules(run, [p.index for p in candidates], base_dir)
    tried = []
    for record in candidates:
        step = failing_step(record)
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
                f"is not the one in the trace (recorded with tilelang {run.tilelang_version}); "
                "record the trace again and rerun repro"
            )
        outcome = run_alone(step, saved.json, run)
        if outcome is None:
            tried.append(f"{record.name}: ran without error on its own")
            continue
        if not same_error(outcome, candidates[0].error or run.error):
            tried.append(
                f"{record.name}: failed differently on its own ({error_headline(mask_targets(outcome))})"
            )
            continue
        script = render_script(run, record, saved, trace_name or trace.path or "the trace")
        return Reproducer(run, record, recorded, error_headline(mask_targets(outcome)), script)
    raise ReproError(
        f"the failure of {run.kernel} on {run.target} did not recur with one pass run alone: "
        + "; ".join(tried)
    )


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


def capture_modules(run: KernelRun, indexes: Sequence[int], base_dir: Path | None) -> dict[int, SavedModule]:
    """Lower ``run``'s kernel again for its target and keep the module each pass in ``indexes``
    (the trace's pass indexes) received."""
    require_supported_tilelang()
    import tilelang
    import tvm

    prepared = _prepare(run, base_dir)
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


def _prepare(run: KernelRun, base_dir: Path | None) -> Any:
    """The run's kernel built for its target, as ``irtrace record`` built it."""
    from irtrace.api import RecordRequest, bind_unit, build_unit, lowering_units
    from irtrace.specs import parse_spec

    spec = parse_spec(run.spec)
    request = RecordRequest(spec, (run.target,), dict(run.pass_configs), None, base_dir)
    try:
        units = [u for u in lowering_units(request) if run.kernel in (u.kernel.name, spec.name)]
    except InputError as error:
        raise InputError(
            f"{error.message} (repro rebuilds {run.kernel} from its spec {run.spec!r}; run it from the "
            "folder the recording ran in, or give --base-dir, such as the manifest's folder)"
        ) from None
    if not units:
        raise NotInTraceError(f"{run.spec} no longer defines {run.kernel}")
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


def pass_factory(record: PassRecord) -> str | None:
    """The global function that makes the pass (``tl.LayoutInference``: ``tl.transform.LayoutInference``)."""
    namespace, dot, name = record.raw_name.partition(".")
    return f"{namespace}.transform.{name}" if dot and "." not in name else None


Step = Callable[[Any, Any], Any]
"""Runs one failed step on a module inside its target: a pass, or the codegen function."""


def failing_step(record: PassRecord) -> Step | str:
    """The failed pass (or codegen function) made by name as the script makes it, or why it cannot be."""
    import tvm

    if record.raw_name == "pass_fn":
        return "an anonymous Python pass, which cannot be made by name"
    if _is_codegen(record):
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


def run_alone(step: Step, module_json: str, run: KernelRun) -> str | None:
    """Run ``step`` on the saved module inside the run's target and pass configs, as the script
    will; the error it raised, or ``None`` when it ran through."""
    import tvm

    from irtrace.recorder import describe_error

    module = tvm.ir.load_json(module_json)
    target = tvm.target.Target(json.loads(run.target_detail))
    try:
        with tvm.transform.PassContext(opt_level=3, config=dict(run.pass_configs)), target:
            step(module, target)
    except Exception as error:
        return describe_error(error)
    return None


def _is_codegen(record: PassRecord) -> bool:
    return record.phase == PHASE_CODEGEN and record.name == CODEGEN_STEP


# ----------------------------------------------------------------------------- the script


def render_script(run: KernelRun, record: PassRecord, saved: SavedModule, trace_name: str) -> str:
    """The reproducer: the saved module, the target, the configs, and the one call that fails."""
    packed = base64.b64encode(zlib.compress(saved.json.encode("utf-8"), 9)).decode("ascii")
    chunks = [packed[i : i + _JSON_LINE] for i in range(0, len(packed), _JSON_LINE)]
    module_lines = "\n".join(f'    "{chunk}"' for chunk in chunks)
    what = f"codegen ({record.raw_name})" if _is_codegen(record) else record.name
    headline = error_headline(record.error or run.error)
    if _is_codegen(record):
        call = f"tvm.get_global_func({record.raw_name!r})(module, target)"
    else:
        call = f"tvm.get_global_func({pass_factory(record)!r})()(module)"
    ir_comment = textwrap.indent(saved.text.rstrip("\n"), "# ", lambda line: True)
    version = run.tilelang_version
    docstring = f'''"""Reproducer: {what} fails for {run.kernel} on {run.target} (tilelang {version}).

Written by `irtrace repro` from {trace_name}. It needs tilelang {version} and nothing else:
the module the pass received is stored below exactly (TVM's JSON form); its TVMScript text,
as the trace holds it, is at the end of this file. The script loads the module, checks that it
prints as recorded, and runs the one failing step inside the recording's target and pass configs.

Run it with `python {{this file}}`: while the bug is there it stops with the compiler's error
(exit 1); once it is fixed it prints "did not reproduce" and exits 0.

The error the trace recorded:
    {headline}
"""'''
    return f"""#!/usr/bin/env python3
{docstring}

import base64
import hashlib
import sys
import zlib

import tilelang  # noqa: F401  (registers TileLang's passes, ops and IR node types)
import tvm

FAILING_STEP = {what!r}
TARGET = {json.loads(run.target_detail)!r}
PASS_CONFIGS = {dict(run.pass_configs)!r}
MODULE_SHA256 = {hashlib.sha256(saved.text.encode("utf-8")).hexdigest()!r}
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

# The module {what} received, as the trace holds it:
{ir_comment}
"""
