"""``irtrace resume``: run the rest of a recorded lowering on an edited module, and record it.

The edited module is what the pass PASS receives (``irtrace ir -p PASS --before`` prints it), so
PASS itself runs on the edit: resume is *inclusive*. The lowering is TileLang's real one
(``tilelang.lower`` for the run's exact target and pass configs) started on the edited module,
with a TVM ``should_run`` instrument skipping every pass the recording ran before PASS. A skipped
pass returns its input unchanged, so the edit reaches PASS as it is; the host/device split after
the pipeline (itself ``tirx.Filter`` passes) is skipped the same way when PASS comes after it.
The instrument checks each skipped pass against the recording, so a pipeline that no longer
runs as recorded (another TileLang, other configs) is an error, not a silent mismatch.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from irtrace.base.errors import ExitCode, InputError, IrtraceError, UsageError
from irtrace.trace.model import PHASE_CODEGEN, KernelRun, PassRecord, Trace
from irtrace.trace.writer import TraceWriter


class ResumeError(IrtraceError):
    """The lowering did not run as the recording did up to the resumed pass."""

    exit_code = ExitCode.LOWERING


@dataclass(frozen=True)
class ResumedRun:
    """The recorded run of the resumed lowering, and what it was resumed from."""

    run: KernelRun
    original: KernelRun
    start: PassRecord
    """The recorded pass the lowering was resumed at (it ran on the edited module)."""
    kernel_source: str | None
    dropped_configs: tuple[str, ...] = ()
    """The recorded pass configs left out (``irtrace.lowering.trace_configs``), one line each."""


def resume_pass(run: KernelRun, name: str) -> PassRecord:
    """The top-level lowering pass ``name`` (``NAME#N``) of ``run``; an unknown name gets a
    did-you-mean error, a nested pass or a codegen step a usage error saying what to give."""
    record = run.find_pass(name)
    if record.phase == PHASE_CODEGEN:
        raise UsageError(
            f"{record.name} runs inside codegen; resume starts at a pass before codegen "
            "(irtrace show TRACE lists them)"
        )
    if record.depth > 0:
        parent = next(p for p in run.passes if p.index == record.parent)
        raise UsageError(
            f"{record.name} runs inside {parent.name}, which changes the module before calling it; "
            f"resume from {parent.name} (a top-level pass) with the IR it receives"
        )
    return record


def read_edited_ir(path: str | Path) -> Any:
    """The ``IRModule`` in the edited IR file at ``path`` (``irtrace.lowering.edited_ir``)."""
    from irtrace.lowering.edited_ir import parse_edited_ir

    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(f"edited IR file {str(file)!r} does not exist") from None
    except (OSError, UnicodeDecodeError) as error:
        raise InputError(f"cannot read edited IR file {str(file)!r}: {error}") from None
    return parse_edited_ir(text, file.name)


def resume_lowering(
    trace: Trace,
    run: KernelRun,
    start: PassRecord,
    module: Any,
    writer: TraceWriter,
    *,
    compile_flags: bool = False,
) -> ResumedRun:
    """Lower ``module`` for ``run``'s target from ``start`` on, recording the new run in ``writer``.

    The new run keeps the original's kernel name, target and arguments, and its pass configs as
    decoded from the trace (compile flags only with ``compile_flags``); its spec is
    ``resumed:SPEC@PASS`` so that tools rebuilding a kernel from its spec (``irtrace repro``) refuse it.
    """
    from irtrace.lowering.recorder import CaptureOptions, LoweringOptions, RunHeader, record_lowering
    from irtrace.lowering.trace_configs import run_with_trace_configs
    from irtrace.targets.backends import get_target
    from irtrace.targets.compat import require_supported_tilelang

    require_supported_tilelang()
    original = run
    run, dropped = run_with_trace_configs(run, compile_flags=compile_flags)

    skipper = SkipUntil(run, start)
    tvm_target = recorded_target(run)
    recorded = record_lowering(
        module,
        writer,
        RunHeader(run.kernel, f"resumed:{run.spec}@{start.name}", run.args),
        LoweringOptions(
            get_target(run.target),
            tvm_target,
            dict(run.pass_configs),
            instruments=(skipper.instrument(),),
            capture=CaptureOptions(threaded=False),
        ),
    )
    if skipper.mismatch is not None:
        raise ResumeError(skipper.mismatch)
    if not skipper.started:
        raise ResumeError(
            f"the lowering never reached {start.name}: the pipeline ran differently from the recording"
        )
    return ResumedRun(recorded.run, original, start, recorded.kernel_source, tuple(dropped))


def recorded_target(run: KernelRun) -> Any:
    """The run's exact TVM target, from the JSON the trace recorded (``target_detail``)."""
    import tvm

    try:
        return tvm.target.Target(json.loads(run.target_detail))
    except Exception:  # not JSON, or not a target TVM knows
        raise ResumeError(
            f"the run's target_detail is not a TVM target ({run.target_detail[:60]!r}); "
            "record the trace again"
        ) from None


class SkipUntil:
    """Skips, through TVM's ``should_run``, each pass the recording ran before ``start``.

    Passes are matched to the recording in order; a skipped pass's nested passes never run, so
    its whole subtree of records is passed over. Codegen steps are not TVM passes and are not
    counted (``start`` comes before codegen).
    """

    def __init__(self, run: KernelRun, start: PassRecord) -> None:
        self.start = start
        self.before = [p for p in sorted(run.passes, key=lambda p: p.index) if p.index < start.index]
        self.position = 0
        self.started = False
        self.mismatch: str | None = None

    def should_run(self, name: str) -> bool:
        if self.started:
            return True
        if self.mismatch is not None:
            return False
        if self.position >= len(self.before):
            if name == self.start.raw_name:
                self.started = True
                return True
            self.mismatch = f"the pipeline ran {name} where the recording ran {self.start.raw_name}"
            return False
        expected = self.before[self.position]
        if name != expected.raw_name:
            self.mismatch = (
                f"the pipeline ran {name} where the recording ran {expected.raw_name} "
                f"(pass #{expected.index}); record the trace again with this TileLang and these configs"
            )
            return False
        self.position += 1
        while self.position < len(self.before) and self.before[self.position].depth > expected.depth:
            self.position += 1  # the skipped pass's nested passes
        return False

    def instrument(self) -> Any:
        from tvm.ir.instrument import pass_instrument

        skipper = self

        @pass_instrument
        class SkipBeforeResume:
            def should_run(self, mod: Any, info: Any) -> bool:
                return skipper.should_run(str(info.name))

        return SkipBeforeResume()
