"""``irtrace run`` stops within seconds of SIGTERM, whatever the script is doing.

Python runs a signal handler only between bytecodes of the main thread, so a script inside a long C
call (a regex, ``sum(range(...))``, a native library holding the GIL) would keep irtrace from
seeing SIGTERM until the call returns: minutes, in one report. The script therefore runs in a
forked child (which does everything ``irtrace run`` did before: captures, writes the trace,
prints the summary), and this process, which runs no script code, only waits for it. A SIGTERM
here is passed on; a child that has not ended ``GRACE_S`` later is killed, and its trace stays
in ``NAME.partial``, cut short.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path

from irtrace.base import interrupts
from irtrace.base.errors import ExitCode

GRACE_S = 3.0
"""How long the child has to save its trace after the signal before it is killed (the issue's
bound is 5 s for the whole stop)."""


FORWARD_CTRL_C_AFTER_S = 1.0


def run_in_child(work: Callable[[], int], partial: Path, *, grace_s: float = GRACE_S) -> ExitCode:
    """Run ``work`` in a forked child and give its exit code; see the module's docstring.
    ``partial`` is where the child's trace stays if it must be killed (named in the message)."""
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # the child: never returns into the caller
        # the signals as they were before the parent's ``catching``: the child's own catching
        # then keeps the script's handlers to give back to what the script forks (a pool's SIGTERM
        # ends its workers quietly), not the parent's handler that raises
        interrupts.release_in_child()
        code = 1
        try:
            code = work()
        except SystemExit as exit_:
            code = exit_.code if isinstance(exit_.code, int) else 1
        except BaseException:
            traceback.print_exc()
        finally:
            for stream in (sys.stdout, sys.stderr):
                with contextlib.suppress(Exception):
                    stream.flush()
            os._exit(code)
    return _wait_for(pid, partial, grace_s)


def _wait_for(pid: int, partial: Path, grace_s: float) -> ExitCode:
    """The parent's side: wait; on SIGTERM (or Ctrl-C), pass it on and end the child in time."""
    try:
        return _status_code(_wait_blocking(pid))
    except KeyboardInterrupt:
        pass
    terminated = interrupts.received() == signal.SIGTERM
    # A Ctrl-C at a terminal reaches the child too (one process group): it is passed on only if
    # the child has not ended a moment later, i.e. when it was sent to irtrace alone.
    passed_on: float | None = time.monotonic() + (0.0 if terminated else FORWARD_CTRL_C_AFTER_S)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        with contextlib.suppress(KeyboardInterrupt):  # a second signal changes nothing
            if passed_on is not None and time.monotonic() >= passed_on:
                passed_on = None
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGTERM if terminated else signal.SIGINT)
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                return _status_code(status)
            time.sleep(0.02)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    while True:
        with contextlib.suppress(KeyboardInterrupt):
            os.waitpid(pid, 0)
            break
    for folder in partial.parent.glob(partial.name + ".processes-*"):  # the script's empty parts folder
        with contextlib.suppress(OSError):
            folder.rmdir()
    word = "terminated" if terminated else "interrupted"
    where = f"the runs begun so far are in {partial} (cut short)" if partial.exists() else "no run was kept"
    print(
        f"irtrace: {word}; the script did not stop within {grace_s:g} s (a long call outside Python?), "
        f"so it was killed; {where}",
        file=sys.stderr,
        flush=True,
    )
    return ExitCode.TERMINATED if terminated else ExitCode.INTERRUPTED


def _wait_blocking(pid: int) -> int:
    while True:
        done, status = os.waitpid(pid, 0)
        if done:
            return status


def _status_code(status: int) -> ExitCode:
    """The child's exit code, one of irtrace's; a child that died otherwise (a native crash in the
    script, which the child's own handlers could not report) is the script's failure."""
    if os.WIFEXITED(status) and os.WEXITSTATUS(status) in ExitCode._value2member_map_:
        return ExitCode(os.WEXITSTATUS(status))
    if os.WIFSIGNALED(status):
        name = signal.Signals(os.WTERMSIG(status)).name
        print(f"irtrace: error: the script's process died from {name}", file=sys.stderr, flush=True)
    return ExitCode.SCRIPT
