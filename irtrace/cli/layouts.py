"""``irtrace layouts TRACE [BUFFER]``: the layouts TileLang inferred for each buffer of a run, as
the trace recorded them, as a table, in full, or as the documented JSON document."""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from typing import Any

from irtrace.base.errors import ExitCode, NotInTraceError, exit_codes_help
from irtrace.edge.command import echo, load_trace_warning_if_cut
from irtrace.facts.layout_view import (
    LAYOUTS_FORMAT,
    RunLayouts,
    elements_per_thread,
    gather,
    layouts_document,
    only_buffer,
)
from irtrace.trace.schema import BufferLayout

COLUMNS = ("buffer", "scope", "shape", "kind", "threads", "elem/thr", "replicate", "swizzle")


class _IntermixedParser(argparse.ArgumentParser):
    """Lets BUFFER follow options (``TRACE -k K BUFFER``): plain argparse takes the positionals as
    one run and leaves a later BUFFER unrecognized."""

    _intermixing = False

    def parse_known_args(self, args: Any = None, namespace: Any = None) -> Any:
        if self._intermixing:  # parse_known_intermixed_args's own two passes
            return super().parse_known_args(args, namespace)
        self._intermixing = True
        try:
            return self.parse_known_intermixed_args(args, namespace)
        finally:
            self._intermixing = False


def add_layouts_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``layouts`` to ``irtrace``'s subcommands."""
    parser = commands.add_parser(
        "layouts",
        help="the layout each buffer got from layout inference: fragments' threads, swizzles",
        description="Show the layouts TileLang's layout inference gave each shared and fragment buffer, "
        "as the trace recorded them: per run a table (scope, shape, Layout or Fragment, threads, "
        "elements per thread, replication, swizzle). Name a BUFFER (or --full) for TileLang's own "
        "text of the layout and its forward expressions. By default the layouts right after the "
        "layout pass; --after PASS or --all for the changes later passes made.",
        epilog=f"--json prints the document described in docs/layouts.md (format {LAYOUTS_FORMAT})\n\n"
        + exit_codes_help(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.__class__ = _IntermixedParser  # the subcommands' action makes plain parsers
    parser.add_argument("trace", metavar="TRACE")
    parser.add_argument("buffer", nargs="?", metavar="BUFFER", help="only this buffer, in full")
    parser.add_argument("-k", "--kernel", help="only this kernel's runs (KERNEL#N for the Nth)")
    parser.add_argument("-t", "--target", help="only the runs for this target (aliases as for record)")
    when = parser.add_mutually_exclusive_group()
    when.add_argument("--after", metavar="PASS", help="the layouts in force after PASS (NAME or NAME#N)")
    when.add_argument("--all", action="store_true", help="every recorded change, not only the first")
    parser.add_argument("--full", action="store_true", help="every buffer's text and forward expressions")
    parser.add_argument("--json", action="store_true", help="print the documented JSON document")


def cmd_layouts(args: argparse.Namespace) -> ExitCode:
    trace = load_trace_warning_if_cut(args.trace, "irtrace")
    runs = gather(trace, args.kernel, args.target, after=args.after, every=args.all)
    if not any(run.shown for run in runs):
        raise NotInTraceError(_none_recorded(runs))
    if args.buffer is not None:
        runs = only_buffer(runs, args.buffer)
    if args.json:
        echo(json.dumps(layouts_document(runs), indent=2))
        return ExitCode.OK
    _print(runs, full=args.full or args.buffer is not None)
    return ExitCode.OK


def _none_recorded(runs: Sequence[RunLayouts]) -> str:
    """One line naming each run and why it holds no layout."""
    whys = [f"{run.label} on {run.run.target}: {run.none_because}" for run in runs if run.none_because]
    if len(whys) > 3:
        whys = [*whys[:3], f"and {len(whys) - 3} more"]
    return "no layout to show for " + "; ".join(whys)


def _print(runs: Sequence[RunLayouts], *, full: bool) -> None:
    from rich.markup import escape
    from rich.table import Table

    from irtrace.edge.console import safe_console

    console = safe_console()
    for run in runs:
        if not run.shown:
            if run.none_because:
                console.print(escape(f"{run.label} on {run.run.target}: no layouts ({run.none_because})"))
                console.print()
            continue
        for shown in run.shown:
            console.print(
                f"[bold]{escape(run.label)}[/bold] on [bold]{escape(run.run.target)}[/bold]"
                + escape(f", after {shown.after} (pass {shown.record.after})")
            )
            table = Table(box=None, pad_edge=False, header_style="bold")
            for column in COLUMNS:
                table.add_column(
                    column, justify="right" if column in ("threads", "elem/thr", "replicate") else "left"
                )
            for layout in shown.record.layouts:
                table.add_row(*(escape(cell) for cell in row_cells(layout)))
            console.print(table)
            if full:
                for layout in shown.record.layouts:
                    console.print(escape(details(layout)))
            console.print()


def _dims(dims: Sequence[object]) -> str:
    return "x".join(str(dim) for dim in dims)


def row_cells(layout: BufferLayout) -> list[str]:
    """The table's cells for one buffer (``COLUMNS``)."""
    threads = ""
    if layout.threads is not None:
        threads = str(layout.threads)
        if layout.thread_offset:
            threads += f" (from {layout.thread_offset})"
    per_thread = elements_per_thread(layout)
    return [
        layout.buffer,
        layout.scope,
        f"{layout.dtype}[{_dims(layout.shape)}]",
        layout.kind,
        threads,
        "" if per_thread is None else str(per_thread),
        "" if layout.replicate is None else str(layout.replicate),
        layout.swizzle or "",
    ]


def details(layout: BufferLayout) -> str:
    """TileLang's text of the layout and its forward expressions, a few indented lines."""
    coords = ", ".join(layout.forward_vars)
    lines = [
        f"{layout.buffer}: {layout.summary}",
        f"  text:    {layout.text}",
        f"  index:   ({coords}) -> ({', '.join(layout.forward_index)})"
        f"   [{_dims(layout.input_shape)} -> {_dims(layout.output_shape)}]",
    ]
    if layout.forward_thread is not None:
        replica = f", {layout.replicate_var} < {layout.replicate}" if layout.replicate_var else ""
        lines.append(f"  thread:  ({coords}{replica}) -> {layout.forward_thread}")
    return "\n".join(lines)
