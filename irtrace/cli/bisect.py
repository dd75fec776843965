"""``irtrace bisect configs|versions``: which pass option, or which TileLang release, changes a
kernel's source (or its failure), and where in the pipeline the IR first parts (passdiff)."""

from __future__ import annotations

import argparse
import itertools
import json
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from irtrace.base.errors import ExitCode, InputError, UsageError, exit_codes_help
from irtrace.diff.compare import compare_runs
from irtrace.edge.command import echo
from irtrace.trace.model import STATUS_OK, KernelRun, Trace

BISECT_EPILOG = """\
configs: the kernel is lowered once as given (the base), then once per pass option with that
option switched (a disable_/enable_ option turned on, or off when -c set it on). A variant
"changes" the kernel when its source, its status or its error differs from the base's; its
first differing pass is where passdiff finds the two runs' IR first parting.
versions: each --python runs this irtrace's `record` against its own TileLang; the runs are put
in release order and the first release whose source or failure differs from the one before is
reported, with its first differing pass and the source diff.
Both exit 0 when the bisect ran, whatever it found.

"""


def add_bisect_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``bisect configs`` and ``bisect versions`` to ``irtrace``'s subcommands."""
    ending: dict[str, Any] = {
        "epilog": BISECT_EPILOG + exit_codes_help(),
        "formatter_class": argparse.RawDescriptionHelpFormatter,
    }
    bisect = commands.add_parser(
        "bisect",
        help="which pass option or TileLang release changes a kernel's source or failure",
        description="Find the pass options (configs) or the TileLang release (versions) that change "
        "a kernel's generated source or its failure, with the first pass where the IR differs.",
        **ending,
    )
    modes = bisect.add_subparsers(dest="bisect_mode", metavar="MODE", required=True)
    configs = modes.add_parser(
        "configs",
        help="switch TileLang's pass options one at a time",
        **ending,
    )
    configs.add_argument(
        "--option",
        action="append",
        default=[],
        metavar="KEY",
        help="switch only this option (repeatable); default: every tl.disable_*/tl.enable_* option of "
        "TileLang's PassConfigKey that TVM registers as on/off, but the verbose, debug and dump ones",
    )
    configs.add_argument("-o", "--output", help="also write every lowering (base and variants) to this trace")
    versions = modes.add_parser(
        "versions",
        help="record the kernel with each environment's TileLang and find the first release that differs",
        **ending,
    )
    versions.add_argument(
        "--python",
        action="append",
        default=[],
        required=True,
        metavar="PYTHON",
        help="an environment's interpreter (ENV/bin/python) with TileLang; repeatable, at least two",
    )
    versions.add_argument(
        "--timeout", type=float, metavar="S", help="give each environment at most S seconds"
    )
    versions.add_argument("-o", "--output", metavar="DIR", help="keep each environment's trace in DIR")
    for parser in (configs, versions):
        parser.add_argument(
            "spec", metavar="SPEC", help="kernel spec naming one kernel (path.py::name(args))"
        )
        parser.add_argument("-t", "--target", required=True, help="the target to lower for")
        parser.add_argument(
            "-c", "--pass-config", action="append", default=[], metavar="KEY=VALUE", help="base pass config"
        )
        parser.add_argument("--json", action="store_true", help="print a JSON document (docs/irtrace.md)")


@dataclass(frozen=True)
class Change:
    """How run ``b`` differs from run ``a``: what changed, and where the IR first parts."""

    change: str | None
    """``source``, ``failure`` (status or error), or ``None`` when the kernel is the same."""
    first_pass: str | None
    first_pass_added: int
    first_pass_removed: int
    source_added: int
    source_removed: int
    source_diff: str


def describe_change(trace_a: Trace, run_a: KernelRun, trace_b: Trace, run_b: KernelRun) -> Change:
    failed_a, failed_b = run_a.status != STATUS_OK, run_b.status != STATUS_OK
    if failed_a != failed_b or (failed_a and _first_line(run_a.error) != _first_line(run_b.error)):
        change: str | None = "failure"
    elif run_a.source_sha256 != run_b.source_sha256:
        change = "source"
    else:
        change = None
    if change is None:
        return Change(None, None, 0, 0, 0, 0, "")
    comparison = compare_runs(trace_a, run_a, trace_b, run_b)
    first = comparison.first_difference
    diff, source = comparison.diff, comparison.source_diff
    return Change(
        change,
        first.label if first is not None else None,
        diff.added if diff is not None else 0,
        diff.removed if diff is not None else 0,
        source.added if source is not None else 0,
        source.removed if source is not None else 0,
        source.unified("a", "b") if source is not None else "",
    )


def _first_line(text: str | None) -> str:
    return next((line for line in (text or "").splitlines() if line.strip()), "")


def cmd_bisect(args: argparse.Namespace) -> ExitCode:
    if args.bisect_mode == "configs":
        return bisect_configs(args)
    return bisect_versions(args)


# ----------------------------------------------------------------------------- configs


def bisect_configs(args: argparse.Namespace) -> ExitCode:
    from irtrace.lowering.api import RecordRequest, record_kernels
    from irtrace.lowering.bisect import (
        base_kernel_name,
        on_off_options,
        switchable_pass_options,
        switched,
        variant_name,
    )
    from irtrace.lowering.loader import parse_pass_config
    from irtrace.targets.backends import get_target
    from irtrace.targets.specs import parse_spec
    from irtrace.trace.writer import TraceWriter

    target = get_target(args.target).name
    spec = parse_spec(args.spec)
    base = dict(parse_pass_config(item) for item in args.pass_config)
    known = on_off_options()
    for option in args.option:
        if option not in known:
            raise UsageError(
                f"--option {option!r} is not an on/off pass option; choose from {', '.join(known)}"
            )
    options = list(dict.fromkeys(args.option)) or switchable_pass_options()
    name = base_kernel_name(spec)
    requests = [RecordRequest(spec, (target,), base, name)]
    values = {option: switched(base, option) for option in options}
    for option, value in values.items():
        requests.append(
            RecordRequest(spec, (target,), {**base, option: value}, variant_name(name, option, value))
        )
    writer = TraceWriter(args.output) if args.output else TraceWriter()
    with writer:
        recording = record_kernels(requests, writer)
    if recording.errors:
        raise recording.errors[0]
    trace = writer.trace()
    runs = recording.runs
    if len(runs) != len(requests):
        raise UsageError(f"{args.spec} holds several kernels; name one (path.py::name)")
    base_run = runs[0]
    rows = []
    for option, run in zip(options, runs[1:], strict=True):
        change = describe_change(trace, base_run, trace, run)
        rows.append((option, values[option], run, change))
    if args.json:
        echo(json.dumps(_configs_document(base_run, rows), indent=2))
    else:
        _print_configs(base_run, rows)
    return ExitCode.OK


def _run_json(run: KernelRun) -> dict[str, Any]:
    return {
        "status": run.status,
        "source_sha256": run.source_sha256,
        "error": _first_line(run.error) or None,
    }


def _change_json(change: Change) -> dict[str, Any]:
    return {
        "change": change.change,
        "first_pass": change.first_pass,
        "first_pass_lines": {"added": change.first_pass_added, "removed": change.first_pass_removed},
        "source_lines": {"added": change.source_added, "removed": change.source_removed},
    }


def _configs_document(base: KernelRun, rows: Sequence[tuple[str, bool, KernelRun, Change]]) -> dict[str, Any]:
    return {
        "kernel": base.kernel,
        "target": base.target,
        "tilelang_version": base.tilelang_version,
        "base": {"pass_configs": dict(base.pass_configs), **_run_json(base)},
        "options": [
            {"option": option, "value": value, **_run_json(run), **_change_json(change)}
            for option, value, run, change in rows
        ],
        "changing": [option for option, _, _, change in rows if change.change is not None],
    }


def _print_configs(base: KernelRun, rows: Sequence[tuple[str, bool, KernelRun, Change]]) -> None:
    echo(
        f"{base.kernel} on {base.target}: {len(rows)} pass option(s) switched one at a time "
        f"against the base ({base.status})"
    )
    width = max([len(option) for option, *_ in rows] + [6])
    echo(f"{'option':<{width}}  value  {'result':<15} {'first differing pass':<34} source +/-")
    for option, value, run, change in rows:
        result = {None: "same", "source": "source changed", "failure": f"now {run.status}"}[change.change]
        where = change.first_pass or "-"
        lines = f"+{change.source_added} -{change.source_removed}" if change.change else "-"
        echo(f"{option:<{width}}  {str(value).lower():<5}  {result:<15} {where:<34} {lines}", one_line=True)
    changing = [option for option, _, _, change in rows if change.change is not None]
    echo(f"{len(changing)} option(s) change the kernel: {', '.join(changing) or 'none'}")


# ----------------------------------------------------------------------------- versions


def bisect_versions(args: argparse.Namespace) -> ExitCode:
    from irtrace.lowering.bisect import check_interpreters, record_in_environment, version_key
    from irtrace.targets.backends import get_target
    from irtrace.trace.reader import load_trace

    target = get_target(args.target).name
    check_interpreters(args.python)
    if args.timeout is not None and not args.timeout > 0:
        raise UsageError(f"--timeout {args.timeout:g}: give a number of seconds above 0")
    if args.output:
        folder = Path(args.output)
        if folder.exists() and not folder.is_dir():
            raise InputError(f"-o {args.output!r} is not a folder")
        folder.mkdir(parents=True, exist_ok=True)
        scratch = None
    else:
        scratch = tempfile.TemporaryDirectory(prefix="irtrace-bisect-")
        folder = Path(scratch.name)
    try:
        recorded: list[tuple[Trace, KernelRun]] = []
        failed: list[dict[str, Any]] = []
        for number, python in enumerate(args.python, 1):
            result = record_in_environment(
                python, args.spec, target, folder / f"env-{number}.jsonl", args.pass_config, args.timeout
            )
            trace = load_trace(result.trace_path) if result.trace_path is not None else None
            if trace is None or len(trace.runs) != 1:
                why = result.error or f"{len(trace.runs) if trace else 0} runs recorded; name one kernel"
                failed.append({"python": python, "exit_code": result.exit_code, "error": why})
                continue
            recorded.append((trace, trace.runs[0]))
        recorded.sort(key=lambda item: version_key(item[1]))
        first = None
        for (trace_a, run_a), (trace_b, run_b) in itertools.pairwise(recorded):
            change = describe_change(trace_a, run_a, trace_b, run_b)
            if change.change is not None:
                first = (run_a, run_b, change)
                break
    finally:
        if scratch is not None:
            scratch.cleanup()
    document = _versions_document(recorded, failed, first)
    if args.json:
        echo(json.dumps(document, indent=2))
    else:
        _print_versions(document, first)
    return ExitCode.OK


def _versions_document(
    recorded: Sequence[tuple[Trace, KernelRun]],
    failed: Sequence[dict[str, Any]],
    first: tuple[KernelRun, KernelRun, Change] | None,
) -> dict[str, Any]:
    change = None
    if first is not None:
        run_a, run_b, found = first
        change = {
            "from": run_a.tilelang_version,
            "to": run_b.tilelang_version,
            **_change_json(found),
            "source_diff": found.source_diff,
        }
    return {
        "kernel": recorded[0][1].kernel if recorded else None,
        "target": recorded[0][1].target if recorded else None,
        "environments": [{"tilelang_version": run.tilelang_version, **_run_json(run)} for _, run in recorded],
        "not_recorded": list(failed),
        "first_change": change,
    }


def _print_versions(document: dict[str, Any], first: tuple[KernelRun, KernelRun, Change] | None) -> None:
    for env in document["environments"]:
        detail = (env["source_sha256"] or "-")[:12] if env["status"] == STATUS_OK else env["error"]
        echo(f"tilelang {env['tilelang_version']:<10} {env['status']:<7} {detail}", one_line=True)
    for env in document["not_recorded"]:
        echo(f"{env['python']}: not recorded (exit {env['exit_code']}): {env['error']}", one_line=True)
    if first is None:
        echo("no release changes the kernel's source or failure")
        return
    run_a, run_b, change = first
    echo(
        f"first change: tilelang {run_a.tilelang_version} -> {run_b.tilelang_version}: {change.change}; "
        f"first differing pass {change.first_pass or '-'}; "
        f"source +{change.source_added} -{change.source_removed}",
        one_line=True,
    )
    if change.source_diff:
        echo(change.source_diff)


BISECT_COMMANDS = {"bisect": cmd_bisect}
