"""Errors a user can act on, and the exit codes of every tool in one table (``EXIT_CODES``).

Every error carries one line saying what was wrong, where, and what would be right. Only the
CLI edge renders them; library callers catch ``IrtraceError``. Each tool's ``--help`` renders its
rows of ``EXIT_CODES`` (``exit_codes_help``), so a code and its meaning are written once.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass
from enum import IntEnum


class ExitCode(IntEnum):
    """The codes irtrace's errors carry; each tool's meanings of them are its rows of ``EXIT_CODES``."""

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


class CheckExit(IntEnum):
    """``irtrace check``'s own exit codes, which CI jobs test: 0, 1 or 2."""

    CLEAN = 0
    GATED = 1
    ERROR = 2


class DiffOutcome(IntEnum):
    """What a successful ``passdiff`` comparison found, as diff(1) reports it."""

    SAME = 0
    """No difference (after normalization)."""
    DIFFERENT = 1
    """Differences found."""


IRTRACE = "irtrace"
"""Every ``irtrace`` command that has no rows of its own (``check``, ``resume`` and ``reduce`` do)."""


@dataclass(frozen=True)
class ExitRow:
    """One exit code as some commands use it: what it means there, and which commands return it."""

    code: int
    meaning: str
    commands: tuple[str, ...]
    """Tools (``passviz``) or commands (``irtrace check``) whose ``--help`` lists this row."""


EXIT_CODES: tuple[ExitRow, ...] = (
    ExitRow(ExitCode.OK, "success", (IRTRACE, "passviz")),
    ExitRow(
        CheckExit.CLEAN,
        "no change that the policy fails on (changes may still be reported)",
        ("irtrace check",),
    ),
    ExitRow(ExitCode.OK, "the resumed lowering finished; the new run is in OUTPUT", ("irtrace resume",)),
    ExitRow(
        ExitCode.OK,
        "reduced: the script is written and fails the same way as the recorded run",
        ("irtrace reduce",),
    ),
    ExitRow(DiffOutcome.SAME, "no difference (after normalization), as in diff(1)", ("passdiff",)),
    ExitRow(ExitCode.OK, "the client closed the connection", ("tilelang-mcp",)),
    ExitRow(0, "the client exited after a shutdown request", ("tilelang-lsp",)),
    ExitRow(
        CheckExit.GATED,
        "a change the policy fails on: a gated change (the reports say which)",
        ("irtrace check",),
    ),
    ExitRow(DiffOutcome.DIFFERENT, "differences found, as in diff(1)", ("passdiff",)),
    ExitRow(1, "the client exited without a shutdown request", ("tilelang-lsp",)),
    ExitRow(
        CheckExit.ERROR,
        "usage or input error: bad option, missing or unreadable trace, bad policy file, an output that "
        "cannot be written",
        ("irtrace check",),
    ),
    ExitRow(
        ExitCode.USAGE,
        "bad command line: unknown option or target, an argument that is not a literal",
        (IRTRACE,),
    ),
    ExitRow(
        ExitCode.USAGE,
        "bad command line, or a pass resume cannot start at (nested in another pass, codegen)",
        ("irtrace resume",),
    ),
    ExitRow(
        ExitCode.USAGE,
        "bad command line (no --kernel-file, a --budget that is not a positive number, several failed runs "
        "match), or the failure cannot be reduced: it did not happen in a pass, or no failed pass fails the "
        "same way when run alone (the message names each pass and why)",
        ("irtrace reduce",),
    ),
    ExitRow(
        ExitCode.USAGE,
        "bad command line (unknown option, --to before --pass, the same target twice)",
        ("passdiff",),
    ),
    ExitRow(
        ExitCode.USAGE,
        "bad command line: unknown option, an output that is not .svg, .png or .dot",
        ("passviz",),
    ),
    ExitRow(ExitCode.USAGE, "bad arguments", ("tilelang-mcp",)),
    ExitRow(2, "bad command line, or --tcp cannot listen or write its token file", ("tilelang-lsp",)),
    ExitRow(
        ExitCode.INPUT,
        "a kernel, manifest, script or trace file is missing, or names no such kernel",
        (IRTRACE,),
    ),
    ExitRow(
        ExitCode.INPUT,
        "the trace or the edited IR file is missing, or the IR is not TVMScript irtrace reads (a syntax "
        "error, a refused construct or TVM's parser error, with its line)",
        ("irtrace resume",),
    ),
    ExitRow(
        ExitCode.INPUT,
        "the trace or the kernel file is missing, or the file defines no such kernel",
        ("irtrace reduce",),
    ),
    ExitRow(ExitCode.INPUT, "a trace file is missing or unreadable", ("passdiff",)),
    ExitRow(
        ExitCode.INPUT, "a trace file is missing or unreadable, or Graphviz failed to render", ("passviz",)
    ),
    ExitRow(
        ExitCode.KERNEL_SOURCE,
        "the kernel file raised while being imported (syntax error, failing import, sys.exit or a "
        "module-level argparse that exits); the other kernels were recorded",
        (IRTRACE,),
    ),
    ExitRow(
        ExitCode.LOWERING,
        "a kernel failed to build or lower, crashed or timed out (--isolate, --timeout); the trace holds "
        "the failure and was written",
        (IRTRACE,),
    ),
    ExitRow(
        ExitCode.LOWERING,
        "the resumed lowering failed (the new run records where and why), or the pipeline did not run as "
        "recorded before the pass",
        ("irtrace resume",),
    ),
    ExitRow(
        ExitCode.LOWERING,
        "passdiff pass: the pass (or a pass of the span) failed; its error is shown",
        ("passdiff",),
    ),
    ExitRow(
        ExitCode.LOWERING,
        "passviz dot: every run drawn failed before its first pass; the drawing, which shows the failure, "
        "was written",
        ("passviz",),
    ),
    ExitRow(
        ExitCode.TRACE_FORMAT,
        "a trace file is corrupt, not a trace, has a field of the wrong type, or is of a newer schema",
        (IRTRACE, "irtrace resume", "irtrace reduce", "passdiff", "passviz"),
    ),
    ExitRow(
        ExitCode.SCRIPT,
        "irtrace run: the script failed: it raised, or exited with a non-zero status (sys.exit(N), "
        "os._exit(N)); the kernels it lowered were kept",
        (IRTRACE,),
    ),
    ExitRow(
        ExitCode.NOT_FOUND,
        "a kernel, target, pass or kernel source asked for is not in the trace",
        (IRTRACE,),
    ),
    ExitRow(ExitCode.NOT_FOUND, "a kernel or target asked for is not in the trace", ("passviz",)),
    ExitRow(
        ExitCode.NOT_FOUND,
        "the kernel, target or pass is not in the trace (a misspelt pass gets a suggestion)",
        ("irtrace resume",),
    ),
    ExitRow(
        ExitCode.NOT_FOUND,
        "no run that failed to lower matches the kernel and target in the trace",
        ("irtrace reduce",),
    ),
    ExitRow(
        ExitCode.NOT_FOUND,
        "a kernel, target or pass asked for is not in the trace, or a short pass name names passes of two "
        "namespaces (the message lists what is)",
        ("passdiff",),
    ),
    ExitRow(
        ExitCode.OUTPUT,
        "the output cannot be written (-o is a folder or a device, another irtrace is writing it, disk "
        "full); an existing output is left as it was",
        (IRTRACE, "irtrace resume", "irtrace reduce"),
    ),
    ExitRow(
        ExitCode.OUTPUT,
        "the output cannot be written (-o is a folder, a pipe or a device, disk full); an existing file is "
        "left as it was",
        ("passdiff", "passviz"),
    ),
    ExitRow(
        ExitCode.ENVIRONMENT,
        "the installed TileLang release is outside the supported range, or lacks what the command needs "
        "(the ascend backend before 0.1.15, irtrace run before 0.1.14); the one-line message says which",
        (IRTRACE, "irtrace resume", "irtrace reduce"),
    ),
    ExitRow(
        ExitCode.ENVIRONMENT, "Graphviz's `dot` program is not installed (install Graphviz)", ("passviz",)
    ),
    ExitRow(
        ExitCode.INTERRUPTED,
        "interrupted (Ctrl-C); what was recorded so far is kept in OUTPUT.partial",
        (IRTRACE,),
    ),
    ExitRow(
        ExitCode.INTERRUPTED,
        "interrupted (Ctrl-C)",
        ("irtrace check", "irtrace resume", "passdiff", "passviz"),
    ),
    ExitRow(ExitCode.INTERRUPTED, "interrupted (Ctrl-C); no script is written", ("irtrace reduce",)),
    ExitRow(
        ExitCode.TERMINATED,
        "terminated (SIGTERM); what was recorded so far is kept in OUTPUT.partial",
        (IRTRACE,),
    ),
    ExitRow(ExitCode.TERMINATED, "terminated (SIGTERM)", ("irtrace check",)),
)
"""Every exit code of every tool, once per tool or command: the one table each ``--help`` renders."""


def exit_rows(command: str) -> list[ExitRow]:
    """The rows ``command`` (a tool, or ``irtrace check``, ``resume``, ``reduce``) lists, by code."""
    rows = sorted((row for row in EXIT_CODES if command in row.commands), key=lambda row: row.code)
    if not rows:
        raise ValueError(f"no exit codes for {command!r} in EXIT_CODES")
    return rows


HELP_WIDTH = 100
"""Where the table's meanings wrap (argparse leaves an epilog's lines as they are)."""


def exit_codes_help(command: str = IRTRACE) -> str:
    """The exit-code table at the end of ``command``'s ``--help``, rendered from ``EXIT_CODES``."""
    rows = [
        textwrap.fill(
            row.meaning, HELP_WIDTH, initial_indent=f"  {int(row.code):>3}  ", subsequent_indent=" " * 7
        )
        for row in exit_rows(command)
    ]
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


class TraceFormatError(IrtraceError):
    """A trace file cannot be read: corrupt, not a trace, or from a newer schema."""

    exit_code = ExitCode.TRACE_FORMAT


class OutputError(IrtraceError):
    """The output file cannot be written: a folder, a device, held by another writer, disk full."""

    exit_code = ExitCode.OUTPUT


class NotInTraceError(IrtraceError):
    """A kernel, target or pass asked for is not in the trace."""

    exit_code = ExitCode.NOT_FOUND
