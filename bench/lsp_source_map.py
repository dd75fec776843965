"""What source maps would cost the language server: on every edit, or on the first hover of a tile
operation (what it does).

In the worker's own functions, warm, in this process, per example (median of ``--repeat``, each
kind of run interleaved with the others so all see the same machine load):

- *edit*: the analysis every edit runs (``analyze``: up to layout inference, no IR printed);
- *summary*: the background full lowering for the code lens (``analyze(full=True)``, no IR);
- *maps*: the full lowering with source maps that a tile operation's hover needs
  (``tilelang_lsp.worker.source_lines.source_lines``: every module printed twice, the trace read
  back, every line's stages).

``edit_ratio`` is (edit + maps) / edit: what each edit would cost if the maps were made with it;
``summary_ratio`` is maps / summary: what the background lowering would cost if it made them.

With ``--server``, also through a real server (trusted, background work held off), per example:
``didOpen`` and its analysis, then a hover on its first tile operation until the answer names IR
lines (*first hover*: the lowering with maps, asked by that hover), then the same hover again
(*cached hover*).

``--smoke`` (for CI): the GEMM only, one repeat.

Ends with one line ``RESULT edit_ratio_max=... summary_ratio_max=... maps_ms_max=... edit_ms_max=...``
(and ``first_hover_ms_max=... cached_hover_ms_max=...`` with ``--server``).
"""

from __future__ import annotations

import argparse
import asyncio
import re
import statistics
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = {
    "gemm": (ROOT / "examples" / "gemm.py", "matmul"),
    "flash_attention": (ROOT / "examples" / "flash_attention.py", "flash_attention_fwd"),
    "rmsnorm": (ROOT / "examples" / "rmsnorm.py", "rms_norm"),
}


def timed(run: Callable[[], object]) -> float:
    began = time.perf_counter()
    run()
    return (time.perf_counter() - began) * 1000


TILE_OP = re.compile(r"T\.(gemm|copy|reduce_\w+|fill)\(")


async def hover_times(examples: dict[str, tuple[Path, str]]) -> dict[str, tuple[float, float]]:
    """Per example, the first and the cached tile-operation hover through a real server (ms)."""
    from lsprotocol import types
    from pytest_lsp.client import make_test_lsp_client

    client = make_test_lsp_client()
    published: set[str] = set()
    original = client.protocol.fm.features[types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS]

    def publish(params: types.PublishDiagnosticsParams) -> None:
        published.add(params.uri)
        original(params)

    client.protocol.fm.features[types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS] = publish
    await client.start_io(sys.executable, "-m", "tilelang_lsp.cli", cwd=str(ROOT))
    await client.initialize_session(
        types.InitializeParams(
            capabilities=types.ClientCapabilities(),
            root_uri=ROOT.as_uri(),
            initialization_options={"trusted": True, "backgroundDelayMs": 600_000},
        )
    )
    times: dict[str, tuple[float, float]] = {}
    for name, (path, _) in examples.items():
        text = path.read_text()
        uri = path.as_uri()
        client.text_document_did_open(
            types.DidOpenTextDocumentParams(types.TextDocumentItem(uri, "python", 1, text))
        )
        while uri not in published:
            await asyncio.sleep(0.02)
        line, match = next((n, m) for n, t in enumerate(text.splitlines()) if (m := TILE_OP.search(t)))
        params = types.HoverParams(
            types.TextDocumentIdentifier(uri), types.Position(line, match.start(1) + 1)
        )
        began = time.perf_counter()
        while True:
            hover = await client.text_document_hover_async(params)
            if hover is not None and "IR line" in str(hover.contents):
                break
        first = (time.perf_counter() - began) * 1000
        began = time.perf_counter()
        await client.text_document_hover_async(params)
        times[name] = (first, (time.perf_counter() - began) * 1000)
        print(f"{name:16} first hover {first:7.1f} ms  cached hover {times[name][1]:6.1f} ms", flush=True)
    await client.shutdown_session()
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--target", default="cuda:sm_90a")
    parser.add_argument("--server", action="store_true", help="also time hovers through a real server")
    parser.add_argument("--smoke", action="store_true", help="the GEMM only, one repeat: for CI")
    args = parser.parse_args()
    examples = {"gemm": EXAMPLES["gemm"]} if args.smoke else EXAMPLES
    if args.smoke:
        args.repeat = 1

    from tilelang_lsp.protocol import Analyze, LineMaps
    from tilelang_lsp.worker.analysis import AnalysisJob, analyze
    from tilelang_lsp.worker.source_lines import source_lines

    edit_ratios, summary_ratios, maps_max, edit_max = [], [], 0.0, 0.0
    for name, (path, kernel) in examples.items():
        file, text = str(path), path.read_text()
        runs: dict[str, Callable[[], object]] = {
            "edit": partial(
                analyze, AnalysisJob.of(Analyze(path=file, text=text, default_target=args.target))
            ),
            "summary": partial(
                analyze, AnalysisJob.of(Analyze(path=file, text=text, default_target=args.target, full=True))
            ),
            "maps": partial(
                source_lines, LineMaps(path=file, text=text, kernel=kernel, default_target=args.target)
            ),
        }
        for run in runs.values():  # warm: the first lowering in a process costs more
            run()
        times: dict[str, list[float]] = {key: [] for key in runs}
        for _ in range(args.repeat):
            for key, run in runs.items():
                times[key].append(timed(run))
        edit, summary, maps = (statistics.median(times[key]) for key in ("edit", "summary", "maps"))
        edit_ratios.append((edit + maps) / edit)
        summary_ratios.append(maps / summary)
        maps_max, edit_max = max(maps_max, maps), max(edit_max, edit)
        print(
            f"{name:16} edit {edit:7.1f} ms  summary {summary:7.1f} ms  maps {maps:7.1f} ms  "
            f"edit+maps/edit {edit_ratios[-1]:.2f}x  maps/summary {summary_ratios[-1]:.2f}x"
        )
    result = (
        f"RESULT edit_ratio_max={max(edit_ratios):.2f} summary_ratio_max={max(summary_ratios):.2f} "
        f"maps_ms_max={maps_max:.1f} edit_ms_max={edit_max:.1f}"
    )
    if args.server:
        hovers = asyncio.run(hover_times(examples))
        result += (
            f" first_hover_ms_max={max(f for f, _ in hovers.values()):.1f}"
            f" cached_hover_ms_max={max(c for _, c in hovers.values()):.1f}"
        )
    print(result)


if __name__ == "__main__":
    main()
