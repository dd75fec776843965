"""The CI commands of ``irtrace``: ``check`` (a trace against a baseline, exit 0/1/2), ``bless``
(make a trace the baseline) and ``repro`` (a standalone script for a failed pass).

``irtrace.cli`` adds them to its parser with ``add_ci_commands``; errors are rendered by
``irtrace.edge.command`` like every other command's.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from irtrace.base.errors import (
    CheckExit,
    ExitCode,
    IrtraceError,
    NotInTraceError,
    UsageError,
    exit_codes_help,
)

if TYPE_CHECKING:
    from irtrace.trace.model import KernelRun, Trace


class CheckInputError(IrtraceError):
    """Any error before the check's verdict: exit 2, whatever its kind elsewhere."""

    exit_code = ExitCode.USAGE


def _default_policy_help() -> str:
    """Which policy applies, and what the default one fails on, from the default itself."""
    from irtrace.ci.policy import CHANGE_KINDS, DEFAULT_FAIL, LATENCY, PERF_KINDS

    kernels = [kind for kind in CHANGE_KINDS if kind in DEFAULT_FAIL and kind not in PERF_KINDS]
    machine = [kind for kind in PERF_KINDS if kind in DEFAULT_FAIL and kind != LATENCY]
    return (
        "policy: --policy FILE, else ./irtrace-policy.toml when present, else the default policy,\n"
        "which fails on:\n"
        f"  {', '.join(kernels)} kernels\n"
        f"  {LATENCY}, where both traces were recorded with --bench\n"
        f"  {', '.join(machine)}, where both were recorded with --machine-code\n"
        "(docs/ci.md says how a policy file changes this)"
    )


def add_ci_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``check``, ``bless`` and ``repro`` to ``irtrace``'s subcommands."""
    check = commands.add_parser(
        "check",
        help="compare a trace with a baseline kernel by kernel; exit 1 on a change the policy fails on",
        description="Compare NEW with a baseline trace, kernel by kernel and target by target: pairs "
        "added, removed or failing to lower, pass lists (aligned by the pipeline's tree), the first "
        "pass whose normalized IR changed, the kernel source, lowering time and kernel metrics. "
        "A policy file says which changes fail the check.",
        epilog=_default_policy_help() + "\n\n" + exit_codes_help("irtrace check"),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    check.add_argument("new", metavar="NEW", help="the trace to check")
    check.add_argument("--baseline", required=True, metavar="OLD", help="the baseline trace")
    check.add_argument(
        "--policy", metavar="FILE", help="irtrace-policy.toml: what fails, at which thresholds"
    )
    check.add_argument("--markdown", metavar="FILE", help="write a Markdown summary (for a CI job summary)")
    check.add_argument("--junit", metavar="FILE", help="write JUnit XML: one test case per kernel x target")
    check.add_argument("--json", metavar="FILE", help="write the whole check as JSON")
    check.add_argument(
        "--format",
        choices=("text", "markdown", "json"),
        default="text",
        help="what to print on stdout (default: a plain summary)",
    )
    check.add_argument("-q", "--quiet", action="store_true", help="print nothing on stdout")

    bless = commands.add_parser(
        "bless",
        help="make a trace the new baseline (all of it, or some kernels and targets)",
        description="Update a baseline deliberately: copy NEW to OLD, or with -k/-t replace only those "
        "kernels and targets in OLD by NEW's runs.",
        epilog=exit_codes_help(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    bless.add_argument("new", metavar="NEW", help="the trace to take the runs from")
    bless.add_argument("--baseline", required=True, metavar="OLD", help="the baseline to write")
    bless.add_argument("-k", "--kernel", action="append", default=[], help="only this kernel; repeatable")
    bless.add_argument("-t", "--target", action="append", default=[], help="only this target; repeatable")

    repro = commands.add_parser(
        "repro",
        help="write a standalone script that reruns a failed pass on the IR it received",
        description="For a run that failed in a pass, write a script that needs only tilelang: it "
        "rebuilds the exact IR the pass received and runs that one pass for that target, for a "
        "compiler bug report. The kernel is lowered again, imported from the file you name with "
        "--kernel-file (never from the path the trace names) and called with the spec's literal "
        "arguments, to catch the IR.",
        epilog=exit_codes_help(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_failed_run_arguments(repro)
    repro.add_argument("-o", "--output", help="script to write (default repro_KERNEL_TARGET.py)")


def add_failed_run_arguments(parser: argparse.ArgumentParser) -> None:
    """TRACE, the kernel file to import and which failed run: what repro and reduce both take."""
    parser.add_argument("trace", metavar="TRACE")
    parser.add_argument(
        "-f",
        "--kernel-file",
        metavar="FILE",
        help="the kernel's .py file to import (required: a trace is data, its spec path is not imported)",
    )
    parser.add_argument("-k", "--kernel", help="the failed kernel (needed when several failed)")
    parser.add_argument("-t", "--target", help="its target")
    add_trace_compile_flags_option(parser)


TRACE_COMPILE_FLAGS_HELP = (
    "keep the trace's compile flags (tl.device_compile_flags), each checked to be one plain flag with "
    "no space or shell character; without it they are left out, since they reach the device "
    "compiler's command line (and nvcc runs its host compiler through a shell)"
)


def add_trace_compile_flags_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--trace-compile-flags", action="store_true", help=TRACE_COMPILE_FLAGS_HELP)


def note_dropped_configs(dropped: Sequence[str]) -> None:
    """Say on stderr which of the trace's pass configs were left out, and why."""
    from irtrace.edge.command import echo
    from irtrace.lowering.trace_configs import COMPILE_FLAG_KEYS

    for line in dropped:
        hint = " (--trace-compile-flags keeps it)" if line.startswith(tuple(COMPILE_FLAG_KEYS)) else ""
        echo(f"irtrace: note: the trace's pass config {line}; left out{hint}", stderr=True, one_line=True)


# ----------------------------------------------------------------------------- check


def cmd_check(args: argparse.Namespace) -> int:
    from irtrace.base.output import write_atomically
    from irtrace.ci.check import check_traces
    from irtrace.ci.check_report import render_junit, render_markdown, render_text, report_document
    from irtrace.ci.policy import find_policy
    from irtrace.edge.command import echo, load_trace_warning_if_cut

    try:
        policy = find_policy(args.policy)
        baseline = load_trace_warning_if_cut(args.baseline, "irtrace", streamed=True)
        new = load_trace_warning_if_cut(args.new, "irtrace", streamed=True)
        report = check_traces(new, baseline, policy)
        document = report_document(report)
        outputs: list[tuple[str | None, Callable[[], str]]] = [
            (args.markdown, lambda: render_markdown(report)),
            (args.junit, lambda: render_junit(report)),
            (args.json, lambda: json.dumps(document, indent=2) + "\n"),
        ]
        for path, render in outputs:
            if path is not None:
                write_atomically(path, render())
    except IrtraceError as error:
        raise CheckInputError(error.message) from None
    if not args.quiet:
        if args.format == "json":
            echo(json.dumps(document, indent=2))
        elif args.format == "markdown":
            echo(render_markdown(report), end="")
        else:
            echo(render_text(report), end="")
    return int(CheckExit.GATED if report.gated else CheckExit.CLEAN)


# ----------------------------------------------------------------------------- bless


def cmd_bless(args: argparse.Namespace) -> int:
    from irtrace.targets.backends import canonical_target_name
    from irtrace.trace.reader import load_trace
    from irtrace.trace.writer import TraceWriter

    new = load_trace(args.new)
    if new.truncated:
        raise UsageError(f"{args.new} was cut short; record it again before making it the baseline")
    kernels = set(args.kernel)
    targets = {canonical_target_name(t) for t in args.target}

    def chosen(run: KernelRun) -> bool:
        short = run.kernel.split("::")[-1]
        return (not kernels or bool({run.kernel, short} & kernels)) and (not targets or run.target in targets)

    if not kernels and not targets:
        kept: list[tuple[KernelRun, Trace]] = [(run, new) for run in new.runs]
        summary = f"{len(new.runs)} run(s)"
    else:
        taken = {run.key: run for run in new.runs if chosen(run)}
        if not taken:
            raise UsageError(f"{args.new} has no run of the kernels and targets given")
        kept = []
        if Path(args.baseline).exists():
            old = load_trace(args.baseline)
            for run in old.runs:
                replacement = taken.pop(run.key, None)
                kept.append((replacement, new) if replacement is not None else (run, old))
        replaced = sum(trace is new for _, trace in kept)
        summary = f"{replaced} run(s) replaced, {len(taken)} added, {len(kept) - replaced} kept"
        kept += [(run, new) for run in taken.values()]
    writer = TraceWriter(args.baseline, partial=True)
    try:
        for run, trace in kept:
            writer.add_run(run, trace.texts)
    except BaseException:
        writer.abandon(keep=False)
        raise
    writer.close()
    print(f"blessed {args.new} into {args.baseline}: {summary}")
    return int(ExitCode.OK)


# ----------------------------------------------------------------------------- repro


def cmd_repro(args: argparse.Namespace) -> int:
    from irtrace.base.output import write_atomically
    from irtrace.ci.repro import build_reproducer, default_script_name
    from irtrace.edge.command import echo, load_trace_warning_if_cut

    trace = load_trace_warning_if_cut(args.trace, "irtrace")
    run = pick_failed_run(trace, args.kernel, args.target, args.trace)
    reproducer = build_reproducer(
        trace,
        run,
        args.kernel_file,
        trace_name=Path(args.trace).name,
        compile_flags=args.trace_compile_flags,
    )
    note_dropped_configs(reproducer.dropped_configs)
    output = args.output or default_script_name(run)
    write_atomically(output, reproducer.script)
    echo(
        f"wrote {output}: {reproducer.failed.name} fails alone for {run.kernel} on {run.target} "
        f"({reproducer.reproduced_error}); run it with: python {output}",
        one_line=True,
    )
    return int(ExitCode.OK)


def pick_failed_run(trace: Trace, kernel: str | None, target: str | None, trace_name: str) -> KernelRun:
    """The one run that failed to lower matching ``kernel`` and ``target`` (repro, reduce)."""
    from irtrace.trace.model import STATUS_OK

    runs = [run for run in trace.select(kernel, target) if run.status != STATUS_OK]
    if not runs:
        raise NotInTraceError(f"no run that failed to lower matches in {trace_name}")
    if len(runs) > 1:
        listed = "; ".join(f"{run.kernel} on {run.target}" for run in runs[:12])
        raise UsageError(f"{len(runs)} failed runs match; pick one with -k and -t: {listed}")
    return runs[0]


CI_COMMANDS = {"check": cmd_check, "bless": cmd_bless, "repro": cmd_repro}
