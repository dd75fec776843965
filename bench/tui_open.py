"""How long `passviz TRACE` takes to show its first full screen, against loading the trace.

The trace is 10 kernels x 5 targets, every run recorded through TileLang's real pipelines (no copied
runs). Recording takes a few minutes on two cores, so it is cached under the system temp folder;
``--rebuild`` records it again. Ends with ``RESULT open_seconds=<s> ratio_vs_load=<x>``.

open_seconds: from constructing the app to the first screen with the tree, the pass table and the
IR pane all filled (best of ``--repeat`` runs, headless, 160x50). ratio_vs_load: that divided by
the time ``load_trace`` takes for the same file (best of ``--repeat``).

``--smoke`` (for CI) records one small GEMM for one target into a temporary trace and opens it once.
"""

from __future__ import annotations

import argparse
import asyncio
import atexit
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

TARGETS = ("cuda:sm_80", "cuda:sm_90", "hip:gfx942", "hip:gfx950", "metal")
EXAMPLES = ROOT / "examples"
# (recorded name, spec): ten distinct kernels and configurations.
KERNELS = (
    ("gemm_256", f"{EXAMPLES / 'gemm.py'}::matmul(256, 256, 256)"),
    ("gemm_512", f"{EXAMPLES / 'gemm.py'}::matmul(512, 512, 512)"),
    ("gemm_1024", f"{EXAMPLES / 'gemm.py'}::matmul(1024, 1024, 1024)"),
    ("gemm_64x64", f"{EXAMPLES / 'gemm.py'}::matmul(512, 512, 512, block_M=64, block_N=64)"),
    ("gemm_2stage", f"{EXAMPLES / 'gemm.py'}::matmul(1024, 1024, 1024, num_stages=2)"),
    ("rmsnorm_1024", f"{EXAMPLES / 'rmsnorm.py'}::rms_norm(1024, 1024)"),
    ("rmsnorm_4096", f"{EXAMPLES / 'rmsnorm.py'}::rms_norm(256, 4096)"),
    ("flash_attn", f"{EXAMPLES / 'flash_attention.py'}::flash_attention_fwd()"),
    ("flash_attn_causal", f"{EXAMPLES / 'flash_attention.py'}::flash_attention_fwd(is_causal=True)"),
    ("hopper_ws_gemm", f"{EXAMPLES / 'hopper_tma_gemm.py'}::hopper_ws_gemm(512, 512, 512)"),
)


def build_trace(
    path: Path, kernels: tuple[tuple[str, str], ...] = KERNELS, targets: tuple[str, ...] = TARGETS
) -> None:
    """Record every kernel for every target (a kernel failing on a backend is recorded as failed)."""
    from irtrace.lowering.api import RecordRequest, record_kernels
    from irtrace.targets.specs import parse_spec
    from irtrace.trace.writer import TraceWriter

    requests = [RecordRequest(parse_spec(spec), targets, {}, name=name) for name, spec in kernels]
    partial = path.with_suffix(".partial")
    with TraceWriter(partial) as writer:
        errors = record_kernels(requests, writer).errors
    for error in errors:
        print(f"warning: {error.message}", file=sys.stderr)
    partial.replace(path)


async def time_first_screen(path: Path) -> float:
    from passviz.app import PassvizApp
    from passviz.widgets.code_view import CodeView
    from passviz.widgets.pass_table import PassTable

    started = time.perf_counter()
    app = PassvizApp([path])
    async with app.run_test(size=(160, 50)) as pilot:
        await pilot.pause()
        table = app.query_one(PassTable)
        code = app.query_one(CodeView)
        while table.row_count == 0 or not code.document_text:
            await pilot.pause(0.001)
        # One more refresh so what was filled in is painted.
        await pilot.pause()
        return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--trace", type=Path, default=Path(tempfile.gettempdir()) / "passviz-bench-10x5.jsonl"
    )
    parser.add_argument("--rebuild", action="store_true", help="record the trace again")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument(
        "--smoke", action="store_true", help="a small trace recorded here, opened once: for CI"
    )
    args = parser.parse_args()

    if args.smoke:
        folder = Path(tempfile.mkdtemp(prefix="tui-open-smoke-"))
        atexit.register(shutil.rmtree, folder, True)
        args.trace, args.repeat = folder / "smoke.jsonl", 1
        build_trace(args.trace, KERNELS[:1], TARGETS[1:2])
    elif args.rebuild or not args.trace.exists():
        print(f"recording {len(KERNELS)} kernels x {len(TARGETS)} targets into {args.trace} ...", flush=True)
        began = time.perf_counter()
        build_trace(args.trace)
        print(f"recorded in {time.perf_counter() - began:.0f} s", flush=True)

    from irtrace.trace.reader import load_trace

    trace = load_trace(args.trace)
    failed = sum(run.status != "ok" for run in trace.runs)
    print(
        f"trace: {len(trace.kernels())} kernels x {len(trace.targets())} targets = {len(trace.runs)} runs "
        f"({failed} failed to lower), {sum(len(r.passes) for r in trace.runs)} passes, "
        f"{args.trace.stat().st_size / 1e6:.1f} MB; every run recorded, none copied"
    )
    load_times = []
    for _ in range(args.repeat):
        began = time.perf_counter()
        load_trace(args.trace)
        load_times.append(time.perf_counter() - began)
    load_s = statistics.median(load_times)

    # Import the app once outside the timing: a user pays it too, but it is Python start-up,
    # not passviz's work; it is reported separately.
    began = time.perf_counter()
    import passviz.app  # noqa: F401

    import_s = time.perf_counter() - began
    open_times = [asyncio.run(time_first_screen(args.trace)) for _ in range(args.repeat)]
    open_s = statistics.median(open_times)
    print(f"load_trace: {load_s * 1000:.0f} ms   import passviz.app: {import_s * 1000:.0f} ms")
    print(f"first full screen (load included): {', '.join(f'{t * 1000:.0f}' for t in open_times)} ms")
    print(f"RESULT open_seconds={open_s:.3f} ratio_vs_load={open_s / load_s:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
