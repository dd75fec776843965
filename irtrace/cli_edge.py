"""What every tool's command line does the same way: one-line errors and reading trace files.

Errors are rendered here only: one line on stderr, the exit code the error carries, the
traceback with ``--debug``. Used by ``irtrace``, ``passdiff`` and ``passviz``.
"""

from __future__ import annotations

import sys
import traceback
from collections.abc import Callable

from irtrace.errors import ExitCode, IrtraceError
from irtrace.trace import Trace, load_trace


def run_command(tool: str, call: Callable[[], int], *, debug: bool, interrupted: str = "interrupted") -> int:
    """Run one command, turning errors a user can cause into a line on stderr and an exit code."""
    try:
        return int(call())
    except IrtraceError as error:
        if debug:
            traceback.print_exc()
        print(f"{tool}: error: {error.message}", file=sys.stderr)
        return int(error.exit_code)
    except KeyboardInterrupt:
        print(f"{tool}: {interrupted}", file=sys.stderr)
        return int(ExitCode.INTERRUPTED)
    except BrokenPipeError:  # the reader (say, `head`) went away: not an error
        return int(ExitCode.OK)


def load_trace_warning_if_cut(path: str, tool: str) -> Trace:
    """Load a trace; say on stderr when it was cut short, then go on with what it holds."""
    trace = load_trace(path)
    if trace.truncated:
        print(f"{tool}: warning: {path} was cut short; using what it holds", file=sys.stderr)
    return trace
