"""Traced against untraced lowering time, per example and target, in one process.

For each kernel of examples/irtrace.toml and each of its targets, lowers the same PrimFunc with
plain ``tilelang.lower`` and with irtrace's recorder, side by side ``--repeat`` times (the order
alternates: untraced first, then traced first), and prints the medians, the ratio and the trace
size. Ends with ``RESULT max_ratio=<x> median_ratio=<y> max_ratio_of_medians=<x'>
median_ratio_of_medians=<y'>`` over every kernel and target.

A pair's ``ratio`` is the median of each repeat's traced / untraced time: a traced lowering is
compared with the untraced one beside it. The machines drift by as much as tracing costs (the
same untraced lowering takes 140-290 ms of CPU time in one process on the 2-core VM, in stretches
of several runs), and a drift that covers two traced runs of three moves the median of the traced
runs but not the median of the pairs' ratios. ``ratio of medians`` (median traced / median
untraced, what this script reported before 2026-12-03) is printed beside it.

    .venv/bin/python bench/trace_overhead.py [--repeat 5] [--manifest examples/irtrace.toml] [--sync]
        [--only 'cpu_gemm cuda:sm_90a' ...] [--shard I/N] [--switch-interval 0.0005] [--null] [--no-ir]
        [--null-beside]

``--null`` lowers untraced on both sides: its ratios are what the machine's noise alone gives
with the same ``--repeat`` (an A/A run), the scale against which a sweep's max is read. On a host
with many cores, run the shards at once, each on its own cores (``taskset -c 0-7 ... --shard 1/2``
and ``taskset -c 8-15 ... --shard 2/2``): on the 16-core H200 host the A/A max fell from 1.245 to
1.136 (97 of the 108 pairs) that way.
``--null-beside`` adds a second untraced lowering to each repeat's rotation and prints its ratio
against the first (``aa``) beside the traced one, and ``null_max_ratio``/``null_median_ratio`` on
the RESULT line: the machine's noise in the same minutes as the figures it is read against (on
the H200 host a separate ``--null`` sweep read 1.127 one hour and 1.255 another).
``--no-ir`` records passes and times without IR texts: what the callbacks and records cost alone
(on the H200 host about a third of the full cost; docs/performance.md, "Tracing cost").
``--sync`` measures the crash-safe mode ``irtrace record`` and ``run`` use (every print on the
pipeline's thread); the default is the print pool every other caller of ``record_lowering`` gets.
``--source-map-cost`` also lowers traced with source maps (``srcmap`` records, ``--source-map``) and adds
``median_map_cost`` (traced with maps / traced without, median over runs) to the RESULT line.
``--smoke`` (for CI) lowers one small GEMM for one target, twice each way, instead of the manifest.
"""

from __future__ import annotations

import argparse
import functools
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def lower_untraced(func: Any, tvm_target: Any, configs: dict[str, Any]) -> float:
    import tilelang
    import tvm

    started = time.perf_counter()
    with tvm.transform.PassContext(opt_level=3, config=configs), tvm_target:
        tilelang.lower(func, target=tvm_target)
    return time.perf_counter() - started


def lower_traced(
    func: Any,
    target: Any,
    tvm_target: Any,
    configs: dict[str, Any],
    path: Path,
    *,
    threaded: bool = True,
    source_map: bool = False,
    ir: bool = True,
    switch_interval: float | None = None,
) -> float:
    from irtrace.lowering.recorder import CaptureOptions, LoweringOptions, RunHeader, record_lowering
    from irtrace.trace.writer import TraceWriter

    interval = sys.getswitchinterval()
    if switch_interval is not None:  # how often a thread waiting for the GIL asks for it
        sys.setswitchinterval(switch_interval)
    started = time.perf_counter()
    with TraceWriter(path) as writer:
        result = record_lowering(
            func,
            writer,
            RunHeader("bench"),
            LoweringOptions(
                target,
                tvm_target,
                configs,
                capture=CaptureOptions(ir=ir, threaded=threaded, source_map=source_map),
            ),
        )
    elapsed = time.perf_counter() - started
    sys.setswitchinterval(interval)
    if result.error is not None:
        raise RuntimeError(f"traced lowering failed: {result.run.error}")
    return elapsed


def smoke_manifest(folder: Path) -> str:
    """``--smoke``'s manifest, written into ``folder``: one small GEMM for one target."""
    manifest = folder / "smoke.toml"
    gemm = ROOT / "examples" / "gemm.py"
    manifest.write_text(f'[[kernel]]\nspec = "{gemm}::matmul(256, 256, 256)"\ntargets = ["cuda:sm_90"]\n')
    return str(manifest)


def side_by_side(runs: Sequence[Callable[[], float]], repeat: int) -> list[list[float]]:
    """Each run's times, ``repeat`` times each, side by side: the order turns by one each repeat
    (untraced first, then traced first), so no run always follows the same one."""
    times: list[list[float]] = [[] for _ in runs]
    for index in range(repeat):
        for offset in range(len(runs)):
            which = (index + offset) % len(runs)
            times[which].append(runs[which]())
    return times


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--manifest", default=str(ROOT / "examples" / "irtrace.toml"))
    parser.add_argument(
        "--only",
        action="append",
        help="substring of 'kernel target' to restrict the run (repeat: any of them)",
    )
    parser.add_argument(
        "--shard",
        help="I/N: only every N-th kernel and target, from the I-th (split one long run into N commands)",
    )
    parser.add_argument(
        "--sync",
        action="store_true",
        help="print every module on the pipeline's thread, as irtrace record and run do (crash-safe: "
        "every record is in the file before the next pass runs); default: the print pool, as the "
        "language server, the MCP server and record_lowering's callers get",
    )
    parser.add_argument(
        "--source-map-cost",
        action="store_true",
        help="also lower traced with source maps (--source-map), and report what the maps cost",
    )
    parser.add_argument(
        "--no-ir",
        action="store_true",
        help="record passes and times without IR texts (CaptureOptions(ir=False), what the language "
        "server's hints ask for): what the instrument callbacks and the records cost alone",
    )
    parser.add_argument(
        "--null",
        action="store_true",
        help="lower untraced on both sides (an A/A run): the ratios then show the machine's noise alone",
    )
    parser.add_argument(
        "--null-beside",
        action="store_true",
        help="also lower untraced a second time in each repeat, and report its ratio to the first "
        "(an A/A ratio measured in the same minutes as the traced one)",
    )
    parser.add_argument(
        "--switch-interval",
        type=float,
        help="Python's thread switch interval (seconds; default 0.005) during each traced lowering: "
        "measures what GIL hand-offs between the pipeline's thread and the print threads cost",
    )
    parser.add_argument("--smoke", action="store_true", help="one small GEMM for one target, twice: for CI")
    args = parser.parse_args()

    from irtrace.lowering.api import prepare_request
    from irtrace.lowering.manifest import load_manifest

    shard, shards = (int(part) for part in (args.shard or "1/1").split("/"))
    ratios: list[float] = []
    ratios_of_medians: list[float] = []
    map_costs: list[float] = []
    null_ratios: list[float] = []
    ordinal = -1
    workdir = Path(tempfile.mkdtemp(prefix="irtrace-bench-"))
    if args.smoke:
        args.manifest, args.repeat = smoke_manifest(workdir), 2
    print(
        f"{'kernel':<22} {'target':<13} {'untraced ms':>12} {'traced ms':>10} {'ratio':>6} "
        f"{'of medians':>9} {'trace KiB':>10}"
    )
    for request in load_manifest(args.manifest):
        for prepared in prepare_request(request):
            label = f"{prepared.name} {prepared.target.name}"
            if args.only and not any(part in label for part in args.only):
                continue
            ordinal += 1
            if ordinal % shards != shard - 1:
                continue
            if prepared.built is None:
                raise RuntimeError(f"{label} could not be built: {prepared.error}")
            built, target, tvm_target = prepared.built, prepared.target, prepared.tvm_target
            configs = prepared.pass_configs
            trace_path = workdir / "bench.jsonl"
            lower_untraced(built.func, tvm_target, configs)  # warm caches once for both
            traced_to = functools.partial(
                lower_traced,
                built.func,
                target,
                tvm_target,
                configs,
                threaded=not args.sync,
                ir=not args.no_ir,
                switch_interval=args.switch_interval,
            )
            untraced_run = functools.partial(lower_untraced, built.func, tvm_target, configs)
            runs = [untraced_run, untraced_run if args.null else functools.partial(traced_to, trace_path)]
            if args.source_map_cost:
                runs.append(functools.partial(traced_to, workdir / "mapped.jsonl", source_map=True))
            if args.null_beside:
                runs.append(untraced_run)
            untraced, traced, *others = side_by_side(runs, args.repeat)
            mapped = others[0] if args.source_map_cost else []
            null_note = ""
            if args.null_beside:
                null_ratios.append(
                    statistics.median(a / u for a, u in zip(others[-1], untraced, strict=True))
                )
                null_note = f"  aa {null_ratios[-1]:.3f}"
            base, with_trace = statistics.median(untraced), statistics.median(traced)
            map_note = ""
            if mapped:
                map_costs.append(statistics.median(m / t for m, t in zip(mapped, traced, strict=True)))
                map_note = f"  with maps {statistics.median(mapped) * 1000:.1f} ms: x{map_costs[-1]:.3f}"
            ratio = statistics.median(t / u for t, u in zip(traced, untraced, strict=True))
            ratios.append(ratio)
            ratios_of_medians.append(with_trace / base)
            size = trace_path.stat().st_size / 1024 if trace_path.exists() else 0.0
            print(
                f"{prepared.name:<22} {target.name:<13} {base * 1000:>12.1f} "
                f"{with_trace * 1000:>10.1f} {ratio:>6.3f} {with_trace / base:>9.3f} {size:>10.0f}"
                f"{map_note}{null_note}",
                flush=True,
            )
    extras = f" median_map_cost={statistics.median(map_costs):.3f}" if map_costs else ""
    if null_ratios:
        extras += (
            f" null_max_ratio={max(null_ratios):.3f} null_median_ratio={statistics.median(null_ratios):.3f}"
        )
    print(
        f"RESULT max_ratio={max(ratios):.3f} median_ratio={statistics.median(ratios):.3f} "
        f"max_ratio_of_medians={max(ratios_of_medians):.3f} "
        f"median_ratio_of_medians={statistics.median(ratios_of_medians):.3f}{extras}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
