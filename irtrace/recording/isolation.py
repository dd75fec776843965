"""``irtrace record --isolate`` and ``--timeout``: each kernel built and lowered in a child process.

The child is forked from the recording process once the kernel's module is loaded and its
arguments are evaluated, so it starts with TileLang imported and costs no new interpreter. It
writes its records to a file of its own (``NAME.partial.kernel`` beside the output), flushed line
by line; the parent copies them into the trace when the child ends, whichever way it ends. A
child that dies (a segmentation fault in a pass) or is killed at ``--timeout`` leaves a failed
run that names the pass that was running, and recording goes on with the next kernel.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from irtrace.core import interrupts
from irtrace.core.errors import ExitCode, IrtraceError
from irtrace.core.trace import (
    STATUS_FAILED,
    STATUS_INCOMPLETE,
    STOPPED_BY_CRASH,
    STOPPED_BY_TIMEOUT,
    KernelRun,
)
from irtrace.core.trace_writer import TraceWriter

if TYPE_CHECKING:
    from irtrace.recording.api import LoweringUnit
    from irtrace.recording.loader import KernelCall


class ChildError(IrtraceError):
    """An error the child process reported, with the exit code it carries."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = ExitCode(exit_code)


def record_in_child(
    unit: LoweringUnit,
    call: KernelCall,
    writer: TraceWriter,
    *,
    timeout: float | None,
    stop_after: Sequence[str] = (),
) -> list[KernelRun]:
    """Build and lower ``unit`` in a forked child; its runs, copied into ``writer``."""
    from irtrace.recording.api import build_unit, record_prepared

    def job(child_writer: TraceWriter) -> None:
        record_prepared(build_unit(unit, call), child_writer, stop_after=stop_after)

    runs, outcome = run_in_child(job, writer, timeout=timeout)
    if outcome.interrupted:
        raise KeyboardInterrupt
    if outcome.error is not None:
        raise outcome.error
    if outcome.stopped_by is None:
        return runs
    if not any(run.status == STATUS_INCOMPLETE for run in runs):  # it died while building the kernel
        from irtrace.recording.recorder import begin_run_record

        name = unit.request.name or unit.kernel.name
        target_detail = str(unit.tvm_target)
        runs = [
            *runs,
            begin_run_record(
                writer, unit.target.name, name, unit.spec.text, call.args_json(), target_detail, {}
            ),
        ]
    return end_stopped_runs(writer, runs, outcome, timeout)


def end_stopped_runs(
    writer: TraceWriter, runs: Sequence[KernelRun], outcome: ChildOutcome, timeout: float | None
) -> list[KernelRun]:
    """The runs of a child that was killed at ``timeout`` or died: the ones it ended as they are,
    each one it left open ended as failed, naming the pass that was running."""
    ended = [run for run in runs if run.status != STATUS_INCOMPLETE]
    for run in runs:
        if run.status != STATUS_INCOMPLETE:
            continue
        running = _running_pass(writer, run)
        where = f"while pass {running} was running" if running else "while the kernel was being built"
        if outcome.stopped_by == STOPPED_BY_TIMEOUT:
            error = f"timed out after {timeout:g} s {where}; the lowering process was killed"
        else:
            error = f"the lowering process died {where}: {outcome.death}"
        ended.append(
            writer.end_run(
                run.run_id,
                status=STATUS_FAILED,
                error=error,
                total_s=outcome.elapsed_s,
                input_ir=run.passes[0].ir_before if run.passes else None,
                source_sha256=None,
                running=running,
                stopped_by=outcome.stopped_by,
            )
        )
    return ended


def _running_pass(writer: TraceWriter, run: KernelRun) -> str | None:
    done = {record.index for record in writer.run(run.run_id).passes}
    started = {i: name for i, name in writer.started_passes(run.run_id).items() if i not in done}
    return started[max(started)] if started else None


@dataclass
class ChildOutcome:
    """How a child ended: normally, with an error it reported, interrupted, crashed or timed out."""

    error: BaseException | None = None
    """An error the child reported (re-raised by the caller)."""
    interrupted: bool = False
    stopped_by: str | None = None
    """``crash`` or ``timeout``."""
    death: str = ""
    """What killed it, in words (``SIGSEGV (Segmentation fault)``)."""
    elapsed_s: float = 0.0


def run_in_child(
    job: Callable[[TraceWriter], object], writer: TraceWriter, *, timeout: float | None
) -> tuple[list[KernelRun], ChildOutcome]:
    """Run ``job(writer)`` in a forked child writing to a file of its own; copy what it wrote.

    The runs the child began are returned as they stand in ``writer`` (one it did not end is
    still ``incomplete``); the outcome says how it ended.
    """
    if writer.partial_path is not None:  # beside the output, where a user watching it looks
        scratch = str(writer.partial_path) + ".kernel"
        Path(scratch).write_bytes(b"")
    else:
        handle, scratch = tempfile.mkstemp(prefix="irtrace-kernel-", suffix=".jsonl")
        os.close(handle)
    read_end, write_end = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    began = time.monotonic()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        _child(job, writer, scratch, read_end, write_end)
    os.close(write_end)
    outcome = ChildOutcome()
    reply = b""
    try:
        try:
            reply, timed_out = _read_until_exit(read_end, None if timeout is None else began + timeout)
            if timed_out:
                os.kill(pid, signal.SIGKILL)
                outcome.stopped_by = STOPPED_BY_TIMEOUT
            _, status = os.waitpid(pid, 0)
        except BaseException:  # Ctrl-C or SIGTERM here: stop the child, keep what it wrote
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
            outcome.interrupted = True
            status = 0
        outcome.elapsed_s = time.monotonic() - began
        runs = writer.adopt(_complete_lines(Path(scratch)), scratch)
    finally:
        os.close(read_end)
        with contextlib.suppress(OSError):
            os.unlink(scratch)
    if outcome.interrupted:
        return runs, outcome
    message = _decode_reply(reply)
    if outcome.stopped_by is None and not message:
        outcome.stopped_by = STOPPED_BY_CRASH
        outcome.death = _describe_status(status)
    elif message.get("interrupted"):
        outcome.interrupted = True
    elif "error" in message:
        outcome.error = ChildError(str(message["error"]), int(message.get("exit_code", ExitCode.USAGE)))
    elif "internal" in message:
        outcome.error = RuntimeError(f"the lowering process failed: {message['internal']}")
    return runs, outcome


def _child(
    job: Callable[[TraceWriter], object], writer: TraceWriter, scratch: str, read_end: int, write_end: int
) -> None:
    code = 0
    try:
        os.close(read_end)
        writer.redirect(scratch)
        try:
            job(writer)
            reply: dict[str, Any] = {"ok": True}
        except IrtraceError as error:
            reply = {"error": error.message, "exit_code": int(error.exit_code)}
        except KeyboardInterrupt:
            reply = {"interrupted": True}
        except BaseException as error:  # a bug: say what it was, as the parent would have
            traceback.print_exc()
            reply = {"internal": f"{type(error).__name__}: {error}"}
        if interrupts.received() is not None:
            reply = {"interrupted": True}
        data = json.dumps(reply).encode("utf-8")
        while data:
            data = data[os.write(write_end, data) :]
    except BaseException:
        code = 1
    finally:
        with contextlib.suppress(BaseException):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)  # no atexit handlers, no finalizers: the parent's files stay as they are


def _read_until_exit(read_end: int, deadline: float | None) -> tuple[bytes, bool]:
    """Everything the child writes to the pipe until it exits; ``True`` when the deadline passed."""
    chunks: list[bytes] = []
    while True:
        remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
        ready, _, _ = select.select([read_end], [], [], remaining)
        if not ready:
            return b"".join(chunks), True
        chunk = os.read(read_end, 65536)
        if not chunk:
            return b"".join(chunks), False
        chunks.append(chunk)


def _decode_reply(reply: bytes) -> dict[str, Any]:
    try:
        message = json.loads(reply.decode("utf-8")) if reply else {}
    except ValueError:
        return {}
    return message if isinstance(message, dict) else {}


def _complete_lines(path: Path) -> list[str]:
    """The lines the child finished writing (a line cut by its death is dropped)."""
    try:
        data = path.read_bytes()
    except OSError:
        return []
    return data.decode("utf-8", errors="replace").split("\n")[:-1]


def _describe_status(status: int) -> str:
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        try:
            name = signal.Signals(number).name
        except ValueError:
            name = f"signal {number}"
        return f"{name} ({signal.strsignal(number) or 'signal'})"
    if os.WIFEXITED(status):
        return f"it exited with code {os.WEXITSTATUS(status)} without reporting"
    return f"status {status}"
