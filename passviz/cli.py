"""The ``passviz`` command: the pass browser, ``dot`` drawings and the ``html`` report.

Errors are rendered by ``irtrace.cli_edge``: one line on stderr and an exit code from irtrace's
``ExitCode``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from irtrace import __version__
from irtrace.cli_edge import load_trace_warning_if_cut, run_command
from irtrace.errors import ExitCode, exit_codes_help
from irtrace.targets import canonical_target_name
from irtrace.trace import KernelRun, Trace

USAGE = """\
  passviz TRACE [--compare OTHER]                  browse the passes (press ? for the keys)
  passviz dot TRACE -o FILE.svg|png|dot [--fold] [--kernel K] [--target T ...]
  passviz html TRACE [-o report.html] [--kernel K] [--target T ...]"""

EXIT_NOTE = "  (3 is also returned when Graphviz's `dot` program is missing: install Graphviz)"


def _epilog() -> str:
    return exit_codes_help() + "\n" + EXIT_NOTE


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


def dot_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="passviz dot",
        description="Draw the pipeline with Graphviz: one lane per target, aligned passes on one row.",
        epilog=_epilog(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _selection(parser)
    parser.add_argument("-o", "--output", required=True, help="FILE.svg, FILE.png or FILE.dot")
    parser.add_argument("--fold", action="store_true", help="fold runs of passes that changed nothing")
    return parser


def html_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="passviz html",
        description="Write one self-contained HTML report: runs, time chart, drawings, pass lists, diffs.",
        epilog=_epilog(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _selection(parser)
    parser.add_argument("-o", "--output", default="passviz-report.html", help="default passviz-report.html")
    return parser


def select_runs(trace: Trace, kernel: str | None, targets: Sequence[str]) -> list[KernelRun]:
    """Runs of ``kernel`` (all kernels if None) on ``targets`` (all if empty), in trace order."""
    runs = trace.select(kernel, None)
    for target in targets:
        trace.select(kernel, target)  # raises NotInTraceError naming what the trace holds
    wanted = {canonical_target_name(target) for target in targets}
    return [run for run in runs if not wanted or run.target in wanted]


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    command = args_list[0] if args_list and args_list[0] in ("dot", "html") else "browse"
    parser = {"dot": dot_parser, "html": html_parser, "browse": browse_parser}[command]()
    try:
        args = parser.parse_args(args_list[1:] if command != "browse" else args_list)
    except SystemExit as exit_:
        return int(exit_.code or 0) if isinstance(exit_.code, int) else ExitCode.USAGE
    return run_command("passviz", lambda: _run(command, args), debug=args.debug)


def _run(command: str, args: argparse.Namespace) -> int:
    trace = load_trace_warning_if_cut(args.trace, "passviz")
    if command == "browse":
        from passviz.app import PassvizApp

        traces = [trace] + ([load_trace_warning_if_cut(args.compare, "passviz")] if args.compare else [])
        PassvizApp(traces, show_times=not args.no_times).run()
        return int(ExitCode.OK)
    runs = select_runs(trace, args.kernel, args.target)
    if command == "dot":
        from passviz.drawing import pipeline_graph, render

        path = render(pipeline_graph(trace, runs, fold=args.fold), args.output)
        print(f"drawing of {len(runs)} run(s) written to {path}")
        return int(ExitCode.OK)
    from passviz.report import write_report

    path = write_report(trace, args.output, runs)
    print(f"report of {len(runs)} run(s) written to {path}")
    return int(ExitCode.OK)


if __name__ == "__main__":
    raise SystemExit(main())
