"""The experiment commands of ``irtrace``: ``resume`` (run the rest of a recorded lowering on an
edited IR, recording a new run) and ``reduce`` (shrink a kernel's failing IR to a small
reproducer). Errors are rendered by ``irtrace.edge.command`` like every other command's.
"""

from __future__ import annotations

import argparse
from typing import Any

from irtrace.base.errors import ExitCode, exit_codes_help
from irtrace.cli.ci import add_failed_run_arguments, add_trace_compile_flags_option, note_dropped_configs

DEFAULT_BUDGET_S = 60.0
"""``irtrace reduce --budget``'s default, in seconds."""


def add_experiment_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``resume`` and ``reduce`` to ``irtrace``'s subcommands."""
    resume = commands.add_parser(
        "resume",
        help="run the rest of a recorded lowering on an edited IR, recording a new run",
        description="Edit the IR a pass received (`irtrace ir TRACE -p PASS --before > edited.py`), then "
        "run TileLang's real pipeline for the run's target and pass configs from PASS on (PASS included) "
        "on the edited module, recording every pass and the kernel source into a new trace that "
        "`passdiff runs TRACE OUTPUT` compares with the original. The IR file is read as TVMScript data "
        "(no Python is run from it); PASS must be a top-level pass before codegen.",
        epilog=exit_codes_help("irtrace resume"),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    resume.add_argument("trace", metavar="TRACE")
    resume.add_argument("-k", "--kernel", help="the kernel (needed when the trace holds several)")
    resume.add_argument("-t", "--target", help="its target")
    resume.add_argument(
        "--from", dest="from_pass", required=True, metavar="PASS[#N]", help="the pass to resume at"
    )
    resume.add_argument(
        "--ir", required=True, metavar="FILE", help="the edited IR: TVMScript of the module PASS receives"
    )
    resume.add_argument(
        "-o", "--output", default="resumed.jsonl", help="trace to write (default resumed.jsonl)"
    )
    add_trace_compile_flags_option(resume)

    reduce = commands.add_parser(
        "reduce",
        help="shrink the IR a failed pass received to a small reproducer that fails the same way",
        description="Like `irtrace repro`, rebuild the exact IR the failed pass received (the kernel "
        "lowered again, imported from --kernel-file, never from the path in the trace) and check that "
        "the pass fails alone; then shrink that IR while the pass, run alone, still raises the same "
        "error (its first line, with target JSON, buffer and variable names and numbers masked): "
        "delete statements (big chunks first), unwrap thread launches, blocks, loops and branches, "
        "make loops one iteration long, drop unused buffers, access regions and annotations, until "
        "nothing more goes or --budget runs out. Writes a script like repro's that needs only tilelang.",
        epilog=exit_codes_help("irtrace reduce"),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_failed_run_arguments(reduce)
    reduce.add_argument(
        "-o", "--output", default="reduced_repro.py", help="script to write (default reduced_repro.py)"
    )
    reduce.add_argument(
        "--budget",
        type=_positive_seconds,
        default=DEFAULT_BUDGET_S,
        metavar="SECONDS",
        help=f"stop shrinking after this long (default {DEFAULT_BUDGET_S:g}); keeps the smallest so far",
    )


def cmd_resume(args: argparse.Namespace) -> int:
    from irtrace.edge.command import echo, load_trace_warning_if_cut
    from irtrace.lowering.resume import read_edited_ir, resume_lowering, resume_pass
    from irtrace.trace.model import STATUS_OK
    from irtrace.trace.writer import TraceWriter

    trace = load_trace_warning_if_cut(args.trace, "irtrace")
    run = trace.find_run(args.kernel, args.target)
    start = resume_pass(run, args.from_pass)
    module = read_edited_ir(args.ir)
    with TraceWriter(args.output, partial=True) as writer:
        resumed = resume_lowering(trace, run, start, module, writer, compile_flags=args.trace_compile_flags)
    note_dropped_configs(resumed.dropped_configs)
    new = resumed.run
    if new.status != STATUS_OK:
        echo(
            f"irtrace: {run.kernel} on {run.target} resumed at {start.name} failed: "
            f"{_first_line(new.error)}; the run is in {args.output}",
            stderr=True,
            one_line=True,
        )
        return int(ExitCode.LOWERING)
    same = new.source_sha256 == run.source_sha256
    echo(
        f"resumed {run.kernel} on {run.target} at {start.name}: {len(new.passes)} passes, kernel source "
        f"{'unchanged' if same else 'changed'}; wrote {args.output} "
        f"(passdiff runs {args.trace} {args.output})",
        one_line=True,
    )
    return int(ExitCode.OK)


def _positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive number of seconds")
    return value


def cmd_reduce(args: argparse.Namespace) -> int:
    from pathlib import Path

    from irtrace.base.output import write_atomically
    from irtrace.ci.reduce import reduce_failure
    from irtrace.cli.ci import pick_failed_run
    from irtrace.edge.command import echo, load_trace_warning_if_cut

    trace = load_trace_warning_if_cut(args.trace, "irtrace")
    run = pick_failed_run(trace, args.kernel, args.target, args.trace)
    reduction = reduce_failure(
        trace,
        run,
        args.kernel_file,
        budget_s=args.budget,
        trace_name=Path(args.trace).name,
        compile_flags=args.trace_compile_flags,
    )
    note_dropped_configs(reduction.reproducer.dropped_configs)
    write_atomically(args.output, reduction.reproducer.script)
    before, after = reduction.statements_before, reduction.statements_after
    share = after / max(before, 1)
    spent = (
        f"; --budget of {args.budget:g} s spent, a larger one may shrink it further"
        if reduction.timed_out
        else ""
    )
    echo(
        f"reduced {run.kernel} on {run.target}: {before} -> {after} statements ({share:.0%}), "
        f"{reduction.reproducer.failed.name} still fails alone with: {reduction.reproducer.reproduced_error}"
        f"{spent}; wrote {args.output} (run it with: python {args.output})",
        one_line=True,
    )
    return int(ExitCode.OK)


def _first_line(text: str | None) -> str:
    return (text or "").strip().splitlines()[0] if (text or "").strip() else "unknown error"


EXPERIMENT_COMMANDS: dict[str, Any] = {"resume": cmd_resume, "reduce": cmd_reduce}
