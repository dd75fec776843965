"""``irtrace spans TRACE`` (where spans stop: how many statements keep a span after each pass) and
``irtrace ir TRACE --line N`` (what a Python line became after every pass, or after one), from the
trace's source maps (``irtrace.facts.source_map``)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from irtrace.base.errors import ExitCode, UsageError, exit_codes_help
from irtrace.edge.command import echo, load_trace_warning_if_cut
from irtrace.facts.instruction_classes import counts_document, describe_counts, line_instructions
from irtrace.facts.source_map import (
    AuthorLines,
    RunMaps,
    SpanRow,
    author_lines,
    carried_kernel_lines,
    carried_words,
    changed_rows,
    generated_lines,
    generated_texts,
    kernel_files,
    line_document,
    line_ranges,
    line_through_passes,
    not_run_words,
    parse_line_query,
    query_facts,
    require_maps,
    span_rows,
    stands_for_words,
    used_by_words,
)
from irtrace.trace.model import Trace

SPANS_FORMAT = "irtrace-spans/1"
"""The ``format`` of ``irtrace spans --format json``."""


def add_spans_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``spans`` to ``irtrace``'s subcommands."""
    parser = commands.add_parser(
        "spans",
        help="where source spans stop: statements keeping a span after each pass",
        description="For each run, how many statements of the module after each pass carry a span "
        "(a Python file and line) and which lines of the kernel's file the module still maps, with "
        "the lines each pass dropped. By default only the passes where this changed.",
        epilog=exit_codes_help(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("trace")
    parser.add_argument("-k", "--kernel")
    parser.add_argument("-t", "--target")
    parser.add_argument("--all", action="store_true", help="every pass, not only where the counts change")
    parser.add_argument("--format", choices=("table", "markdown", "json"), default="table")


def add_line_option(ir: argparse.ArgumentParser) -> None:
    """Add ``--line`` (and ``--json``) to ``irtrace ir``."""
    ir.add_argument(
        "--line",
        metavar="[FILE:]LINE",
        help="the IR lines a line of the kernel's Python file became after every pass (with -p: "
        "after that pass); FILE:LINE for a line of another file (a macro's)",
    )
    ir.add_argument("--json", action="store_true", help="with --line: the irtrace-line/1 JSON document")


def add_source_map_option(parser: argparse.ArgumentParser, default: bool = False) -> None:
    """Add ``--source-map`` to ``irtrace record`` (off by default) and ``irtrace run`` (on by
    default, ``--no-source-map`` to leave the maps out)."""
    parser.add_argument(
        "--source-map",
        action=argparse.BooleanOptionalAction,
        default=default,
        help="store with each module which of its IR lines come from which Python line (srcmap "
        "records, for ir --line and spans); each module is printed twice, about 1.3x the tracing time"
        + (" (default: on)" if default else " (default: off)"),
    )


def _load(path: str) -> Trace:
    return load_trace_warning_if_cut(path, "irtrace")


def cmd_ir_line(args: argparse.Namespace) -> ExitCode:
    """``irtrace ir TRACE --line N [-p PASS]``."""
    if args.source or args.input or args.before:
        raise UsageError("--line goes with -p/--pass or alone, not with --source, --input or --before")
    query = parse_line_query(args.line)
    trace = _load(args.trace)
    run = trace.find_run(args.kernel, args.target)
    only = run.find_pass(args.pass_name) if args.pass_name else None
    facts = query_facts(trace, run, query)
    found = line_through_passes(trace, run, query, only, facts)
    source_lines = generated_lines(trace, run, query, facts) if only is None else None
    generated = generated_texts(trace, run, query, source_lines) if source_lines is not None else []
    users = facts.users_of(query.line)
    value = f"; {stands_for_words(users, inlined=False)}" if users else ""
    if source_lines is not None and source_lines.inlined_by:
        value = f"; {stands_for_words(source_lines.inlined_by, inlined=True)}"
    counts = line_instructions(trace, run, query) if only is None else None
    if args.json:
        machine = counts_document(counts) if counts is not None else None
        document = line_document(run.kernel, run.target, args.line, found, generated, machine)
        print(json.dumps(document, indent=2))
        return ExitCode.OK
    where = f"line {query.line}" + (f" of {query.file}" if query.file else "")
    if not found and not any(lines for _, lines, _ in generated):
        after = f" after {only.name}" if only is not None else " after any pass"
        echo(f"irtrace: no statement of {where} is in the IR{after}", stderr=True, one_line=True)
        return ExitCode.NOT_FOUND
    for item in found:
        span = item.first.label if item.first is item.last else f"{item.first.label} .. {item.last.label}"
        carried = ""
        if item.carried:
            why = carried_words(item.carried, item.owned)
            carried = f", carried: {_lines(item.carried)} (marked ~: {why}; see docs/source-maps.md)"
        if item.used_by:
            carried += f"; {stands_for_words(item.used_by, item.inlined)}"
        echo(f"== {where} after {span} (passes {item.first.record.index}-{item.last.record.index}){carried}")
        width = len(str(item.lines[-1]))
        for number, line_text in zip(item.lines, item.text_lines, strict=True):
            echo(f"{number:>{width}} {'~' if number in item.carried else '|'} {line_text}")
    for stage, lines, texts in generated:
        cost = f"; {describe_counts(counts)}" if stage == "sass" and counts is not None else ""
        if not lines:
            echo(f"== {where} in the {_STAGE_TITLES[stage]}: no line{_NONE_WHY[stage]}{value}")
            continue
        ranges = ", ".join(f"{a}-{b}" if a != b else str(a) for a, b in line_ranges(lines))
        echo(f"== {where} in the {_STAGE_TITLES[stage]} (lines {ranges}){cost}{value}")
        width = len(str(lines[-1]))
        for number, line_text in zip(lines, texts, strict=True):
            echo(f"{number:>{width}} | {line_text}")
    return ExitCode.OK


_STAGE_TITLES = {"source": "kernel source", "ptx": "PTX", "sass": "SASS"}
_NONE_WHY = {
    "source": " (no statement codegen received carries it; `irtrace spans` shows the pass that dropped it)",
    "ptx": " (nvcc located no PTX instruction on its kernel-source lines)",
    "sass": " (the line table locates no SASS instruction on its kernel-source lines)",
}


def cmd_spans(args: argparse.Namespace) -> ExitCode:
    """``irtrace spans TRACE``."""
    trace = _load(args.trace)
    runs = trace.select(args.kernel, args.target)
    labels = trace.run_labels()
    mapped = [run for run in runs if run.source_maps]
    if not mapped:
        require_maps(runs[0])
    for run in runs:
        if not run.source_maps:
            echo(
                f"irtrace: note: {labels[run.run_id]} on {run.target} has no source maps",
                stderr=True,
                one_line=True,
            )
    tables = [(labels[run.run_id], run.target, *_rows(run, args.all)) for run in mapped]
    facts = [author_lines(trace, run) for run in mapped]
    if args.format == "json":
        runs_json = [
            _run_document(*table) | _facts_document(run_facts)
            for table, run_facts in zip(tables, facts, strict=True)
        ]
        print(json.dumps({"format": SPANS_FORMAT, "runs": runs_json}, indent=2))
    elif args.format == "markdown":
        for (label, target, rows, carry), run_facts in zip(tables, facts, strict=True):
            echo(f"### {_md(label)} on {_md(target)}\n")
            echo(
                "| # | pass | statements | with span | kernel lines | carried | lost |\n"
                "| --- | --- | --- | --- | --- | --- | --- |"
            )
            for row in rows:
                carried, lost = _lines(carry.carried(row)), _lines(carry.lost(row))
                echo(
                    f"| {row.item.record.index} | {_md(row.item.label)} | {row.statements} | {row.with_span} "
                    f"| {_lines(row.kernel_lines)} | {carried} | {lost} |"
                )
            echo("")
            for note in _facts_notes(run_facts):
                echo(f"- {note}")
            echo("")
    else:
        _print_tables(tables, facts)
    return ExitCode.OK


def _facts_notes(facts: AuthorLines) -> list[str]:
    """The lines of the kernel's file the table cannot show: those that made no statement (shown
    with the lines reading their value) and those the frontend did not run."""
    notes = [
        f"line {line} made no statement: {used_by_words(users)} (`irtrace ir --line {line}` follows those)"
        for line, users in sorted(facts.value_users.items())
    ]
    if facts.skipped:
        notes.append(not_run_words(facts.skipped))
    return notes


def _facts_document(facts: AuthorLines) -> dict[str, Any]:
    return {
        "value_lines": {str(line): list(users) for line, users in sorted(facts.value_users.items())},
        "not_run": list(facts.skipped),
    }


def _rows(run: Any, every: bool) -> tuple[list[SpanRow], _Carry]:
    """The table's rows (all, or those where the counts or lines changed or a line, carried
    ones too, was lost) and its carried lines."""
    rows, carry = span_rows(run), _Carry(run)
    if every:
        return rows, carry
    changed = {id(row) for row in changed_rows(rows)}
    return [row for row in rows if id(row) in changed or carry.lost(row)], carry


def _md(text: str) -> str:
    """Text from a trace in a Markdown table cell: no cell break, no markup."""
    return "".join("\\" + c if c in "|`*_[]<>\\#" else c for c in text.replace("\n", " "))


def _lines(lines: tuple[int, ...]) -> str:
    return " ".join(str(line) for line in lines) or "-"


class _Carry:
    """The carried lines of a run's span table: a line carried over the pass that dropped its span
    is not lost there; it is lost in the pass whose output no longer carries it either."""

    def __init__(self, run: Any) -> None:
        self.files = kernel_files(run)
        self.maps = RunMaps(run)

    def carried(self, row: SpanRow) -> tuple[int, ...]:
        source_map = row.item.source_map
        return carried_kernel_lines(source_map, self.files) if source_map is not None else ()

    def lost(self, row: SpanRow) -> tuple[int, ...]:
        received = self.maps.received(row.item.record)
        before = carried_kernel_lines(received, self.files) if received is not None else ()
        kept = set(self.carried(row)) | set(row.kernel_lines)
        return tuple(sorted((set(row.lost) | set(before)) - kept))


def _run_document(label: str, target: str, rows: list[SpanRow], carry: _Carry) -> dict[str, Any]:
    return {
        "kernel": label,
        "target": target,
        "passes": [
            {
                "index": row.item.record.index,
                "pass": row.item.label,
                "statements": row.statements,
                "with_span": row.with_span,
                "kernel_lines": list(row.kernel_lines),
                "carried": list(carry.carried(row)),
                "lost": list(carry.lost(row)),
                "gained": list(row.gained),
            }
            for row in rows
        ],
    }


def _print_tables(tables: list[tuple[str, str, list[SpanRow], _Carry]], facts: list[AuthorLines]) -> None:
    from rich.markup import escape
    from rich.table import Table

    from irtrace.edge.console import safe_console

    console = safe_console()
    for (label, target, rows, carry), run_facts in zip(tables, facts, strict=True):
        console.print(f"[bold]{escape(label)}[/bold] on [bold]{escape(target)}[/bold]")
        table = Table(box=None, pad_edge=False, header_style="bold")
        for column in ("#", "pass", "stmts", "with span", "kernel lines", "carried", "lost"):
            table.add_column(column, justify="right" if column in ("#", "stmts", "with span") else "left")
        for row in rows:
            share = f" ({100 * row.with_span // row.statements}%)" if row.statements else ""
            lost_lines = carry.lost(row)
            lost = f"[red]{_lines(lost_lines)}[/red]" if lost_lines else "-"
            table.add_row(
                str(row.item.record.index),
                escape("  " * row.item.record.depth + row.item.label),
                str(row.statements),
                f"{row.with_span}{share}",
                escape(_lines(row.kernel_lines)),
                _lines(carry.carried(row)),
                lost,
            )
        console.print(table)
        for note in _facts_notes(run_facts):
            console.print(escape(note))
        console.print()


SPANS_COMMANDS = {"spans": cmd_spans}
