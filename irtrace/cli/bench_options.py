"""``--bench``, ``--bench-shape`` and ``--bench-repeat`` of ``irtrace record`` and ``irtrace run``: the
options and their checks (the command-line errors exit 2 before anything is lowered or run)."""

from __future__ import annotations

import argparse

from irtrace.base.errors import UsageError
from irtrace.perf.bench_shapes import BENCH_REPEAT, BenchSettings, parse_bench_shapes


def add_bench_options(parser: argparse.ArgumentParser, bench_help: str) -> None:
    """Add ``--bench`` (with ``bench_help``), ``--bench-shape`` and ``--bench-repeat``."""
    parser.add_argument("--bench", action="store_true", help=bench_help)
    parser.add_argument(
        "--bench-shape",
        action="append",
        default=[],
        metavar="[KERNEL:]NAME=SIZE",
        help="--bench: the size of a symbolic dimension (T.dynamic) for every kernel that has one, or for "
        "KERNEL only (e.g. tokens=4096, token_matmul:tokens=4096); wins over the manifest's bench_shape "
        "and a captured call's sizes; repeatable",
    )
    parser.add_argument(
        "--bench-repeat",
        type=int,
        default=BENCH_REPEAT,
        metavar="N",
        help=f"--bench: time each kernel N times after a warm-up and keep the median and every sample "
        f"(default {BENCH_REPEAT})",
    )


def bench_settings(args: argparse.Namespace) -> BenchSettings:
    """The checked bench options; ``UsageError`` for a bad size or repeat, or either without ``--bench``."""
    shapes = parse_bench_shapes(args.bench_shape)
    if not 1 <= args.bench_repeat <= 1000:
        raise UsageError(f"--bench-repeat {args.bench_repeat}: give a number from 1 to 1000")
    if not args.bench and (args.bench_shape or args.bench_repeat != BENCH_REPEAT):
        raise UsageError("--bench-shape and --bench-repeat only apply with --bench")
    return BenchSettings(shapes, args.bench_repeat)
