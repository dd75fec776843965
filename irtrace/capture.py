"""``irtrace run -- python script.py``: capture every kernel a script lowers, without editing it.

A recorder is registered as a default TileLang instrumentation tool, so each compilation the
script starts (``tilelang.lower``, ``@tilelang.jit``, ``tilelang.compile``) gets its own run in
the trace. The script runs in this process as ``__main__``.
"""

from __future__ import annotations

import os
import runpy
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from irtrace import interrupts
from irtrace.compat import require_instrumentation
from irtrace.errors import InputError, UsageError
from irtrace.recorder import PassRecorder, begin_run_record, describe_error, record_lowering
from irtrace.targets import TargetSpec, auto_target_fallback, get_target
from irtrace.trace import STATUS_FAILED, STATUS_OK, KernelRun, TraceWriter, text_sha256

TOOL_NAME = "irtrace-capture"
GPU_SCRIPT_TARGET = "cuda:sm_90a"
"""What ``target="auto"`` means in a captured script on a machine without a GPU."""


def short_target_name(target: Any) -> str:
    """``cuda:sm_90`` for a TVM CUDA target with arch sm_90, and so on."""
    if target is None:
        return "unknown"
    kind = str(target.kind.name)
    attrs = target.attrs
    if kind == "cuda" and "arch" in attrs:
        return f"cuda:{attrs['arch']}"
    if kind in ("hip", "rocm") and "mcpu" in attrs:
        return f"hip:{attrs['mcpu']}"
    return kind


@dataclass
class CapturedKernel:
    """A kernel seen during the script, kept so it can be lowered for other targets later."""

    kernel: str
    module: Any = field(repr=False)
    pass_configs: dict[str, Any]
    target: str = ""
    """The short name of the target the script lowered it for."""


class CaptureSession:
    """Owns the trace writer and the kernels captured while the script runs."""

    def __init__(self, writer: TraceWriter) -> None:
        self.writer = writer
        self.captured: list[CapturedKernel] = []
        self.runs: list[KernelRun] = []

    def make_tool(self) -> CaptureRecorder:
        return CaptureRecorder(self)


class CaptureRecorder(PassRecorder):
    """A recorder that learns the kernel, target and configs from the first pass it sees."""

    def __init__(self, session: CaptureSession) -> None:
        # every record reaches the file before the next pass runs: a native crash loses nothing
        super().__init__(session.writer, None, threaded=False)
        self.session = session
        self.kernel = ""
        self.configs: dict[str, Any] = {}

    def begin_run(self, mod: Any) -> int:
        import tvm
        from tvm.target import Target

        names = [str(gv.name_hint) for gv in mod.functions]
        self.kernel = names[0] if names else "kernel"
        self.configs = {str(k): v for k, v in dict(tvm.transform.PassContext.current().config).items()}
        target = Target.current(allow_none=True)
        target_name = short_target_name(target)
        run = begin_run_record(
            self.writer,
            target_name,
            self.kernel,
            f"captured:{self.kernel}",
            None,
            str(target) if target is not None else "",
            self.configs,
        )
        self.session.captured.append(CapturedKernel(self.kernel, mod, self.configs, target_name))
        return run.run_id

    def finish(self, error: BaseException | None) -> None:
        if self.run_id is None:
            return  # a compilation that lowered nothing (e.g. served from a cache)
        if isinstance(error, KeyboardInterrupt) or interrupts.received() is not None:
            return  # Ctrl-C, maybe as TVM's bare RuntimeError: the run stays cut short, not failed
        self.write_failed(error)
        self.drain()
        run = self.writer.end_run(
            self.run_id,
            status=STATUS_FAILED if error is not None else STATUS_OK,
            error=describe_error(error),
            total_s=None,
            input_ir=self.input_sha,
            source_sha256=text_sha256(self.kernel_source) if self.kernel_source else None,
        )
        self.session.runs.append(run)


@dataclass
class ScriptOutcome:
    """What running the script gave: its runs and, if it failed, why."""

    runs: list[KernelRun]
    captured: list[CapturedKernel]
    error: BaseException | None = None


def split_command(command: Sequence[str]) -> tuple[str, str, list[str]]:
    """``("path", script, args)`` or ``("module", name, args)`` from ``python script.py ARGS``."""
    words = list(command)
    if words and Path(words[0]).name.startswith("python"):
        words = words[1:]
    if not words:
        raise UsageError("irtrace run needs a command: irtrace run [--target T] -- python script.py ARGS")
    if words[0] == "-m":
        if len(words) < 2:
            raise UsageError("irtrace run -- python -m needs a module name")
        return "module", words[1], words[2:]
    if words[0].startswith("-"):
        raise UsageError(f"irtrace run supports `python script.py` and `python -m module`, not {words[0]!r}")
    if not words[0].endswith(".py"):
        raise UsageError(f"irtrace run: {words[0]!r} is not a Python script; write -- python script.py ARGS")
    if not Path(words[0]).is_file():
        raise InputError(f"script {words[0]!r} does not exist")
    return "path", words[0], words[1:]


def run_script(
    command: Sequence[str], writer: TraceWriter, auto_target: TargetSpec | None = None
) -> ScriptOutcome:
    """Run the script as ``__main__`` with every lowering captured into ``writer``.

    ``target="auto"`` in the script means ``auto_target`` when TileLang finds no GPU, so a script
    written for a GPU machine lowers its kernels anywhere. The default is ``cuda:sm_90a``, what
    TileLang detects on an H100 or H200 (its warp-specialized kernels need the ``a`` features).
    """
    kind, target, args = split_command(command)
    os.environ["TILELANG_DISABLE_CACHE"] = "1"  # a cached kernel would lower nothing to capture
    require_instrumentation("irtrace run")  # TileLang attaches our tool to the script's compilations
    from tilelang.instrumentation import (
        register_pass_instrumentation_tool,
        unregister_pass_instrumentation_tool,
    )

    session = CaptureSession(writer)
    register_pass_instrumentation_tool(TOOL_NAME, session.make_tool)
    saved_argv, saved_path = sys.argv[:], sys.path[:]
    error: BaseException | None = None
    with auto_target_fallback(auto_target or get_target(GPU_SCRIPT_TARGET)):
        try:
            if kind == "path":
                sys.argv = [target, *args]
                sys.path.insert(0, str(Path(target).resolve().parent))
                runpy.run_path(target, run_name="__main__")
            else:
                sys.argv = [target, *args]
                sys.path.insert(0, os.getcwd())
                runpy.run_module(target, run_name="__main__", alter_sys=True)
        except SystemExit as exit_:
            if exit_.code not in (None, 0):  # sys.exit() and sys.exit(0) are success
                error = exit_
        except KeyboardInterrupt:
            raise  # Ctrl-C stops irtrace run too: no re-lowering for other targets
        except BaseException as raised:  # the script's own failure is reported after the traces
            error = raised
        finally:
            unregister_pass_instrumentation_tool(TOOL_NAME)
            sys.argv, sys.path[:] = saved_argv, saved_path
    # The script may have caught the bare RuntimeError that a Ctrl-C in a pass becomes.
    interrupts.raise_if_requested()
    return ScriptOutcome(session.runs, session.captured, error)


def lower_for_targets(
    captured: Sequence[CapturedKernel], targets: Sequence[TargetSpec], writer: TraceWriter
) -> list[KernelRun]:
    """Lower each captured kernel again for ``targets`` (the module as the script built it),
    except for the target the script already lowered it for."""
    from irtrace.targets import make_tvm_target

    runs = []
    for kernel in captured:
        for target in targets:
            if target.name == kernel.target:
                continue
            result = record_lowering(
                kernel.module,
                target,
                writer,
                kernel=kernel.kernel,
                spec=f"captured:{kernel.kernel}",
                pass_configs=kernel.pass_configs,
                tvm_target=make_tvm_target(target),
                threaded=False,
            )
            runs.append(result.run)
    return runs
