"""The ``passviz`` command: the pass browser, ``dot`` drawings and the ``html`` report.

Errors are rendered by ``irtrace.edge.command``: one line on stderr and an exit code from irtrace's
``ExitCode``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from irtrace import __version__
from irtrace.base.errors import ExitCode, exit_codes_help
from irtrace.edge.command import echo, load_trace_warning_if_cut, run_command
from irtrace.targets.backends import canonical_target_name
from irtrace.trace.model import KernelRun, Trace, headers_of

USAGE = """\
  passviz [browse] TRACE [--compare OTHER]         browse the passes (press ? for the keys)
  passviz dot TRACE -o FILE.svg|png|dot [--fold] [--kernel K] [--target T ...]
                                                   (several kernels: FILE.KERNEL.svg each)
  passviz html TRACE [-o report.html] [--kernel K] [--target T ...]
  passviz layout TRACE -k K -t T BUFFER [-o FILE.svg] [--rows A:B] [--cols A:B]
                                                   a buffer's inferred layout, drawn"""


def _epilog() -> str:
    return exit_codes_help("passviz")


def browse_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="passviz",
        usage=USAGE,
        description="Browse, draw and report TileLang lowering traces recorded by `irtrace record`.",
        epilog=_epilog(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("trace", metavar="TRACE", help="trace file written by irtrace")
    parser.add_argument("--compare", metavar="OTHER", help="a second trace, for run-to-run comparison")
    parser.add_argument("--no-times", action="store_true", help="hide pass times (stable screenshots)")
    parser.add_argument("--debug", action="store_true", help="show tracebacks instead of one-line errors")
    parser.add_argument("--version", action="version", version=f"passviz {__version__}")
    return parser


def _selection(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("trace", metavar="TRACE")
    parser.add_argument("-k", "--kernel", help="only this kernel")
    parser.add_argument("-t", "--target", action="append", default=[], help="only this target; repeatable")
    parser.add_argument("--debug", action="store_true", help="show tracebacks instead of one-line errors")


def _command_parser(name: str, description: str) -> argparse.ArgumentParser:
    """A subcommand's parser: its description, the exit codes, and the runs it works on."""
    parser = argparse.ArgumentParser(
        prog=f"passviz {name}",
        description=description,
        epilog=_epilog(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _selection(parser)
    return parser


def dot_parser() -> argparse.ArgumentParser:
    parser = _command_parser(
        "dot", "Draw the pipeline with Graphviz: one lane per target, aligned passes on one row."
    )
    parser.add_argument("-o", "--output", required=True, help="FILE.svg, FILE.png or FILE.dot")
    parser.add_argument("--fold", action="store_true", help="fold runs of passes that changed nothing")
    return parser


def html_parser() -> argparse.ArgumentParser:
    parser = _command_parser(
        "html", "Write one self-contained HTML report: runs, time chart, drawings, pass lists, diffs."
    )
    parser.add_argument("-o", "--output", default="passviz-report.html", help="default passviz-report.html")
    return parser


def layout_parser() -> argparse.ArgumentParser:
    parser = _command_parser(
        "layout",
        "Draw a buffer's inferred layout: for a fragment the thread (and local index) holding each "
        "element, for shared memory each element's bank. A text grid on the terminal, or the whole "
        "picture as SVG with -o. Rank > 2 buffers are drawn with their leading dimensions flattened "
        "into rows.",
    )
    parser.add_argument("buffer", metavar="BUFFER", help="the buffer's name")
    parser.add_argument("-o", "--output", help="write the picture to FILE.svg instead")
    parser.add_argument("--rows", help="rows START:STOP to draw (default: the first 16, 128 in SVG)")
    parser.add_argument("--cols", help="columns START:STOP (default: what fits, 128 in SVG)")
    parser.add_argument("--width", type=int, default=None, help="terminal width (default: the terminal's)")
    return parser


def select_runs(trace: Trace, kernel: str | None, targets: Sequence[str]) -> Sequence[KernelRun]:
    """Runs of ``kernel`` (all kernels if None) on ``targets`` (all if empty), in trace order
    (of a streamed trace, read when iterated)."""
    runs = trace.select(kernel, None)
    for target in targets:
        trace.select(kernel, target)  # raises NotInTraceError naming what the trace holds
    wanted = {canonical_target_name(target) for target in targets}
    return trace.runs_by_id([run.run_id for run in headers_of(runs) if not wanted or run.target in wanted])


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    command = args_list[0] if args_list and args_list[0] in ("dot", "html", "layout", "browse") else "browse"
    if args_list and args_list[0] == "browse":  # the browser's own name works too: passviz browse TRACE
        args_list = args_list[1:]
    parsers = {"dot": dot_parser, "html": html_parser, "layout": layout_parser, "browse": browse_parser}
    parser = parsers[command]()
    try:
        args = parser.parse_args(args_list[1:] if command != "browse" else args_list)
    except SystemExit as exit_:
        return int(exit_.code or 0) if isinstance(exit_.code, int) else ExitCode.USAGE
    return run_command("passviz", lambda: _run(command, args), debug=args.debug)


def _run(command: str, args: argparse.Namespace) -> int:
    # The report goes through the trace run by run; the browser and drawings hold it whole.
    trace = load_trace_warning_if_cut(args.trace, "passviz", streamed=command == "html")
    if command == "browse":
        from passviz.app import PassvizApp

        traces = [trace] + ([load_trace_warning_if_cut(args.compare, "passviz")] if args.compare else [])
        PassvizApp(traces, show_times=not args.no_times).run()
        return int(ExitCode.OK)
    runs = select_runs(trace, args.kernel, args.target)
    if command == "dot":
        return _draw(trace, runs, args.output, fold=args.fold)
    if command == "layout":
        from passviz.layout_command import draw_layout

        return draw_layout(runs, args)
    from passviz.report import write_report

    path = write_report(trace, args.output, runs)
    print(f"report of {len(runs)} run(s) written to {path}")
    return int(ExitCode.OK)


def _draw(trace: Trace, runs: Sequence[KernelRun], output: str, *, fold: bool) -> int:
    """One drawing per kernel (``FILE.KERNEL.svg`` when there are several), so a trace of many
    kernels makes readable drawings rather than one image tens of thousands of pixels wide."""
    from pathlib import Path

    from irtrace.base.output import file_name_parts
    from passviz.drawing import drawable, pipeline_graph, render
    from passviz.errors import NothingToDrawError

    kernels = list(dict.fromkeys(run.kernel for run in runs))
    target = Path(output)
    parts = file_name_parts(kernels)  # distinct, and never a path out of the output's folder
    empty = []
    for kernel in kernels:
        lanes = [run for run in runs if run.kernel == kernel]
        path = target
        if len(kernels) > 1:
            path = target.with_name(f"{target.stem}.{parts[kernel]}{target.suffix}")
        written = render(pipeline_graph(trace, lanes, fold=fold), path)
        echo(f"drawing of {kernel} ({len(lanes)} run(s)) written to {written}", one_line=True)
        if not drawable(lanes):
            empty.append(lanes[0])
    if empty:
        failures = "; ".join(
            f"{run.kernel} on {run.target} {run.status}: {next(iter((run.error or '').splitlines()), '')}"
            for run in empty
        )
        raise NothingToDrawError(
            f"no pass to draw: the run(s) failed before their first pass ({failures}); "
            "the drawing shows only the failure"
        )
    return int(ExitCode.OK)


if __name__ == "__main__":
    raise SystemExit(main())
