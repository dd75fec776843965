"""The ``passdiff`` command: pass, runs, targets.

Errors are rendered by ``irtrace.edge.command``: one line on stderr and an exit code (table in ``--help``);
``--debug`` shows the traceback instead. Exit 0 and 1 follow diff(1): same, different.
"""

from __future__ import annotations

import argparse
import io
import json
import sys
from collections.abc import Sequence

from irtrace import __version__
from irtrace.base.errors import ExitCode, UsageError, exit_codes_help
from irtrace.base.output import write_atomically
from irtrace.diff.compare import compare_targets, compare_traces
from irtrace.diff.errors import DiffOutcome
from irtrace.diff.normalize import NormalizeRules
from irtrace.diff.summary import MODE_PASS, MODE_RUNS, MODE_TARGETS, DiffReport, pass_diff, report_document
from irtrace.edge.command import echo, load_trace_warning_if_cut, run_subcommand
from irtrace.trace.model import Trace

FORMATS = ("rich", "unified", "json", "html")


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "-f",
        "--format",
        choices=FORMATS,
        default="rich",
        help="rich: terminal view with word highlights (plain when not a terminal or NO_COLOR); "
        "unified: a diff patch accepts; json: the summary in docs/passdiff.md; "
        "html: one self-contained side-by-side page (default file passdiff.html)",
    )
    common.add_argument("-o", "--output", help="write to this file instead of stdout")
    common.add_argument("-U", "--context", type=int, default=3, metavar="N", help="context lines (default 3)")
    common.add_argument("--no-mask-targets", action="store_true", help="keep the T.target({...}) JSON")
    common.add_argument("--no-mask-addresses", action="store_true", help="keep 0x... object addresses")
    common.add_argument("--no-mask-metadata", action="store_true", help='keep metadata["..."][N] indexes')
    common.add_argument(
        "--rename-vars",
        action="store_true",
        help="drop the _N suffixes TVM adds to keep names unique (i_1 reads i), so renamings vanish",
    )
    common.add_argument(
        "-w",
        "--ignore-whitespace",
        action="store_true",
        help="compare lines ignoring whitespace, as diff -w (without it, lines whose indentation alone "
        "changed are marked as re-indented)",
    )
    common.add_argument(
        "--raw",
        action="store_true",
        help="every mask off: diff the raw texts (with --rename-vars, only that rule)",
    )
    common.add_argument("--debug", action="store_true", help="show tracebacks instead of one-line errors")

    parser = argparse.ArgumentParser(
        prog="passdiff",
        description="IR-aware diffs of TileLang traces: what a pass did, what changed between two "
        "runs, where two targets part ways.",
        epilog=exit_codes_help("passdiff"),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"passdiff {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    def command(name: str, help_text: str, description: str) -> argparse.ArgumentParser:
        return commands.add_parser(
            name,
            help=help_text,
            description=description,
            parents=[common],
            formatter_class=argparse.RawDescriptionHelpFormatter,
            epilog=exit_codes_help("passdiff"),
        )

    single = command(
        "pass",
        "what one pass (or a span of passes) did",
        "Diff the IR a pass received against the IR it produced; with --to, from before --pass to "
        "after --to.",
    )
    single.add_argument("trace")
    single.add_argument("-k", "--kernel")
    single.add_argument("-t", "--target")
    single.add_argument("-p", "--pass", dest="pass_name", required=True, metavar="NAME[#N]")
    single.add_argument("--to", metavar="NAME[#N]", help="last pass of a span (included)")

    runs = command(
        "runs",
        "two traces of the same kernels: the first pass whose output differs",
        "Align passes by the pipeline's structure (nesting, order, name) and report, per kernel and "
        "target, the first pass where the IR parts, with the diff there; passes only one run ran, ran "
        "at another point, or never reached because a run stopped, by name.",
    )
    runs.add_argument("old")
    runs.add_argument("new")
    runs.add_argument("-k", "--kernel")
    runs.add_argument("-t", "--target")

    targets = command(
        "targets",
        "two targets of one kernel: where the lowerings part ways",
        "Align the passes two targets share, report the first shared pass whose IR differs and diff "
        "there; also diff the final kernel sources.",
    )
    targets.add_argument("trace")
    targets.add_argument("target_a", metavar="TARGET_A")
    targets.add_argument("target_b", metavar="TARGET_B")
    targets.add_argument("-k", "--kernel")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    return run_subcommand("passdiff", build_parser(), argv, _compare)


def _compare(args: argparse.Namespace) -> int:
    report = COMMANDS[args.command](args)
    emit(report, args)
    if report.failed:
        return int(ExitCode.LOWERING)
    return int(DiffOutcome.DIFFERENT if report.different else DiffOutcome.SAME)


def rules_from_args(args: argparse.Namespace) -> NormalizeRules:
    """The rules the options ask for; ``--raw`` turns every mask off (``--rename-vars`` still counts)."""
    return NormalizeRules(
        mask_targets=not (args.raw or args.no_mask_targets),
        mask_addresses=not (args.raw or args.no_mask_addresses),
        mask_metadata=not (args.raw or args.no_mask_metadata),
        rename_vars=args.rename_vars,
        ignore_whitespace=args.ignore_whitespace,
    )


def _load(path: str) -> Trace:
    return load_trace_warning_if_cut(path, "passdiff")


def cmd_pass(args: argparse.Namespace) -> DiffReport:
    trace = _load(args.trace)
    run = trace.find_run(args.kernel, args.target)
    rules = rules_from_args(args)
    item = pass_diff(trace, run, args.pass_name, args.to or args.pass_name, rules)
    return DiffReport(MODE_PASS, rules, pass_diffs=(item,), sources=(args.trace,))


def cmd_runs(args: argparse.Namespace) -> DiffReport:
    old, new = _load(args.old), _load(args.new)
    rules = rules_from_args(args)
    comparisons = compare_traces(old, new, rules, kernel=args.kernel, target=args.target)
    return DiffReport(MODE_RUNS, rules, comparisons=tuple(comparisons), sources=(args.old, args.new))


def cmd_targets(args: argparse.Namespace) -> DiffReport:
    trace = _load(args.trace)
    rules = rules_from_args(args)
    if args.target_a == args.target_b:
        raise UsageError(f"give two different targets; both are {args.target_a!r}")
    comparison = compare_targets(trace, args.kernel, args.target_a, args.target_b, rules)
    return DiffReport(MODE_TARGETS, rules, comparisons=(comparison,), sources=(args.trace,))


COMMANDS = {"pass": cmd_pass, "runs": cmd_runs, "targets": cmd_targets}


def emit(report: DiffReport, args: argparse.Namespace) -> None:
    """Render ``report`` in the chosen format to stdout or ``--output``."""
    from passdiff import render

    if args.format == "json":
        _write(json.dumps(report_document(report, context=args.context), indent=2) + "\n", args.output)
    elif args.format == "unified":
        _write(render.render_unified(report, args.context), args.output)
    elif args.format == "html":
        output = args.output or "passdiff.html"
        _write(render.render_html(report, args.context), output)
        print(f"wrote {output}", file=sys.stderr)
    else:
        from irtrace.edge.console import safe_console

        if args.output:
            # Drawn in memory, then written whole like every other output (never half a file).
            buffer = io.StringIO()
            console = safe_console(file=buffer, no_color=True, soft_wrap=False, width=10_000)
            render.render_terminal(report, console, args.context)
            _write(buffer.getvalue(), args.output)
            return
        render.render_terminal(report, safe_console(width=None), args.context)


def _write(text: str, output: str | None) -> None:
    """To stdout with control characters escaped, or to ``output`` through ``NAME.partial``."""
    if output is None:
        echo(text, end="")
    else:
        write_atomically(output, text)


if __name__ == "__main__":
    sys.exit(main())
