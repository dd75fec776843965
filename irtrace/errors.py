"""Errors a user can act on, and the exit codes the CLI maps them to.

Every error carries one line saying what was wrong, where, and what would be right. Only the
CLI edge renders them; library callers catch ``IrtraceError``.
"""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    """Exit codes of every tool in tilelang-devtools (documented in ``--help``)."""

    OK = 0
    """Success."""
    USAGE = 2
    """Bad command line: unknown option, unknown target, bad argument literal."""
    INPUT = 3
    """The kernel file or trace file is missing or unreadable, or names no such kernel."""
    KERNEL_SOURCE = 4
    """The kernel file raised while being imported (syntax error, failing import)."""
    LOWERING = 5
    """A kernel failed to build or lower; the trace holds the failure and was still written."""
    TRACE_FORMAT = 6
    """A trace file is corrupt or written by a newer, unknown schema version."""
    SCRIPT = 7
    """`irtrace run`: the traced script itself failed; captured traces were kept."""
    NOT_FOUND = 8
    """A kernel, target or pass asked for is not in the trace."""
    INTERRUPTED = 130
    """Interrupted (Ctrl-C); what was recorded so far is kept."""


def exit_codes_help() -> str:
    """The exit-code table shown at the end of ``--help``."""
    rows = [f"  {code.value:>3}  {(code.__doc__ or '').strip()}" for code in ExitCode]
    return "exit codes:\n" + "\n".join(rows)


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


class LoweringError(IrtraceError):
    """A kernel failed to lower for a target."""

    exit_code = ExitCode.LOWERING


class TraceFormatError(IrtraceError):
    """A trace file cannot be read: corrupt, not a trace, or from a newer schema."""

    exit_code = ExitCode.TRACE_FORMAT


class NotInTraceError(IrtraceError):
    """A kernel, target or pass asked for is not in the trace."""

    exit_code = ExitCode.NOT_FOUND
