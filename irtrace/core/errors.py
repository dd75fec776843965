"""Errors a user can act on, and the exit codes the CLI maps them to.

Every error carries one line saying what was wrong, where, and what would be right. Only the
CLI edge renders them; library callers catch ``IrtraceError``.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import IntEnum


class ExitCode(IntEnum):
    """Exit codes of every tool in tilelang-devtools (documented in ``--help``)."""

    OK = 0
    USAGE = 2
    INPUT = 3
    KERNEL_SOURCE = 4
    LOWERING = 5
    TRACE_FORMAT = 6
    SCRIPT = 7
    NOT_FOUND = 8
    OUTPUT = 9
    ENVIRONMENT = 10
    INTERRUPTED = 130
    TERMINATED = 143


EXIT_CODE_MEANINGS: dict[int, str] = {
    ExitCode.OK: "success",
    ExitCode.USAGE: "bad command line: unknown option or target, an argument that is not a literal",
    ExitCode.INPUT: "a kernel, manifest, script or trace file is missing, or names no such kernel",
    ExitCode.KERNEL_SOURCE: "the kernel file raised while being imported (syntax error, failing import, "
    "sys.exit or a module-level argparse that exits); the other kernels were recorded",
    ExitCode.LOWERING: "a kernel failed to build or lower, crashed or timed out (--isolate, --timeout); "
    "the trace holds the failure and was written",
    ExitCode.TRACE_FORMAT: "a trace file is corrupt, not a trace, has a field of the wrong type, or is of a "
    "newer schema",
    ExitCode.SCRIPT: "irtrace run: the script failed: it raised, or exited with a non-zero status "
    "(sys.exit(N), os._exit(N)); the kernels it lowered were kept",
    ExitCode.NOT_FOUND: "a kernel, target, pass or kernel source asked for is not in the trace",
    ExitCode.OUTPUT: "the output cannot be written (-o is a folder or a device, another irtrace is writing "
    "it, disk full); an existing output is left as it was",
    ExitCode.ENVIRONMENT: "the installed TileLang release is outside the supported range, or lacks the "
    "target's backend (the message names the range)",
    ExitCode.INTERRUPTED: "interrupted (Ctrl-C); what was recorded so far is kept in OUTPUT.partial",
    ExitCode.TERMINATED: "terminated (SIGTERM); what was recorded so far is kept in OUTPUT.partial",
}


def exit_codes_help(meanings: Mapping[int, str] = EXIT_CODE_MEANINGS, heading: str = "exit codes:") -> str:
    """The exit-code table shown at the end of ``--help`` (each tool passes its own codes)."""
    rows = [f"  {int(code):>3}  {meaning}" for code, meaning in meanings.items()]
    return heading + "\n" + "\n".join(rows)


class IrtraceError(Exception):
    """Base error: ``message`` is the one line shown to the user."""

    exit_code: ExitCode = ExitCode.USAGE

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class UsageError(IrtraceError):
    """A command-line value is invalid (unknown target, argument that is not a literal)."""

    exit_code = ExitCode.USAGE


class InputError(IrtraceError):
    """A file is missing or holds no such kernel."""

    exit_code = ExitCode.INPUT


class KernelSourceError(IrtraceError):
    """The kernel's module raised while it was imported or its factory ran."""

    exit_code = ExitCode.KERNEL_SOURCE


class TraceFormatError(IrtraceError):
    """A trace file cannot be read: corrupt, not a trace, or from a newer schema."""

    exit_code = ExitCode.TRACE_FORMAT


class OutputError(IrtraceError):
    """The output file cannot be written: a folder, a device, held by another writer, disk full."""

    exit_code = ExitCode.OUTPUT


class NotInTraceError(IrtraceError):
    """A kernel, target or pass asked for is not in the trace."""

    exit_code = ExitCode.NOT_FOUND
