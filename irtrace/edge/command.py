"""What every tool's command line does the same way: one-line errors, reading trace files, text
that cannot drive the terminal, and keeping TileLang's known-harmless native warnings off the screen.

Errors are rendered here only: one line on stderr with control characters escaped, the exit code
the error carries, the traceback with ``--debug``. A reader that goes away (``| head``) ends the
command with exit 0. Used by ``irtrace``, ``passdiff`` and ``passviz``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import traceback
from collections.abc import Callable, Sequence
from typing import Any

from irtrace.base import interrupts
from irtrace.base.errors import ExitCode, IrtraceError
from irtrace.base.safe_text import terminal_safe
from irtrace.trace.model import STATUS_INCOMPLETE, Trace
from irtrace.trace.reader import load_trace


class Interrupted(KeyboardInterrupt):
    """An interrupt whose command has saved what it could; ``message`` says what and where."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def run_command(
    tool: str,
    call: Callable[[], int],
    *,
    debug: bool,
    interrupted: str = "interrupted",
    catch_signals: bool = False,
) -> int:
    """Run one command, turning errors a user can cause into a line on stderr and an exit code.

    With ``catch_signals``, SIGINT and SIGTERM are noted while the command runs
    (``irtrace.base.interrupts``), so a Ctrl-C that TVM turns into an error still stops it, and
    SIGTERM is handled like Ctrl-C (exit 143 instead of 130).
    """
    signals = interrupts.catching() if catch_signals else contextlib.nullcontext()
    try:
        with signals:
            code = int(call())
            sys.stdout.flush()  # a closed pipe is seen here, not at exit where it would be exit 120
            return code
    except IrtraceError as error:
        if debug:
            traceback.print_exc()
        echo(f"{tool}: error: {error.message}", stderr=True, one_line=True)
        return int(error.exit_code)
    except KeyboardInterrupt as interrupt:
        terminated = catch_signals and interrupts.received() == signal.SIGTERM
        message = interrupt.message if isinstance(interrupt, Interrupted) else interrupted
        if terminated:
            message = message.replace("interrupted", "terminated", 1)
        echo(f"{tool}: {message}", stderr=True, one_line=True)
        return int(ExitCode.TERMINATED if terminated else ExitCode.INTERRUPTED)
    except BrokenPipeError:  # the reader (say, `head`) went away: not an error
        _discard_stdout()
        return int(ExitCode.OK)
    except OSError as error:  # a file the command writes (passdiff -o, passviz dot -o): one line too
        if debug:
            traceback.print_exc()
        where = f"{error.filename}: " if error.filename else ""
        echo(f"{tool}: error: {where}{error.strerror or error}", stderr=True, one_line=True)
        return int(ExitCode.OUTPUT)
    except RecursionError:
        # Reading a trace checks every record; anything nested too deeply for Python that gets
        # past that is still a format problem, not a reason for a traceback.
        if debug:
            traceback.print_exc()
        print(f"{tool}: error: input nested too deeply to process", file=sys.stderr)
        return int(ExitCode.TRACE_FORMAT)


def run_subcommand(
    tool: str,
    parser: argparse.ArgumentParser,
    argv: Sequence[str] | None,
    call: Callable[[argparse.Namespace], int],
    **options: Any,
) -> int:
    """Parse ``argv`` and run its subcommand with ``run_command`` (``options`` go to it); with no
    subcommand, print the help and exit with the usage code."""
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return int(ExitCode.USAGE)
    return run_command(tool, lambda: call(args), debug=args.debug, **options)


def _discard_stdout() -> None:
    """Point stdout at /dev/null, so the text still buffered for the closed pipe goes nowhere
    when Python flushes it at exit (instead of a second BrokenPipeError and exit 120)."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)


def echo(text: str, *, stderr: bool = False, one_line: bool = False, end: str = "\n") -> None:
    """Print text that holds anything read from a trace (or a policy, or an error), with control
    characters escaped (``terminal_safe``); ``one_line`` escapes newlines too."""
    stream = sys.stderr if stderr else sys.stdout
    stream.write(terminal_safe(text, newlines=not one_line) + end)


def load_trace_warning_if_cut(path: str, tool: str, *, streamed: bool = False) -> Trace:
    """Load a trace and check every IR text against its SHA-256; say on stderr when it was cut
    short, then go on with what it holds. ``streamed``: its runs are read one at a time when
    iterated (``irtrace.trace.stream``), for commands that go through a corpus run by run."""
    if streamed:
        from irtrace.trace.stream import open_trace

        trace = open_trace(path).verify()
    else:
        trace = load_trace(path).verify()
    if trace.truncated:
        echo(f"{tool}: warning: {path} was cut short; using what it holds", stderr=True, one_line=True)
        for run in trace.runs:
            if run.status == STATUS_INCOMPLETE and run.running:
                where = f"{run.kernel} on {run.target}"
                echo(
                    f"{tool}: warning: {where} stopped while pass {run.running} was running",
                    stderr=True,
                    one_line=True,
                )
    return trace
