"""``irtrace show TRACE``: each run's passes with times, shares and changed lines, or the time per
pass name (``--by-pass``), or the whole trace as a JSON document."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

from irtrace.base.errors import ExitCode
from irtrace.cli.printing import console as _console
from irtrace.cli.printing import escape
from irtrace.cli.printing import first_line as _first_line
from irtrace.cli.printing import run_status as _status
from irtrace.edge.command import load_trace_warning_if_cut
from irtrace.trace.model import STATUS_OK, KernelRun, Trace
from irtrace.trace.summary import NEW_STAGE, PassRow


def _load(path: str) -> Trace:
    """The trace, its runs read one at a time as they are printed; every run is read once first
    so that a bad record stops the command before it prints anything."""
    from irtrace.trace.stream import validate_runs

    trace = load_trace_warning_if_cut(path, "irtrace", streamed=True)
    validate_runs(trace)
    return trace


def cmd_show(args: argparse.Namespace) -> ExitCode:
    from irtrace.cli.line_costs import cmd_show_lines, lines_requested
    from irtrace.trace.summary import totals_by_pass

    if lines_requested(args, ("--kernel", "--by-pass", "--changed", "--top")):
        return cmd_show_lines(_load(args.trace), args.lines, args.target, args.json)
    trace = _load(args.trace)
    runs = trace.select(args.kernel, args.target)
    if args.json:
        _write_document(trace, runs, args.by_pass)
        return ExitCode.OK
    if trace.truncated:  # on stdout too: the runs below look whole, the trace is not
        _console().print(
            "[red]cut short[/red]: "
            + escape(
                f"{args.trace} was not finished (the program or irtrace was stopped, or is still "
                f"writing); it holds the {len(trace.runs)} run(s) begun before that"
            )
        )
    if args.by_pass:
        _print_totals(totals_by_pass(runs), args.top)
    else:
        labels = trace.run_labels()
        for run in runs:
            _print_run(trace, run, args.changed, labels[run.run_id])
    return ExitCode.OK


_RUNS = "\x00runs\x00"


def _write_document(trace: Trace, runs: Sequence[KernelRun], by_pass: bool) -> None:
    """``json.dumps(trace_document(...), indent=2)``, written run by run: the document of a
    corpus is never whole in memory."""
    from irtrace.diff import count_line_changes
    from irtrace.trace.summary import totals_by_pass, trace_document

    document: Any = trace_document(trace, [], count_line_changes)
    document["runs"] = _RUNS
    if by_pass:
        document["by_pass"] = [row.__dict__ for row in totals_by_pass(runs)]
    head, tail = json.dumps(document, indent=2).split(json.dumps(_RUNS))
    out = sys.stdout
    out.write(head + "[")
    for number, run in enumerate(runs):
        (item,) = trace_document(trace, [run], count_line_changes)["runs"]
        out.write(("," if number else "") + "\n    " + json.dumps(item, indent=2).replace("\n", "\n    "))
    out.write(("\n  ]" if runs else "]") + tail + "\n")


def _bar(share: float, width: int = 12) -> str:
    filled = round(share * width)
    return "█" * filled + "·" * (width - filled)


def _count_cells(row: PassRow) -> tuple[str, str]:
    """The ``+`` and ``-`` cells: counts of a pass that changed the IR (``+0 -0`` when only
    normalized-away text changed, as passdiff says), ``new stage`` for codegen and machine code."""
    if row.new_stage:
        return (f"[cyan]{NEW_STAGE}[/cyan]", "")
    if not row.record.changed:
        return ("", "")
    return (f"[green]+{row.added}[/green]", f"[red]-{row.removed}[/red]")


def _print_run(trace: Trace, run: KernelRun, changed_only: bool, label: str) -> None:
    from rich.table import Table

    from irtrace.diff import count_line_changes
    from irtrace.trace.summary import pass_rows

    console = _console()
    total = f"{run.total_s * 1000:.0f} ms" if run.total_s is not None else "?"
    status = run.status if run.status == STATUS_OK else f"[red]{_status(run)}[/red]"
    if run.running:
        status += escape(f" while pass {run.running} was running")
    console.print(
        f"[bold]{escape(label)}[/bold] on [bold]{escape(run.target)}[/bold]: {status}, "
        + escape(
            f"{len(run.passes)} passes, {total}, tilelang {run.tilelang_version}, "
            f"source {(run.source_sha256 or '-')[:12]}"
        )
    )
    table = Table(box=None, pad_edge=False, header_style="bold")
    for column in ("#", "pass", "phase", "ms", "share", "+", "-"):
        table.add_column(column, justify="right" if column in ("#", "ms", "+", "-") else "left")
    for row in pass_rows(trace, run, count_line_changes):
        record = row.record
        if changed_only and not record.changed and not record.failed:
            continue
        name = escape("  " * record.depth + row.label)
        if record.failed:
            name = f"[red]{name}  FAILED[/red]"
        elif not record.changed:
            name = f"[dim]{name}[/dim]"
        table.add_row(
            str(record.index),
            name,
            escape(record.phase if record.pipeline is None else f"{record.phase}:{record.pipeline}"),
            f"{record.self_s * 1000:.2f}",
            _bar(row.share),
            *_count_cells(row),
        )
    console.print(table)
    from irtrace.perf.latency import latency_text, resource_lines

    source = trace.kernel_source(run) if run.resources else None
    for line in resource_lines(run.resources, source):
        console.print("resources: " + escape(line))
    bench = run.bench
    if bench is not None and bench.latency_ms is not None:
        console.print("latency: " + escape(latency_text(bench)))
    elif bench is not None:
        console.print("[red]bench failed:[/red] " + escape(_first_line(bench.error)))
    if run.error:
        console.print("[red]error:[/red] " + escape(_first_line(run.error)))
    for warning in run.warnings:  # TileLang's own, logged while this run lowered
        console.print("[yellow]warning:[/yellow] " + escape(_first_line(warning)))
    console.print()


def row_count(text: str) -> int:
    """``--top``'s value: a whole number, 0 or more."""
    if not text.strip().isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of rows (0 or more)")
    return int(text)


def _print_totals(rows: Sequence[Any], top: int = 0) -> None:
    """The time per pass name, longest first; past ``top`` rows (0: none) the rest in one line."""
    from rich.table import Table

    table = Table(box=None, pad_edge=False, header_style="bold")
    for column in ("pass", "count", "changed", "total ms", "share"):
        table.add_column(column, justify="left" if column == "pass" else "right")
    rest = rows[top:] if top else []
    for row in rows[: top or len(rows)]:
        table.add_row(
            escape(row.name),
            str(row.count),
            str(row.changed),
            f"{row.total_s * 1000:.2f}",
            f"{row.share * 100:.1f}%",
        )
    _console().print(table)
    if rest:
        share = sum(row.share for row in rest)
        _console().print(
            f"... and {len(rest)} more passes, {share * 100:.1f}% of the time (--top 0 lists them all)"
        )
