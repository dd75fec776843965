"""Latency of tilelang-lsp: ``didChange`` to fresh inlay hints against bare analysis, and cold start.

For each example (and the eager ``@tilelang.jit`` GEMM in the style of TileLang's flagship example,
``tests/lsp/data/styles/eager_gemm.py``): 20 edits (a comment line appended, so the kernel is
analyzed again), timing from ``didChange`` until the inlay hints of that version arrive (p50, p95),
against the bare analysis of the same texts measured in this process
(``tilelang_lsp.worker.analysis.analyze``, warm). Cold start is the time from starting the server to the
first compiled hints of the GEMM; import time is a bare ``import tilelang`` in a fresh interpreter.
Ends with a ``RESULT`` line for the GEMM and the eager GEMM.
"""

from __future__ import annotations

import asyncio
import statistics
import subprocess
import sys
import time
from pathlib import Path

from lsprotocol import types
from pytest_lsp.client import make_test_lsp_client

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = {
    name: ROOT / "examples" / name
    for name in ("gemm.py", "flash_attention.py", "rmsnorm.py", "hopper_tma_gemm.py")
}
EXAMPLES["eager_gemm (flagship style)"] = ROOT / "tests" / "lsp" / "data" / "styles" / "eager_gemm.py"
EDITS = 20


def import_seconds() -> float:
    code = "import time; t = time.perf_counter(); import tilelang; print(time.perf_counter() - t)"
    return float(
        subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    )


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def compiled_hints(client, uri: str, version: int, published: dict[tuple[str, int], float]) -> float:  # type: ignore[no-untyped-def]
    """Wait for the version's diagnostics, then ask for hints; the time the hints arrived."""
    while (uri, version) not in published:
        await asyncio.sleep(0.001)
    await client.text_document_inlay_hint_async(
        types.InlayHintParams(
            text_document=types.TextDocumentIdentifier(uri=uri),
            range=types.Range(start=types.Position(0, 0), end=types.Position(10_000, 0)),
        )
    )
    return time.perf_counter()


def edited(text: str, index: int) -> str:
    return f"{text}\n# edit {index}\n"


async def measure_server() -> tuple[float, dict[str, list[float]]]:
    client = make_test_lsp_client()
    published: dict[tuple[str, int], float] = {}
    original = client.protocol.fm.features[types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS]

    def publish(params: types.PublishDiagnosticsParams) -> None:
        published[(params.uri, params.version or 0)] = time.perf_counter()
        original(params)

    client.protocol.fm.features[types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS] = publish
    started = time.perf_counter()
    await client.start_io(sys.executable, "-m", "tilelang_lsp.cli")
    await client.initialize_session(
        types.InitializeParams(
            capabilities=types.ClientCapabilities(),
            root_uri=ROOT.as_uri(),
            initialization_options={"trusted": True},
        )
    )
    cold = 0.0
    latencies: dict[str, list[float]] = {}
    for name, path in EXAMPLES.items():
        if not path.exists():
            continue
        uri, text = path.as_uri(), path.read_text()
        client.text_document_did_open(
            types.DidOpenTextDocumentParams(types.TextDocumentItem(uri, "python", 1, text))
        )
        done = await compiled_hints(client, uri, 1, published)
        if not cold:
            cold = done - started
        await asyncio.sleep(1.0)
        times = []
        for index in range(EDITS):
            version = index + 2
            began = time.perf_counter()
            client.text_document_did_change(
                types.DidChangeTextDocumentParams(
                    text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
                    content_changes=[types.TextDocumentContentChangeWholeDocument(text=edited(text, index))],
                )
            )
            times.append((await compiled_hints(client, uri, version, published)) - began)
            await asyncio.sleep(0.3)  # a typing pause; background work for this version starts
        latencies[name] = times
    await client.shutdown_session()
    await client.stop()
    return cold, latencies


def measure_bare() -> dict[str, list[float]]:
    from tilelang_lsp.worker.analysis import analyze
    from tilelang_lsp.worker.loop import WARMUP_KERNEL

    analyze(str(ROOT / "bench" / "_lsp_warmup.py"), WARMUP_KERNEL)
    bare: dict[str, list[float]] = {}
    for name, path in EXAMPLES.items():
        if not path.exists():
            continue
        text = path.read_text()
        analyze(str(path), text)
        times = []
        for index in range(EDITS):
            began = time.perf_counter()
            analyze(str(path), edited(text, index))
            times.append(time.perf_counter() - began)
        bare[name] = times
    return bare


def main() -> None:
    imported = import_seconds()
    cold, served = asyncio.run(measure_server())
    bare = measure_bare()
    print(f"{'example':<28} {'p50 ms':>8} {'p95 ms':>8} {'bare p50':>9} {'ratio':>6}")
    for name, times in served.items():
        p50, p95 = statistics.median(times) * 1000, percentile(times, 0.95) * 1000
        bare_p50 = statistics.median(bare[name]) * 1000
        print(f"{name:<28} {p50:8.1f} {p95:8.1f} {bare_p50:9.1f} {p50 / bare_p50:6.2f}")
    print(f"cold start to first hints: {cold:.2f} s (import tilelang: {imported:.2f} s)")
    results = []
    for key, name in (("", "gemm.py"), ("eager_", "eager_gemm (flagship style)")):
        times = served[name]
        p50, p95 = statistics.median(times) * 1000, percentile(times, 0.95) * 1000
        ratio = p50 / (statistics.median(bare[name]) * 1000)
        results.append(f"{key}p50_ratio={ratio:.2f} {key}p50_ms={p50:.1f} {key}p95_ms={p95:.1f}")
    print(f"RESULT {' '.join(results)} cold_start_s={cold:.2f} import_s={imported:.2f}")


if __name__ == "__main__":
    main()
