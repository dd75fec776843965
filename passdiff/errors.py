"""passdiff's errors and exit codes.

Errors reuse irtrace's hierarchy (one base, ``IrtraceError``), so a missing kernel, target or pass
is a ``NotInTraceError`` and a trace of a newer schema a ``TraceFormatError``; only the
"differences found" outcome is passdiff's own, following diff(1).
"""

from __future__ import annotations

from enum import IntEnum

from irtrace.core.errors import ExitCode, IrtraceError, NotInTraceError, TraceFormatError, UsageError
from irtrace.core.errors import exit_codes_help as exit_code_table

__all__ = [
    "DiffOutcome",
    "ExitCode",
    "IrtraceError",
    "NotInTraceError",
    "PassdiffError",
    "TraceFormatError",
    "UsageError",
    "exit_codes_help",
]


class DiffOutcome(IntEnum):
    """What a successful comparison found, as diff(1) reports it."""

    SAME = 0
    """No difference (after normalization)."""
    DIFFERENT = 1
    """Differences found."""


class PassdiffError(UsageError):
    """A request that cannot be answered as asked (``--to`` pass before ``--pass``)."""


EXIT_CODE_MEANINGS: dict[int, str] = {
    DiffOutcome.SAME: "no difference (after normalization)",
    DiffOutcome.DIFFERENT: "differences found",
    ExitCode.USAGE: "bad command line (unknown option, --to before --pass)",
    ExitCode.LOWERING: "passdiff pass: the pass (or a pass of the span) failed; its error is shown",
    ExitCode.INPUT: "a trace file is missing or unreadable",
    ExitCode.TRACE_FORMAT: "a trace file is corrupt or of a newer, unknown schema version",
    ExitCode.NOT_FOUND: "a kernel, target or pass asked for is not in the trace, or a short pass name "
    "names passes of two namespaces (the message lists what is)",
    ExitCode.OUTPUT: "-o cannot be written (a folder, a pipe or a device, disk full); an existing file is "
    "left as it was",
    ExitCode.INTERRUPTED: "interrupted (Ctrl-C)",
}
"""Every exit code of ``passdiff``; enum members carry no docstrings of their own at runtime."""


def exit_codes_help() -> str:
    """The exit-code table at the end of ``passdiff --help``."""
    return exit_code_table(EXIT_CODE_MEANINGS, "exit codes (0 and 1 as in diff(1)):")
