"""``--override KERNEL=path.cu`` on ``irtrace record`` and ``irtrace run`` (see ``recording.override``)."""

from __future__ import annotations

import argparse
from collections.abc import Callable

from irtrace.base.errors import ExitCode, IrtraceError, UsageError
from irtrace.edge.command import echo

OVERRIDE_HELP = (
    "compile PATH (a complete device source, e.g. the run's kernel source edited) in place of the source "
    "TileLang generates for KERNEL (its name in the trace) on CUDA and HIP targets; the run's kernel source "
    "is then PATH's text, and an 'override' stage inside codegen holds TileLang's source before and PATH "
    "after; repeatable. A missing or unreadable PATH exits 3 before anything runs; a KERNEL that no "
    "compilation generated exits 8 once the trace is written"
)


def add_override_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--override", action="append", default=[], metavar="KERNEL=PATH", help=OVERRIDE_HELP)


def with_overrides(
    command: Callable[[argparse.Namespace], ExitCode],
) -> Callable[[argparse.Namespace], ExitCode]:
    """``command`` run with the ``--override`` sources in force; says which were never applied."""

    def run(args: argparse.Namespace) -> ExitCode:
        if not getattr(args, "override", None):
            return command(args)
        from irtrace.lowering.override import overriding, parse_overrides

        if getattr(args, "jobs", 1) > 1 or getattr(args, "isolate", False) or getattr(args, "timeout", None):
            raise UsageError(
                "--override replaces the source in this process; leave out --jobs, --isolate and --timeout"
            )
        overrides = parse_overrides(args.override)
        with overriding(overrides) as session:
            code = command(args)
        try:
            session.check_applied()
        except IrtraceError as error:
            echo(f"irtrace: error: {error.message}", stderr=True, one_line=True)
            return code if code != ExitCode.OK else error.exit_code
        return code

    return run
