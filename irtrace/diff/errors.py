"""passdiff's errors and exit codes.

Errors reuse irtrace's hierarchy (one base, ``IrtraceError``), so a missing kernel, target or pass
is a ``NotInTraceError`` and a trace of a newer schema a ``TraceFormatError``; only the
"differences found" outcome is passdiff's own, following diff(1). Its codes are passdiff's rows of
``irtrace.base.errors.EXIT_CODES``, which ``passdiff --help`` renders.
"""

from __future__ import annotations

from irtrace.base.errors import (
    DiffOutcome,
    ExitCode,
    IrtraceError,
    NotInTraceError,
    TraceFormatError,
    UsageError,
)

__all__ = [
    "DiffOutcome",
    "ExitCode",
    "IrtraceError",
    "NotInTraceError",
    "PassdiffError",
    "TraceFormatError",
    "UsageError",
]


class PassdiffError(UsageError):
    """A request that cannot be answered as asked (``--to`` pass before ``--pass``)."""
