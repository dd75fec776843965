"""The ``irtrace`` command: record, run, show, ir, merge, matrix, targets, schema, instances, layouts,
collect,
and for CI check, bless, repro.

Errors are rendered by ``irtrace.edge.command``: one line on stderr and an exit code from
``ExitCode``; ``--debug`` shows the traceback instead.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from irtrace import __version__
from irtrace.base.errors import ExitCode, IrtraceError, NotInTraceError, UsageError, exit_codes_help
from irtrace.base.native_log import hide_harmless_native_warnings
from irtrace.base.safe_text import terminal_safe
from irtrace.cli.bench_options import add_bench_options, bench_settings
from irtrace.cli.bisect import BISECT_COMMANDS, add_bisect_command
from irtrace.cli.ci import CI_COMMANDS, add_ci_commands
from irtrace.cli.collect import COLLECT_COMMANDS, add_collect_command
from irtrace.cli.experiments import EXPERIMENT_COMMANDS, add_experiment_commands
from irtrace.cli.instances import add_instances_command, check_kernel_file, cmd_instances
from irtrace.cli.layouts import add_layouts_command, cmd_layouts
from irtrace.cli.line_costs import add_lines_option
from irtrace.cli.override import add_override_option, with_overrides
from irtrace.cli.printing import console as _console
from irtrace.cli.printing import escape
from irtrace.cli.printing import first_line as _first_line
from irtrace.cli.printing import run_status as _status
from irtrace.cli.run_options import add_run_command
from irtrace.cli.show import cmd_show, row_count
from irtrace.cli.spans import (
    SPANS_COMMANDS,
    add_line_option,
    add_source_map_option,
    add_spans_command,
    cmd_ir_line,
)
from irtrace.edge.command import (
    Interrupted,
    echo,
    load_trace_warning_if_cut,
    run_command,
    run_subcommand,
)
from irtrace.targets.backends import target_names
from irtrace.trace.model import STATUS_OK, KernelRun, Trace

DEFAULT_OUTPUT = "irtrace.jsonl"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="irtrace",
        description="Record every lowering pass of TileLang kernels on CUDA, ROCm, Ascend and Metal.",
        epilog=exit_codes_help(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--debug", action="store_true", help="show tracebacks instead of one-line errors")
    parser.add_argument("--version", action="version", version=f"irtrace {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    targets_help = f"target to lower for; repeatable. One of: {', '.join(target_names())}"
    record = commands.add_parser(
        "record",
        help="lower kernels through the real pipelines and write a trace",
        description="Lower kernels through TileLang's real pipelines, recording every pass.",
        epilog="specs: path.py | path.py::name | path.py::factory(1024, dtype=T.float16)\n"
        "A kernel named without arguments takes the instance the editor and the MCP server take: "
        "a # tilelang: args(...) directive, a recorded run (irtrace.jsonl, .irtrace/*.jsonl here), "
        "the file's __main__ run with GPU work made harmless, a call in the file, irtrace.toml, "
        "defaults, then symbols; `name()` takes the defaults only.\n\n" + exit_codes_help(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    record.add_argument("specs", nargs="*", metavar="SPEC", help="kernel spec")
    record.add_argument("-t", "--target", action="append", default=[], help=targets_help)
    record.add_argument("-m", "--manifest", help="irtrace.toml listing kernels, arguments and targets")
    record.add_argument(
        "-c",
        "--pass-config",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra pass config, typed as in irtrace.toml: true/false, numbers, Python literals, "
        "else a string (e.g. tl.disable_warp_specialized=true); repeatable",
    )
    record.add_argument(
        "-o", "--output", default=DEFAULT_OUTPUT, help=f"trace file (default {DEFAULT_OUTPUT})"
    )
    record.add_argument("-q", "--quiet", action="store_true", help="print nothing but errors")
    record.add_argument(
        "--isolate",
        action="store_true",
        help="build and lower the kernels in a worker process (--jobs 1): a crash (segfault) in a pass "
        "fails that run only, naming the pass, and a fresh worker goes on with the next kernel",
    )
    record.add_argument(
        "--timeout",
        type=float,
        metavar="S",
        help="give each kernel (factory and lowering) at most S seconds, then kill it and mark the run "
        "timed out; implies --isolate",
    )
    record.add_argument(
        "--machine-code",
        action="store_true",
        help="also compile each CUDA run's kernel source as TileLang does (nvcc): its PTX and SASS become "
        "stages ptx and sass, and registers, spills and shared memory per kernel are kept; needs nvcc and "
        "nvdisasm or cuobjdump (pip install 'tilelang-devtools[cuda]'); no GPU needed",
    )
    add_bench_options(
        record,
        "also run each CUDA kernel on the GPU with TileLang's profiler on random inputs and keep its "
        "latency (median of --bench-repeat timings), the GPU, driver and clocks; needs an NVIDIA GPU",
    )
    record.add_argument(
        "-j",
        "--jobs",
        type=int,
        default=1,
        metavar="N",
        help="lower kernels in N worker processes (a crash or --timeout ends that run only, as with "
        "--isolate); the trace is the same as with one",
    )
    record.add_argument(
        "--order-from",
        metavar="TRACE",
        help="with --jobs, start the runs that took longest in TRACE first (default: the output "
        "file, if a previous recording left it); the trace is the same",
    )
    record.add_argument(
        "--shard",
        metavar="I/N",
        help="record only the Ith of N equal slices of the kernel x target list (for a CI matrix); "
        "irtrace merge of shards 1..N equals one unsharded recording",
    )
    record.add_argument(
        "--repeat",
        type=int,
        default=1,
        metavar="N",
        help="lower each kernel N times and keep each pass's smallest time (noise control for irtrace check)",
    )
    record.add_argument(
        "--instance",
        metavar="LABEL",
        help="for kernels named without arguments: take this one of the real instances found "
        "(`__main__`, a test id, `pid 4242 at gemm.py:30`) instead of the first; `list` prints them "
        "(as `irtrace instances FILE.py`) and records nothing",
    )
    add_override_option(record)
    add_source_map_option(record)
    add_bisect_command(commands)

    add_run_command(commands, DEFAULT_OUTPUT)

    show = commands.add_parser(
        "show", help="print the passes of a trace with times and +/- lines", **_with_exit_codes()
    )
    show.add_argument("trace")
    show.add_argument("-k", "--kernel")
    show.add_argument("-t", "--target")
    show.add_argument("--json", action="store_true", help="print the documented JSON document")
    show.add_argument("--by-pass", action="store_true", help="total time per pass name")
    show.add_argument(
        "--top",
        type=row_count,
        default=0,
        metavar="N",
        help="with --by-pass: only the N passes that took longest, then one line for the rest (0: all)",
    )
    show.add_argument("--changed", action="store_true", help="only passes that changed the module")
    add_lines_option(show)

    ir = commands.add_parser(
        "ir", help="print the IR after one pass (or the final kernel source)", **_with_exit_codes()
    )
    ir.add_argument("trace")
    ir.add_argument("-k", "--kernel")
    ir.add_argument("-t", "--target")
    group = ir.add_mutually_exclusive_group()
    group.add_argument("-p", "--pass", dest="pass_name", metavar="NAME[#N]")
    group.add_argument("--source", action="store_true", help="the final kernel source")
    group.add_argument("--input", action="store_true", help="the module handed to the pipeline")
    ir.add_argument("--before", action="store_true", help="the IR the pass received")
    add_line_option(ir)

    merge = commands.add_parser("merge", help="join trace files into one", **_with_exit_codes())
    merge.add_argument("traces", nargs="+")
    merge.add_argument("-o", "--output", required=True)

    matrix = commands.add_parser(
        "matrix",
        help="backend coverage: kernels x targets with ok or the failing pass, one line per root cause",
        description="Print which kernel lowers on which target, and why not where it fails.",
        epilog="record the coverage first, e.g.\n"
        "  irtrace record --manifest irtrace.toml -t all -o coverage.jsonl\n"
        "  irtrace matrix coverage.jsonl --format markdown >> $GITHUB_STEP_SUMMARY\n\n" + exit_codes_help(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    matrix.add_argument("trace")
    matrix.add_argument("-k", "--kernel", action="append", default=[], help="only these kernels; repeatable")
    matrix.add_argument(
        "--format", choices=("table", "markdown", "json"), default="table", help="default: a terminal table"
    )

    commands.add_parser("targets", help="list the targets by vendor, with aliases", **_with_exit_codes())
    schema = commands.add_parser(
        "schema",
        help="the trace format, generated from the typed schema the reader checks",
        **_with_exit_codes(),
    )
    schema.add_argument(
        "--format",
        choices=("json", "markdown"),
        default="json",
        help="json: a JSON Schema of one trace line (default); markdown: the record tables of docs",
    )
    add_instances_command(commands)
    add_layouts_command(commands)
    add_spans_command(commands)
    add_collect_command(commands)
    add_ci_commands(commands)
    add_experiment_commands(commands)
    return parser


def _with_exit_codes() -> dict[str, Any]:
    """A subcommand's --help ends with the exit-code table, as the tool's does."""
    return {"epilog": exit_codes_help(), "formatter_class": argparse.RawDescriptionHelpFormatter}


_RUN_IN_CHILD: list[bool] = [False]
"""Whether ``irtrace run`` runs the script in a child it can end in time (``edge.supervise``): when
irtrace is the process (its console script, ``python -m irtrace.cli``), not a caller's library."""


def main(argv: Sequence[str] | None = None) -> int:
    _RUN_IN_CHILD[0] = argv is None
    return run_subcommand("irtrace", build_parser(), argv, _run_named_command, catch_signals=True)


def _run_named_command(args: argparse.Namespace) -> int:
    return int(COMMANDS[args.command](args))


# ----------------------------------------------------------------------------- record


def cmd_record(args: argparse.Namespace) -> ExitCode:
    from irtrace.cli.instances import print_file_instances
    from irtrace.cli.record_order import run_times_for
    from irtrace.cli.record_progress import recording_progress, run_warning_lines
    from irtrace.cli.resolved import cli_instance_sources, run_provenance_lines
    from irtrace.lowering.api import RecordRequest, Shard, record_kernels
    from irtrace.lowering.bench import bench_for
    from irtrace.lowering.loader import parse_pass_config
    from irtrace.lowering.machine_code import machine_code_for
    from irtrace.lowering.manifest import load_manifest
    from irtrace.targets.backends import check_target_name
    from irtrace.targets.specs import parse_spec
    from irtrace.trace.writer import TraceWriter

    if not args.specs and not args.manifest:
        raise UsageError("give a kernel spec (path.py::name(args)) or --manifest irtrace.toml")
    if args.timeout is not None and not (0 < args.timeout < 1e9):
        raise UsageError(f"--timeout {args.timeout:g}: give a number of seconds above 0")
    for name in args.target:
        check_target_name(name)  # `all`, `cuda:*` and `hip:*` are expanded per kernel's dialect
    bench = bench_settings(args)  # a bad --bench-shape is said before a missing GPU
    _check_machine_code_and_bench(args)
    if args.jobs < 1 or args.repeat < 1:
        raise UsageError("--jobs and --repeat take a number from 1 up")
    if args.bench and args.jobs > 1:
        raise UsageError("--bench launches the kernels in this process; leave out --jobs")
    shard = Shard.parse(args.shard) if args.shard is not None else None
    configs = dict(parse_pass_config(item) for item in args.pass_config)
    maps = args.source_map
    listing = args.instance == "list"
    sources = cli_instance_sources(None if listing else args.instance)
    requests = [
        RecordRequest(parse_spec(s), tuple(args.target), configs, source_map=maps, instances=sources)
        for s in args.specs
    ]
    if listing:
        if args.manifest:
            raise UsageError("--instance list lists the instances of kernel specs; leave out --manifest")
        for request in requests:
            check_kernel_file(request)
        return print_file_instances(requests, as_json=False)
    if args.manifest:
        for request in load_manifest(args.manifest):
            targets = tuple(args.target) or request.targets
            merged = {**request.pass_configs, **configs}
            requests.append(replace(request, targets=targets, pass_configs=merged, source_map=maps))
    for request in requests:
        check_kernel_file(request)
    run_times = run_times_for(args.order_from, args.output, args.jobs)
    # Inputs are checked; only now is the output touched, and it is replaced only when done.
    writer = TraceWriter(args.output, partial=True)
    _note_stale_partial(writer)
    try:
        with (
            recording_progress(quiet=args.quiet) as progress,  # before fd 2 becomes a pipe
            hide_harmless_native_warnings(debug=args.debug) as native,
            machine_code_for(writer, args.machine_code) as compiler,
            bench_for(writer, args.bench, bench) as bencher,
        ):
            hooks = [hook for hook in (compiler.after_run if compiler else None, bencher) if hook is not None]

            def after_run(run: KernelRun, prepared: Any) -> None:
                for hook in hooks:
                    hook(run, prepared)

            recording = record_kernels(
                requests,
                writer,
                jobs=args.jobs,
                shard=shard,
                repeat=args.repeat,
                isolate=args.isolate or args.timeout is not None,
                timeout=args.timeout,
                after_run=after_run if hooks else None,
                progress=progress,
                run_times=run_times,
            )
        runs = [writer.run(run.run_id) for run in recording.runs]  # with their machine code and latency
        errors = recording.errors
    except KeyboardInterrupt:
        raise _interrupted(writer, args.output) from None
    except BaseException:
        writer.abandon(keep=False)
        raise
    if runs or shard is not None:  # a shard with no work still leaves a trace for `irtrace merge`
        writer.close()
    else:
        writer.abandon(keep=False)
    written = bool(runs or shard is not None)
    if not args.quiet:
        print_summary(runs, args.output if written else None)
        for line in run_provenance_lines(runs):
            echo(line, one_line=True)
        if compiler is not None:
            print(
                f"machine code: {compiler.compiled} CUDA run(s) compiled, {compiler.compile_s:.1f} s of nvcc "
                f"in the background, {compiler.waited_s:.1f} s waited for at the end",
                file=sys.stderr,
            )
    for line in [] if args.quiet else run_warning_lines(runs):
        echo(line, stderr=True, one_line=True)
    if not written and not errors:
        print(f"irtrace: nothing was recorded, so {args.output} was not written", file=sys.stderr)
    for error in errors:
        echo(f"irtrace: error: {error.message}", stderr=True, one_line=True)
    note = native.note("irtrace")
    if note and not args.quiet:
        print(note, file=sys.stderr)
    return _outcome(runs, errors)


def _check_machine_code_and_bench(args: argparse.Namespace) -> None:
    """A missing CUDA tool or GPU is said before anything is lowered."""
    if args.machine_code:
        from irtrace.lowering.machine_code import find_cuda_tools

        find_cuda_tools()
    if args.bench:
        from irtrace.lowering.bench import require_gpu

        if args.isolate or args.timeout is not None:
            raise UsageError(
                "--bench launches the kernels in this process; leave out --isolate and --timeout"
            )
        require_gpu()


def _note_stale_partial(writer: Any) -> None:
    if writer.replaced_stale_partial:
        print(
            f"irtrace: note: replacing {writer.partial_path}, left by an earlier run that was cut short",
            file=sys.stderr,
        )


def _interrupted(writer: Any, output: str) -> Interrupted:
    """Stop writing; what was recorded stays in ``OUTPUT.partial`` and the output is untouched."""
    count = len(writer.trace().runs)
    kept = writer.abandon(keep=True)
    if kept is None:
        return Interrupted(f"interrupted; {output} was left as it was")
    return Interrupted(
        f"interrupted; the {count} run(s) begun so far are in {kept} (cut short); {output} was left as it was"
    )


def _outcome(runs: Sequence[KernelRun], errors: Sequence[IrtraceError]) -> ExitCode:
    if errors:
        return errors[0].exit_code
    if any(run.status != STATUS_OK for run in runs):
        return ExitCode.LOWERING
    return ExitCode.OK


def print_summary(runs: Sequence[KernelRun], output: str | None) -> None:
    from rich.table import Table

    console = _console()
    table = Table(box=None, pad_edge=False, header_style="bold")
    machine = any(run.resources for run in runs)
    benched = any(run.bench is not None for run in runs)
    columns = ["kernel", "target", "status", "passes", "changed", "lower ms", "source"]
    columns += ["regs", "spills", "smem"] if machine else []
    columns += ["latency"] if benched else []
    for column in columns:
        table.add_column(
            column, justify="left" if column in ("kernel", "target", "status", "source") else "right"
        )
    for run in runs:
        status = run.status if run.status == STATUS_OK else f"[red]{_status(run)}[/red]"
        cells = [
            escape(run.kernel),
            escape(run.target),
            status,
            str(len(run.passes)),
            str(sum(p.changed for p in run.passes)),
            f"{run.total_s * 1000:.0f}" if run.total_s is not None else "-",
            (run.source_sha256 or "-")[:12],
        ]
        if machine:
            cells += _resource_cells(run)
        if benched:
            cells.append(_latency(run))
        table.add_row(*cells)
    if runs:
        console.print(table)
    for run in runs:
        if run.status != STATUS_OK:
            failed = next((p for p in run.passes if p.failed), None)
            where = f" in pass {failed.name}" if failed else ""
            console.print(
                f"[red]{_status(run)}[/red] "
                + escape(f"{run.kernel} on {run.target}{where}: {_first_line(run.error)}")
            )
    if output is not None:
        console.print(escape(f"trace written to {output}"))


def _resource_cells(run: KernelRun) -> list[str]:
    """Registers, spilled bytes and shared memory; the largest over the run's kernel functions."""
    from irtrace.trace.resources import format_bytes

    if not run.resources:
        return ["-", "-", "-"]
    spills = max(item.spills for item in run.resources)
    return [
        str(max(item.registers for item in run.resources)),
        f"[red]{spills} B[/red]" if spills else "0",
        format_bytes(max(item.smem for item in run.resources)),
    ]


def _latency(run: KernelRun) -> str:
    if run.bench is None:
        return "-"
    if run.bench.latency_ms is None:
        return "[red]failed[/red]"
    from irtrace.perf.latency import latency_cell

    return escape(latency_cell(run.bench))  # the median and the range of repetitions


# ----------------------------------------------------------------------------- run


def cmd_run(args: argparse.Namespace) -> ExitCode:
    from irtrace.lowering.capture import (
        SOURCE_MAP_ENV,
        ScriptOutcome,
        lower_for_targets,
        run_script,
        split_command,
    )
    from irtrace.lowering.capture_extras import add_machine_code_and_benches
    from irtrace.targets.backends import PORTABLE, expand_target, get_target
    from irtrace.trace.writer import TraceWriter

    command = list(args.script)
    if command and command[0] == "--":
        command = command[1:]
    named = {spec.name: spec for name in args.target for spec in expand_target(name, PORTABLE)}
    targets = list(named.values())
    auto_target = get_target(args.auto_target) if args.auto_target else None
    split_command(command)  # the script is there: checked before the output is touched
    os.environ[SOURCE_MAP_ENV] = "1" if args.source_map else "0"
    bench = bench_settings(args)
    if args.bench and args.no_gpu:
        raise UsageError(
            "--bench times real launches, and --no-gpu launches nothing (its kernels are stand-ins); "
            "bench on a machine with an NVIDIA GPU without --no-gpu"
        )
    if args.machine_code:
        from irtrace.lowering.machine_code import find_cuda_tools

        find_cuda_tools()  # a missing nvcc is said before the script runs
    if _RUN_IN_CHILD[0]:
        from irtrace.base.output import partial_path
        from irtrace.edge.supervise import run_in_child

        _RUN_IN_CHILD[0] = False  # the child runs the script itself

        def in_child() -> int:
            return run_command("irtrace", lambda: int(cmd_run(args)), debug=args.debug, catch_signals=True)

        return run_in_child(in_child, partial_path(args.output))
    writer = TraceWriter(args.output, partial=True)
    _note_stale_partial(writer)
    native_log = contextlib.ExitStack()
    native = native_log.enter_context(hide_harmless_native_warnings(debug=args.debug))

    def finish(outcome: ScriptOutcome) -> ExitCode:
        for warning in outcome.warnings:
            print(f"irtrace: warning: {warning}", file=sys.stderr)
        runs = list(outcome.runs)
        try:
            with native_log:
                kernels = dict(outcome.kernels)
                if targets:
                    runs += lower_for_targets(outcome.captured, targets, writer, kernels)
                if args.machine_code or args.bench:
                    runs = add_machine_code_and_benches(
                        writer,
                        runs,
                        kernels,
                        machine_code=args.machine_code,
                        bench=bench if args.bench else None,
                    )
        except KeyboardInterrupt:
            raise _interrupted(writer, args.output) from None
        except BaseException:
            writer.abandon(keep=False)
            raise
        note = native.note("irtrace")
        if note and not args.quiet:
            print(note, file=sys.stderr)
        return _finish_run(args, writer, runs, outcome)

    def finish_at_os_exit(outcome: ScriptOutcome) -> int:
        """The script called ``os._exit``: finish as if it had ended, then exit with our status."""
        return run_command("irtrace", lambda: finish(outcome), debug=args.debug)

    try:
        outcome = run_script(
            command, writer, auto_target=auto_target, on_os_exit=finish_at_os_exit, stand_ins=args.no_gpu
        )
    except KeyboardInterrupt:
        native_log.close()
        raise _interrupted(writer, args.output) from None
    except BaseException:
        native_log.close()
        writer.abandon(keep=False)
        raise
    return finish(outcome)


def _finish_run(args: argparse.Namespace, writer: Any, runs: list[KernelRun], outcome: Any) -> ExitCode:
    """Put the trace in place and say how the script went (7 when it failed or exited non-zero)."""
    from irtrace.lowering.capture import describe_script_failure

    if runs:
        writer.close()
    else:
        writer.abandon(keep=False)
    if not args.quiet:
        print_summary(runs, args.output if runs else None)
    if not runs:
        print(f"irtrace: the script lowered no kernel, so {args.output} was not written", file=sys.stderr)
    if args.target and outcome.child_runs:
        print(
            f"irtrace: note: the {outcome.child_runs} run(s) lowered in other processes were not lowered "
            "again for -t targets",
            file=sys.stderr,
        )
    if outcome.error is not None:
        print(
            terminal_safe(
                f"irtrace: error: the script failed after {len(runs)} captured run(s): "
                f"{describe_script_failure(outcome.error, stand_ins=bool(args.no_gpu))}",
                newlines=False,
            ),
            file=sys.stderr,
        )
        return ExitCode.SCRIPT
    return _outcome(runs, [])


# ----------------------------------------------------------------------------- show / ir / merge


def _load(path: str) -> Trace:
    return load_trace_warning_if_cut(path, "irtrace")


def cmd_ir(args: argparse.Namespace) -> ExitCode:
    if args.line is not None:
        return cmd_ir_line(args)
    if not (args.pass_name or args.source or args.input):
        raise UsageError("irtrace ir needs one of -p/--pass, --source, --input or --line")
    trace = _load(args.trace)
    run = trace.find_run(args.kernel, args.target)
    if args.source:
        source = trace.kernel_source(run)
        if source is None:
            raise NotInTraceError(
                f"{run.kernel} on {run.target} has no kernel source in the trace (status {run.status})"
            )
        text = source
    elif args.input:
        text = trace.text(run.input_ir)
    else:
        record = run.find_pass(args.pass_name)
        text = trace.ir_before(record) if args.before else trace.ir_after(record)
        if record.failed and not args.before:
            echo(f"irtrace: {record.name} failed; showing the IR it received", stderr=True, one_line=True)
    echo(text, end="" if text.endswith("\n") else "\n")
    return ExitCode.OK


def cmd_merge(args: argparse.Namespace) -> ExitCode:
    from irtrace.trace.writer import merge_warnings, stream_merged

    # Every input scanned (and its texts checked) before the output is touched; runs are then
    # read one at a time, and the output replaced only once complete.
    traces = [load_trace_warning_if_cut(path, "irtrace", streamed=True) for path in args.traces]
    for warning in merge_warnings(traces):
        echo(f"irtrace: warning: {warning}", stderr=True, one_line=True)
    try:
        merged = stream_merged(traces, args.output)
    except KeyboardInterrupt:
        raise Interrupted(f"interrupted; {args.output} was left as it was") from None
    print(f"merged {merged} run(s) from {len(args.traces)} file(s) into {args.output}")
    return ExitCode.OK


def cmd_targets(args: argparse.Namespace) -> ExitCode:
    from rich.table import Table

    from irtrace.targets.backends import aliases_of, target_patterns, targets_by_vendor

    table = Table(box=None, pad_edge=False)
    for column in ("target", "family", "hardware", "source", "aliases"):
        table.add_column(column)
    for vendor, specs in targets_by_vendor().items():
        table.add_row(f"[bold]{vendor}[/bold]", "", "", "", "")
        for spec in specs:
            table.add_row(
                f"  {spec.name}",
                spec.family,
                spec.hardware,
                spec.source_language,
                ", ".join(aliases_of(spec.name)),
            )
    console = _console()
    console.print(table)
    patterns = ", ".join(target_patterns()[1:])
    console.print(f"all: every target of the kernel's dialect; {patterns}: every architecture of a backend")
    return ExitCode.OK


def cmd_schema(args: argparse.Namespace) -> ExitCode:

    from irtrace.trace.schema_docs import json_schema, markdown

    text = json.dumps(json_schema(), indent=2) + "\n" if args.format == "json" else markdown()
    sys.stdout.write(text)
    return ExitCode.OK


def cmd_matrix(args: argparse.Namespace) -> ExitCode:

    from irtrace.ci.coverage import coverage_matrix, matrix_document, matrix_markdown
    from irtrace.cli.matrix import matrix_renderable

    trace = _load(args.trace)
    runs = [run for run in trace.runs if not args.kernel or run.kernel in args.kernel]
    if not runs:
        raise NotInTraceError(f"{args.trace} holds no run of {', '.join(args.kernel) or 'any kernel'}")
    matrix = coverage_matrix(runs)
    if args.format == "json":
        print(json.dumps(matrix_document(matrix), indent=2))
    elif args.format == "markdown":
        echo(matrix_markdown(matrix), end="")
    else:
        console = _console()
        console.print(matrix_renderable(matrix, console))
    return ExitCode.OK


COMMANDS = {
    "record": with_overrides(cmd_record),
    "run": with_overrides(cmd_run),
    "show": cmd_show,
    "ir": cmd_ir,
    "merge": cmd_merge,
    "targets": cmd_targets,
    "matrix": cmd_matrix,
    "schema": cmd_schema,
    "instances": cmd_instances,
    "layouts": cmd_layouts,
    **SPANS_COMMANDS,
    **COLLECT_COMMANDS,
    **CI_COMMANDS,
    **BISECT_COMMANDS,
    **EXPERIMENT_COMMANDS,
}


if __name__ == "__main__":
    sys.exit(main())
