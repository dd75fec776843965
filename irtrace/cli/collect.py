"""``irtrace collect OUT``: fold into a trace the runs that ``IRTRACE=OUT`` capture left in part
files, those of processes still running when their session's first process exited."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from irtrace.base.errors import ExitCode, InputError, exit_codes_help
from irtrace.edge.command import echo


def add_collect_command(commands: Any) -> None:
    """Add ``collect`` to ``irtrace``'s subcommands."""
    collect = commands.add_parser(
        "collect",
        help="add to OUT the runs IRTRACE=OUT capture left in OUT.parts/ (processes that outlived the first)",
        description="With IRTRACE=OUT set, each Python process writes its runs to a part file in "
        "OUT.parts/, and the session's first process merges them into OUT when it exits. The parts of "
        "processes still running then stay; once those processes end, this adds their runs to OUT (after "
        "the runs OUT holds) and removes the parts. Parts of processes still running are left again. "
        "With no parts left and OUT written, there is nothing to do (exit 0).",
        epilog=exit_codes_help(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    collect.add_argument("output", metavar="OUT", help="the trace IRTRACE named")


def cmd_collect(args: argparse.Namespace) -> ExitCode:
    from irtrace.lowering.autocapture import collect_parts, describe_collected, parts_root, session_folders

    output = Path(args.output)
    folders = session_folders(output)
    if not folders:
        if output.is_file():  # every process ended before the first one: it merged them all
            echo(f"nothing to collect: every captured run is in {str(output)!r} already", one_line=True)
            return ExitCode.OK
        parts = str(parts_root(output))
        raise InputError(f"{parts!r} holds no captured parts to collect, and there is no {str(output)!r}")
    collected = collect_parts(output, folders, keep_existing=True)
    for warning in collected.warnings:
        echo(f"irtrace: warning: {warning}", stderr=True, one_line=True)
    for line in describe_collected(output, collected):
        echo(line, one_line=True)
    return ExitCode.OK


COLLECT_COMMANDS = {"collect": cmd_collect}
