"""passviz's errors: subclasses of irtrace's, so the CLI renders them the same way."""

from __future__ import annotations

from irtrace.core.errors import ExitCode, IrtraceError


class GraphvizMissingError(IrtraceError):
    """Graphviz's ``dot`` program is not installed, so a drawing cannot be rendered."""

    # irtrace's ExitCode has no code for a missing program yet; a missing input is the closest.
    exit_code = ExitCode.INPUT


class RenderError(IrtraceError):
    """Graphviz ran but failed to render the drawing."""

    exit_code = ExitCode.INPUT


class NothingToDrawError(IrtraceError):
    """The runs to draw failed before their first pass: the drawing holds only the failure."""

    exit_code = ExitCode.LOWERING


PASSVIZ_EXIT_MEANINGS: dict[int, str] = {
    ExitCode.OK: "success",
    ExitCode.USAGE: "bad command line: unknown option, an output that is not .svg, .png or .dot",
    ExitCode.INPUT: "a trace file is missing or unreadable, or Graphviz's `dot` program is missing "
    "(install Graphviz) or failed to render",
    ExitCode.LOWERING: "passviz dot: every run drawn failed before its first pass; the drawing, which "
    "shows the failure, was written",
    ExitCode.TRACE_FORMAT: "a trace file is corrupt, not a trace, has a field of the wrong type, or is of "
    "a newer schema",
    ExitCode.NOT_FOUND: "a kernel or target asked for is not in the trace",
    ExitCode.OUTPUT: "the output cannot be written (-o is a folder, a pipe or a device, disk full); an "
    "existing file is left as it was",
    ExitCode.INTERRUPTED: "interrupted (Ctrl-C)",
}
"""Every exit code of ``passviz``, shown at the end of its ``--help``."""
