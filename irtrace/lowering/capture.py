"""``irtrace run -- python script.py``: capture every kernel a script lowers, without editing it.

A recorder is registered as a default TileLang instrumentation tool, so each compilation the
script starts (``tilelang.lower``, ``@tilelang.jit``, ``tilelang.compile``) gets its own run in
the trace. The script runs in this process as ``__main__``.

Processes the script starts (``os.fork``, ``multiprocessing`` with fork, spawn or forkserver)
never write into this process's file: each writes its runs to a part file of its own, and the
parts are merged into the trace when the script ends. ``os._exit`` in the script still finishes
the trace before the process ends.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import os
import runpy
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import TracebackType
from typing import Any, NoReturn

import msgspec

from irtrace.base import interrupts
from irtrace.base.errors import InputError, OutputError, TraceFormatError, UsageError
from irtrace.lowering import frontend_lines, no_gpu
from irtrace.lowering.instrumentation import require_instrumentation
from irtrace.lowering.jit_abi import as_jit_compiles_module
from irtrace.lowering.jit_calls import JitCall, current_call, current_instance, observe_jit_calls
from irtrace.lowering.launches import launch_values, observe_launches, write_launches
from irtrace.lowering.loader import CapturedKernel, KernelCall, source_as_imported
from irtrace.lowering.recorder import (
    CaptureOptions,
    LoweringOptions,
    PassRecorder,
    RunHeader,
    begin_run_record,
    describe_error,
    record_lowering,
)
from irtrace.lowering.tvm_targets import auto_target_fallback
from irtrace.targets.backends import DEFAULT_TARGET, TargetSpec, get_target, tvm_target_name
from irtrace.targets.specs import KernelSpec
from irtrace.trace.model import STATUS_FAILED, STATUS_INCOMPLETE, STATUS_OK, KernelRun, text_sha256
from irtrace.trace.reader import load_trace
from irtrace.trace.writer import TraceWriter

TOOL_NAME = "irtrace-capture"
GPU_SCRIPT_TARGET = DEFAULT_TARGET
"""What ``target="auto"`` means in a captured script on a machine without a GPU."""


def short_target_name(target: Any) -> str:
    """``cuda:sm_90`` for a TVM CUDA target with arch sm_90, and so on (``tvm_target_name``)."""
    if target is None:
        return "unknown"
    attrs = target.attrs
    arch = str(attrs["arch"]) if "arch" in attrs else None
    mcpu = str(attrs["mcpu"]) if "mcpu" in attrs else None
    return tvm_target_name(str(target.kind.name), arch, mcpu)


def captured_kernel_name(function_names: Sequence[str], call: JitCall | None) -> str:
    """The name a captured module's kernel is recorded under: the factory or ``@tilelang.jit``
    function that built it, as ``irtrace record factory.py::flashattn`` names it ``flashattn``
    whatever its ``@T.prim_func`` is called (``main``, ``main_no_split``), so a captured run and a
    recorded one of the same kernel pair up; without a known factory (a module-level PrimFunc,
    whose "factory" is the module), the module's first function's name."""
    factory = call.function if call is not None else None
    if factory and factory.isidentifier():
        return factory
    return function_names[0] if function_names else "kernel"


SOURCE_MAP_ENV = "IRTRACE_SOURCE_MAP"
"""Captured runs store source maps unless this is ``0`` (``irtrace run --no-source-map`` sets it
for the script and every process it starts): a capture is where people click a line."""


def source_maps_requested() -> bool:
    """Whether this process's captures store source maps (on unless ``IRTRACE_SOURCE_MAP=0``)."""
    return os.environ.get(SOURCE_MAP_ENV, "1").strip() != "0"


def kernel_file_of(mod: Any) -> str | None:
    """The text of the file the module's first function was written in (from the span TileLang's
    frontend set on it, read as the frontend read it), so that a captured run's report and views
    can show the author's lines as a recorded one's do; ``None`` when there is none."""
    from tilelang.ir import get_prim_func_span

    for _, func in mod.functions.items():
        span = get_prim_func_span(func) if hasattr(func, "body") else None
        if span is not None:
            file = Path(str(span.source_name.name))
            return source_as_imported(file) if file.is_absolute() and file.is_file() else None
    return None


class CaptureSession:
    """Owns the trace writer and the kernels captured while the script runs."""

    def __init__(self, writer: TraceWriter) -> None:
        self.writer = writer
        self.source_map = source_maps_requested()
        self.captured: list[CapturedKernel] = []
        self.runs: list[KernelRun] = []
        self.kernels: dict[int, CapturedKernel] = {}
        """The kernel of each run this process lowered, by run id (``--bench`` compiles it again)."""
        self.launched: dict[int, Any] = {}
        """The compiled kernels whose launches are counted (``observe_launches``), for a part capture."""

    def make_tool(self) -> CaptureRecorder:
        return CaptureRecorder(self)


class CaptureRecorder(PassRecorder):
    """A recorder that learns the kernel, target and configs from the first pass it sees."""

    def __init__(self, session: CaptureSession) -> None:
        # every record reaches the file before the next pass runs: a native crash loses nothing
        super().__init__(session.writer, None, CaptureOptions(threaded=False, source_map=session.source_map))
        self.session = session
        self.kernel = ""
        self.configs: dict[str, Any] = {}

    def begin_run(self, mod: Any) -> int:
        import tvm
        from tvm.target import Target

        call = current_call()
        self.kernel = captured_kernel_name([str(gv.name_hint) for gv in mod.functions], call)
        self.configs = {str(k): v for k, v in dict(tvm.transform.PassContext.current().config).items()}
        target = Target.current(allow_none=True)
        target_name = short_target_name(target)
        instance = current_instance()
        if no_gpu.active():  # never shown as a real GPU run
            instance = msgspec.structs.replace(instance, stand_in=True)
        captured = CapturedKernel(
            self.kernel,
            mod,
            pass_configs=self.configs,
            target=target_name,
            args=call.args if call is not None else {},
            instance=instance,
            function=next(iter(mod.functions), None),  # the function the name was taken from
        )
        run = begin_run_record(
            self.writer,
            target_name,
            self.kernel,
            captured.spec_text,
            captured.args or None,
            str(target) if target is not None else "",
            self.configs,
            instance=instance,
            kernel_file_text=kernel_file_of(mod),
        )
        self.session.captured.append(captured)
        self.session.kernels[run.run_id] = captured
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
            total_s=time.perf_counter() - self.t0,  # from the start of TileLang's compilation
            input_ir=self.input_sha,
            source_sha256=text_sha256(self.kernel_source) if self.kernel_source else None,
        )
        self.session.runs.append(run)


@dataclass
class ScriptOutcome:
    """What running the script gave: its runs and, if it failed, why."""

    runs: list[KernelRun]
    """Every captured run: this process's, then those of the processes the script started."""
    captured: list[CapturedKernel]
    """The kernels this process lowered (those of other processes cannot be lowered again)."""
    error: BaseException | None = None
    child_runs: int = 0
    """How many of ``runs`` were lowered in other processes."""
    warnings: list[str] = field(default_factory=list)
    kernels: dict[int, CapturedKernel] = field(default_factory=dict)
    """The kernel of each of this process's runs, by run id."""


class HardExit(SystemExit):
    """The script called ``os._exit(code)``; irtrace finished the trace before the process ended."""


def describe_script_failure(error: BaseException, stand_ins: bool = False) -> str:
    """How the script ended, in words: ``ValueError: ...``, ``it called os._exit(3)``...; with
    ``stand_ins``, a read of values only a GPU has says so and where."""
    if isinstance(error, HardExit):
        return f"it called os._exit({error.code})"
    if isinstance(error, SystemExit):
        if isinstance(error.code, int):
            return f"it exited with status {error.code} (sys.exit)"
        return f"it exited with status 1: {_first_line(str(error.code))}"
    message = _first_line(str(error))
    if isinstance(error, KeyboardInterrupt):
        return "it raised KeyboardInterrupt itself (no Ctrl-C was received)" + (
            f": {message}" if message else ""
        )
    described = f"{type(error).__name__}: {message or type(error).__name__}"
    why = no_gpu.why_values_stopped(error) if stand_ins else None
    if why is None:
        return described
    if no_gpu.values_shaped_call(error):  # PyTorch's words there are about its compiler's fake tensors
        return f"{type(error).__name__}: {why}"
    return f"{described} ({why})"


def _first_line(text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[0][:300] if lines else ""


class ProcessCapture:
    """Where the current process writes its runs while a script runs under ``irtrace run``.

    The process running ``irtrace`` (the owner) writes to the trace. Every other process the
    script starts writes its runs to a part file of its own in ``folder`` (a trace whose run ids
    start at 0) and holds a lock on it while it lives; the owner copies the parts into the trace
    when the script ends, renumbering the runs. A child killed while lowering leaves a run
    without an end: it is merged as cut short, and nothing else is lost.
    """

    def __init__(self, folder: Path, session: CaptureSession, owner_pid: int) -> None:
        self.folder = folder
        self.session = session
        self.owner_pid = owner_pid
        self.lock: int | None = None
        """A descriptor locking this process's part file while it lives."""
        self.on_os_exit: Callable[[int], int] | None = None
        """In the owner: finish the trace for ``os._exit(status)``, giving the exit status."""

    def in_child(self) -> bool:
        return os.getpid() != self.owner_pid

    def start_child(self) -> None:
        """In a new process: forget the parent's runs and file, and write a part of its own
        (named by start time, then pid, so that sorting the names gives the start order)."""
        if self.lock is not None:  # the lock on the part of the process this one was forked from
            with contextlib.suppress(OSError):
                os.close(self.lock)
            self.lock = None
        self.session.runs.clear()
        self.session.captured.clear()
        self.session.launched.clear()  # the parent's kernels: their launches are the parent's
        if not self.folder.is_dir():  # started after the script ended: nowhere left to merge from
            self.session.writer.restart_in_child(os.devnull)
            return
        part = self.folder / f"{time.time_ns():020d}-{os.getpid()}.jsonl"
        self.session.writer.restart_in_child(part)
        self.lock = os.open(part, os.O_RDONLY | os.O_CLOEXEC)
        fcntl.flock(self.lock, fcntl.LOCK_EX)

    def finish_child(self) -> None:
        """End this process's part with what its kernels were launched with and its footer: the
        process is ending."""
        with contextlib.suppress(Exception):
            write_launches(self.session.writer, self.session.launched)
        with contextlib.suppress(Exception):
            self.session.writer.close()

    def exit_child(self, error: BaseException | None) -> NoReturn:
        """A forked child came back from the script, where Python would end it: end its part
        and exit as Python would (a traceback and status 1 for an exception), never going on
        into irtrace's own work, which is the owner's."""
        self.finish_child()
        if error is None:
            raise SystemExit(0)
        if isinstance(error, SystemExit):
            raise error
        traceback.print_exception(type(error), error, _script_frames(error.__traceback__))
        raise SystemExit(130 if isinstance(error, KeyboardInterrupt) else 1)

    def merge_into(self, writer: TraceWriter) -> tuple[list[KernelRun], list[str]]:
        """Copy every part's runs into ``writer`` (in the order the processes started), then
        remove the parts; returns the runs as written and warnings for the user."""
        runs: list[KernelRun] = []
        warnings: list[str] = []
        for part in sorted(self.folder.glob("*.jsonl")):
            pid = part.stem.rpartition("-")[2]
            still_running = _is_locked(part)
            try:
                trace = load_trace(part)
                runs += [writer.add_run(run, trace.texts) for run in trace.runs]
            except TraceFormatError as error:
                warnings.append(
                    f"the runs of process {pid} cannot be read, so they are left in {part}: {error}"
                )
                continue
            if still_running and any(run.status == STATUS_INCOMPLETE for run in trace.runs):
                warnings.append(
                    f"process {pid} was still lowering when the script ended; its last run is kept, cut short"
                )
            with contextlib.suppress(OSError):
                part.unlink()
        with contextlib.suppress(OSError):
            self.folder.rmdir()
        return runs, warnings


def _is_locked(part: Path) -> bool:
    """Whether the process that writes ``part`` is still alive (it holds the part's lock)."""
    try:
        fd = os.open(part, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        os.close(fd)
    return False


def _script_frames(tb: TracebackType | None) -> TracebackType | None:
    """The traceback from the script's own frames on, as Python would print it."""
    while tb is not None and tb.tb_frame.f_globals.get("__name__") in (__name__, "runpy"):
        tb = tb.tb_next
    return tb


# ----------------------------------------------------------------------------- process hooks

_CAPTURE: ProcessCapture | None = None
"""This process's capture while a script runs (copied into forked children)."""
_REAL_EXIT = os._exit
_HOOKS_INSTALLED = False
_SPAWNED_CONTEXT = contextlib.ExitStack()
"""What a spawned process keeps entered for its whole life (the auto-target fallback)."""


def _after_fork_in_child() -> None:
    if _CAPTURE is not None:
        interrupts.release_in_child()
        _CAPTURE.start_child()


def _exit_through_capture(status: int) -> NoReturn:
    """``os._exit`` while a script is captured: the owner finishes the trace first (and exits
    with irtrace's status); another process ends its part with a footer."""
    capture = _CAPTURE
    if capture is not None and capture.in_child():
        capture.finish_child()
    elif capture is not None and capture.on_os_exit is not None:
        try:
            status = capture.on_os_exit(status)
        except BaseException:  # a bug here must not turn the script's exit into an exception
            traceback.print_exc()
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
    _REAL_EXIT(status)


def _install_process_hooks() -> None:
    """Once per process: forked children get their own part, and ``os._exit`` goes through
    ``_exit_through_capture`` (it does nothing more than ``os._exit`` while nothing is captured)."""
    global _HOOKS_INSTALLED
    if not _HOOKS_INSTALLED:
        os.register_at_fork(after_in_child=_after_fork_in_child)
        _HOOKS_INSTALLED = True
    os._exit = _exit_through_capture


class _SpawnedCapture:
    """Sent along with what ``multiprocessing`` gives a spawned (or forkserver) child: unpickling
    it there, before the script's main module is imported, starts that child's capture."""

    def __init__(self, folder: Path, target: str, owner_pid: int) -> None:
        self.args = (str(folder), target, owner_pid)

    def __reduce__(self) -> tuple[Callable[[str, str, int], None], tuple[str, str, int]]:
        return (capture_spawned_process, self.args)


def start_part_capture(folder: Path, owner_pid: int, target: TargetSpec | None = None) -> ProcessCapture:
    """Capture every lowering of this process into a part file of its own in ``folder`` (locked
    while the process lives, ended with a footer at exit or ``os._exit``; forked children get
    parts of their own). ``owner_pid`` is the process that merges the parts, which writes none.
    With ``IRTRACE_NO_GPU=1`` the process's GPU work runs on stand-ins (``no_gpu``), and
    ``target="auto"`` means ``target`` (default ``cuda:sm_90a``) where TileLang finds no GPU."""
    global _CAPTURE
    from tilelang.instrumentation import register_pass_instrumentation_tool

    frontend_lines.install()
    if no_gpu.requested() and not no_gpu.active():
        stand_in_target = target or get_target(GPU_SCRIPT_TARGET)
        if target is None:  # a spawned process has its fallback already
            _SPAWNED_CONTEXT.enter_context(auto_target_fallback(stand_in_target))
        _SPAWNED_CONTEXT.enter_context(no_gpu.gpu_stand_ins(stand_in_target))
    session = CaptureSession(TraceWriter())
    capture = ProcessCapture(folder, session, owner_pid)
    capture.start_child()
    _SPAWNED_CONTEXT.enter_context(observe_jit_calls())  # the calls' arguments, for the whole process
    launched = _SPAWNED_CONTEXT.enter_context(observe_launches(lambda: set(session.kernels)))
    session.launched = launched  # the same dict, filled as kernels are compiled
    register_pass_instrumentation_tool(TOOL_NAME, session.make_tool)
    _CAPTURE = capture
    _install_process_hooks()
    atexit.register(capture.finish_child)  # spawned workers end through sys.exit
    return capture


def capture_spawned_process(folder: str, target: str, owner_pid: int) -> None:
    """In a process the script spawned: capture its lowerings into a part file too."""
    try:
        spec = get_target(target)
        _SPAWNED_CONTEXT.enter_context(auto_target_fallback(spec))
        start_part_capture(Path(folder), owner_pid, spec)
    except Exception as error:  # the script's process must run on, captured or not
        print(
            f"irtrace: warning: kernels lowered in process {os.getpid()} are not captured: {error}",
            file=sys.stderr,
        )


@contextlib.contextmanager
def _spawned_processes_captured(folder: Path, target: TargetSpec, owner_pid: int) -> Iterator[None]:
    """While active, processes ``multiprocessing`` spawns (spawn and forkserver) capture too."""
    import multiprocessing.spawn as spawn

    original = spawn.get_preparation_data

    def with_capture(name: str) -> dict[str, Any]:
        data = original(name)
        data["irtrace_capture"] = _SpawnedCapture(folder, target.name, owner_pid)  # prepare() ignores it
        return data

    spawn.get_preparation_data = with_capture
    try:
        yield
    finally:
        spawn.get_preparation_data = original


def _parts_folder(writer: TraceWriter) -> Path:
    """A new folder for the parts: beside the trace being written, else a temporary one."""
    partial = writer.partial_path
    try:
        if partial is None:
            return Path(tempfile.mkdtemp(prefix="irtrace-processes-"))
        return Path(tempfile.mkdtemp(prefix=partial.name + ".processes-", dir=partial.parent))
    except OSError as error:
        raise OutputError(f"cannot make a folder for the runs of the script's processes: {error}") from None


def _end_script_processes() -> None:
    """Do now what Python does at exit for ``multiprocessing``: end the daemonic workers (a pool
    never closed) and wait for the other children, so their parts are complete when merged."""
    util = sys.modules.get("multiprocessing.util")
    exit_function = getattr(util, "_exit_function", None)  # the function Python's atexit runs
    if exit_function is not None:
        exit_function()


# ----------------------------------------------------------------------------- running


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
    command: Sequence[str],
    writer: TraceWriter,
    auto_target: TargetSpec | None = None,
    on_os_exit: Callable[[ScriptOutcome], int] | None = None,
    stand_ins: bool = False,
) -> ScriptOutcome:
    """Run the script as ``__main__`` with every lowering captured into ``writer``.

    ``target="auto"`` in the script means ``auto_target`` when TileLang finds no GPU, so a script
    written for a GPU machine lowers its kernels anywhere. The default is ``cuda:sm_90a``, what
    TileLang detects on an H100 or H200 (its warp-specialized kernels need the ``a`` features).
    Runs lowered in processes the script starts are merged in when it ends. If the script calls
    ``os._exit``, ``on_os_exit`` gets the outcome and gives the status the process ends with.
    With ``stand_ins`` (``--no-gpu``) the script's GPU work, here and in the processes it starts
    (``IRTRACE_NO_GPU=1``), runs on stand-ins: every kernel is lowered, none is launched.
    """
    global _CAPTURE
    kind, target, args = split_command(command)
    os.environ["TILELANG_DISABLE_CACHE"] = "1"  # a cached kernel would lower nothing to capture
    require_instrumentation("irtrace run")  # TileLang attaches our tool to the script's compilations
    from tilelang.instrumentation import (
        register_pass_instrumentation_tool,
        unregister_pass_instrumentation_tool,
    )

    fallback = auto_target or get_target(GPU_SCRIPT_TARGET)
    frontend_lines.install()
    session = CaptureSession(writer)
    capture = ProcessCapture(_parts_folder(writer), session, os.getpid())
    saved_argv, saved_path = sys.argv[:], sys.path[:]
    stack = contextlib.ExitStack()

    launched: list[dict[int, Any]] = []
    """The kernels ``observe_launches`` counts launches of (one dict, once entered)."""

    def stop_capturing() -> None:
        global _CAPTURE
        _CAPTURE = None
        os._exit = _REAL_EXIT
        stack.close()
        unregister_pass_instrumentation_tool(TOOL_NAME)
        sys.argv, sys.path[:] = saved_argv, saved_path
        for kernels in launched:  # what each kernel was launched with
            written = write_launches(writer, kernels)
            session.runs[:] = [written.get(run.run_id, run) for run in session.runs]
            for run_id, values in launch_values(kernels).items():
                if run_id in session.kernels and values:
                    session.kernels[run_id] = replace(session.kernels[run_id], launch_values=values)
        launched.clear()

    def outcome(error: BaseException | None) -> ScriptOutcome:
        child_runs, warnings = capture.merge_into(writer)
        return ScriptOutcome(
            session.runs + child_runs,
            session.captured,
            error,
            len(child_runs),
            warnings,
            dict(session.kernels),
        )

    def finish_at_os_exit(status: int) -> int:
        stop_capturing()
        result = outcome(HardExit(status) if status != 0 else None)
        return on_os_exit(result) if on_os_exit is not None else status

    capture.on_os_exit = finish_at_os_exit
    register_pass_instrumentation_tool(TOOL_NAME, session.make_tool)
    _CAPTURE = capture
    _install_process_hooks()
    try:
        stack.enter_context(auto_target_fallback(fallback))
        if stand_ins:
            os.environ[no_gpu.NO_GPU_ENV] = "1"  # for the processes it starts
            stack.enter_context(no_gpu.gpu_stand_ins(fallback))
        stack.enter_context(observe_jit_calls())
        launched.append(stack.enter_context(observe_launches(lambda: set(session.kernels))))
        stack.enter_context(_spawned_processes_captured(capture.folder, fallback, capture.owner_pid))
    except BaseException:
        stop_capturing()
        raise
    error: BaseException | None = None
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
    except BaseException as raised:  # the script's own failure is reported after the traces
        error = raised
    if capture.in_child():  # a forked child came back from the script: it ends here
        capture.exit_child(error)
    stop_capturing()
    # A KeyboardInterrupt is a Ctrl-C only if irtrace received one (or cannot tell): a script
    # raising it itself has failed, like any other exception.
    ctrl_c = isinstance(error, KeyboardInterrupt) and (
        interrupts.received() is not None or not interrupts.noting()
    )
    try:
        if not ctrl_c and interrupts.received() is None:
            _end_script_processes()
    finally:  # a Ctrl-C while waiting for them still keeps what they wrote
        result = outcome(error)
    if ctrl_c and isinstance(error, KeyboardInterrupt):
        raise error  # Ctrl-C stops irtrace run too: no re-lowering for other targets
    # The script may have caught the bare RuntimeError that a Ctrl-C in a pass becomes.
    interrupts.raise_if_requested()
    return result


def lower_for_targets(
    captured: Sequence[CapturedKernel],
    targets: Sequence[TargetSpec],
    writer: TraceWriter,
    kernels: dict[int, CapturedKernel] | None = None,
) -> list[KernelRun]:
    """Lower each captured kernel again for ``targets`` (the module as the script built it) to
    kernel source, as ``irtrace record`` does (no device compiler runs), except for the target
    the script already lowered it for. ``kernels`` gets the kernel of each new run."""
    from irtrace.lowering.tvm_targets import make_tvm_target

    runs = []
    for kernel in captured:
        built = kernel.build(KernelCall(), KernelSpec(kernel.spec_text))
        module, configs = built.func, built.pass_configs
        for target in targets:
            if target.name == kernel.target:
                continue
            tvm_target = make_tvm_target(target)
            result = record_lowering(
                as_jit_compiles_module(module, tvm_target, kernel.name),
                writer,
                RunHeader(kernel.name, kernel.spec_text, kernel.args or None, instance=kernel.instance),
                LoweringOptions(
                    target,
                    tvm_target,
                    configs,
                    capture=CaptureOptions(threaded=False, source_map=source_maps_requested()),
                ),
            )
            runs.append(result.run)
            if kernels is not None:
                kernels[result.run.run_id] = kernel
    return runs
