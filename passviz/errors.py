"""passviz's errors: subclasses of irtrace's, so the CLI renders them the same way; their codes are
in passviz's rows of ``irtrace.base.errors.EXIT_CODES``."""

from __future__ import annotations

from irtrace.base.errors import ExitCode, IrtraceError


class GraphvizMissingError(IrtraceError):
    """Graphviz's ``dot`` program is not installed, so a drawing cannot be rendered."""

    exit_code = ExitCode.ENVIRONMENT


class RenderError(IrtraceError):
    """Graphviz ran but failed to render the drawing."""

    exit_code = ExitCode.INPUT


class NothingToDrawError(IrtraceError):
    """The runs to draw failed before their first pass: the drawing holds only the failure."""

    exit_code = ExitCode.LOWERING
