"""``irtrace show TRACE --lines KERNEL``: the kernel's Python lines with the SASS instructions each
became, counted by class (``irtrace.facts.instruction_classes``), one row per line in line order."""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from typing import Any

from irtrace.base.errors import ExitCode, NotInTraceError
from irtrace.cli.printing import console as _console
from irtrace.cli.printing import escape
from irtrace.edge.command import echo
from irtrace.facts.instruction_classes import (
    CLASS_TITLES,
    CLASSES,
    MACHINE_CODE_HINT,
    counts_document,
    run_line_costs,
    total,
)
from irtrace.facts.source_map import kernel_files
from irtrace.trace.model import KernelRun, Trace
from irtrace.trace.schema import InstructionCounts, LineInstructions, SassLineCosts

LINES_FORMAT = "irtrace-line-costs/1"
"""The ``format`` of ``irtrace show TRACE --lines KERNEL --json``."""
SHOWN_SOURCE_CHARS = 60


def add_lines_option(show: argparse.ArgumentParser) -> None:
    """Add ``--lines KERNEL`` to ``irtrace show``."""
    show.add_argument(
        "--lines",
        metavar="KERNEL",
        help="the kernel's Python lines with the SASS instructions each became, by class (MMA, global, "
        "shared, barrier, other); needs a run recorded with --machine-code --source-map",
    )


def ordered_rows(costs: SassLineCosts, own_files: set[str]) -> list[LineInstructions]:
    """The kernel's own file's lines first, in line order, then other files' (macros) by file and line."""
    return sorted(costs.lines, key=lambda item: (item.file not in own_files, item.file, item.line))


def cmd_show_lines(trace: Trace, kernel: str, target: str | None, as_json: bool) -> ExitCode:
    """The table (or JSON document) for each run of ``kernel`` whose trace counts its instructions."""
    runs = trace.select(kernel, target)
    found = [(run, costs) for run in runs if (costs := run_line_costs(trace, run)) is not None]
    if not found:
        which = ", ".join(sorted({run.target for run in runs}))
        raise NotInTraceError(
            f"{kernel} ({which}) has no SASS instructions per line in the trace: {MACHINE_CODE_HINT}"
        )
    labels = trace.run_labels()
    counted = {run.run_id for run, _ in found}
    for run in runs:
        if run.run_id not in counted and not as_json:
            echo(
                f"irtrace: note: {labels[run.run_id]} on {run.target} has no instruction counts",
                stderr=True,
                one_line=True,
            )
    if as_json:
        document = {
            "format": LINES_FORMAT,
            "runs": [_run_document(trace, run, costs, labels[run.run_id]) for run, costs in found],
        }
        print(json.dumps(document, indent=2))
        return ExitCode.OK
    for run, costs in found:
        _print_table(trace, run, costs, labels[run.run_id])
    return ExitCode.OK


def _source_lines(trace: Trace, run: KernelRun) -> list[str]:
    text = trace.kernel_file(run)
    return text.split("\n") if text is not None else []


def _run_document(trace: Trace, run: KernelRun, costs: SassLineCosts, label: str) -> dict[str, Any]:
    own = kernel_files(run)
    return {
        "kernel": label,
        "target": run.target,
        "lines": [
            {
                "file": item.file,
                "line": item.line,
                "kernel_file": item.file in own,
                **counts_document(item.counts),
            }
            for item in ordered_rows(costs, own)
        ],
        "unplaced": counts_document(costs.unplaced),
        "total": counts_document(costs.total),
    }


def _cells(counts: InstructionCounts) -> list[str]:
    return [*(str(getattr(counts, name) or "-") for name in CLASSES), str(total(counts))]


def _print_table(trace: Trace, run: KernelRun, costs: SassLineCosts, label: str) -> None:
    from rich.table import Table

    console = _console()
    own = kernel_files(run)
    source = _source_lines(trace, run)
    heading = f"[bold]{escape(label)}[/bold] on [bold]{escape(run.target)}[/bold]"
    console.print(f"{heading}: SASS instructions per Python line")
    table = Table(box=None, pad_edge=False, header_style="bold")
    table.add_column("line", justify="right")
    for name in CLASSES:
        table.add_column(CLASS_TITLES[name], justify="right")
    table.add_column("all", justify="right")
    table.add_column("python")
    for item in ordered_rows(costs, own):
        if item.file in own:
            where = str(item.line)
            text = source[item.line - 1].strip() if item.line <= len(source) else ""
        else:
            where, text = f"{_short(item.file)}:{item.line}", "(a macro's line)"
        table.add_row(escape(where), *_cells(item.counts), escape(_cut(text)))
    table.add_row("-", *_cells(costs.unplaced), "(on no Python line)", style="dim")
    table.add_row("all", *_cells(costs.total), "(the whole SASS)", style="bold")
    console.print(table)
    console.print()


def _short(path: str) -> str:
    """The last two parts of a path: ``macro/wgmma_macro_generator.py``."""
    return "/".join(path.split("/")[-2:])


def _cut(text: str) -> str:
    return text if len(text) <= SHOWN_SOURCE_CHARS else text[: SHOWN_SOURCE_CHARS - 1] + "…"


def lines_requested(args: argparse.Namespace, incompatible: Sequence[str]) -> bool:
    """Whether ``show`` was asked for ``--lines``; the options it does not go with are a usage error."""
    from irtrace.base.errors import UsageError

    if getattr(args, "lines", None) is None:
        return False
    given = [option for option in incompatible if getattr(args, option.lstrip("-").replace("-", "_"), None)]
    if given:
        raise UsageError(f"--lines goes alone or with -t and --json, not with {', '.join(given)}")
    return True
