"""Latency of tilelang-lsp: first hint response, compiled hints, and ``didChange`` to fresh hints
against bare analysis.

The client declares ``workspace.inlayHint.refreshSupport``, as VS Code and Neovim do. The GEMM is
opened right after ``initialized`` (cold: the worker may still be importing tilelang), then each
example in turn on the running server, and for each:

- *first hint*: a hint request sent right after ``didOpen``, to its response (goal: <= 50 ms);
- *compiled hints*: ``didOpen`` to the first hint response with no source-only hint, asking again
  after each ``workspace/inlayHint/refresh`` (or diagnostics) the server sends;
- *warm ratio*: 20 edits (a comment line appended, so the kernel is analyzed again), from
  ``didChange`` until the hints of that version arrive (p50), against the bare analysis of the same
  texts in this process (``tilelang_lsp.worker.analysis.analyze``, warm), each timed right after
  its edit; goal: <= 1.3x. Background work is held off (``backgroundDelayMs``).

``--server-path FOLDER`` runs another checkout's server (before/after figures in one session).
``--smoke`` (for CI) opens the GEMM only and edits it twice.
Ends with one ``RESULT`` line: ``first_hint_ms`` (the slowest first response, cold start included),
``compiled_hints_ms`` (the slowest warm open), ``warm_ratio_max``, then the older keys: the GEMM's
and the eager GEMM's ``p50_ratio``/``p50_ms``/``p95_ms``, ``cold_start_s`` (server start to the
GEMM's first compiled hints) and ``import_s`` (a bare ``import tilelang`` in a fresh interpreter).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
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
WHOLE = types.Range(start=types.Position(0, 0), end=types.Position(10_000, 0))


@dataclass
class Opened:
    """One document's figures on the server."""

    first_hint_s: float
    first_hint_source_only: bool
    compiled_s: float
    opened_at: float = 0.0
    """``time.perf_counter()`` at ``didOpen``."""
    edits: list[float] = field(default_factory=list)
    bare: list[float] = field(default_factory=list)
    """The bare analysis of each edit's text, timed right after it (same machine load)."""


def import_seconds() -> float:
    code = "import time; t = time.perf_counter(); import tilelang; print(time.perf_counter() - t)"
    return float(
        subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    )


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def edited(text: str, index: int) -> str:
    return f"{text}\n# edit {index}\n"


def source_only(hints: list[types.InlayHint]) -> bool:
    return not hints or any("source only" in str(h.label) for h in hints)


class Session:
    """A pytest-lsp client on a real server, noting each publish and refresh as it comes."""

    def __init__(self) -> None:
        self.client = make_test_lsp_client()
        self.published: set[tuple[str, int]] = set()
        self.news = asyncio.Event()
        """Set on any publish or inlay-hint refresh: a reason to ask for hints again."""
        original = self.client.protocol.fm.features[types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS]

        def publish(params: types.PublishDiagnosticsParams) -> None:
            self.published.add((params.uri, params.version or 0))
            self.news.set()
            original(params)

        self.client.protocol.fm.features[types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS] = publish

        @self.client.feature(types.WORKSPACE_INLAY_HINT_REFRESH)
        def refresh(params: None) -> None:
            self.news.set()

    async def hints(self, uri: str) -> list[types.InlayHint]:
        result = await self.client.text_document_inlay_hint_async(
            types.InlayHintParams(text_document=types.TextDocumentIdentifier(uri=uri), range=WHOLE)
        )
        return list(result or [])

    async def open(self, uri: str, text: str) -> Opened:
        """Open, ask for hints at once, then again on each refresh until they are compiled."""
        self.news.clear()
        began = time.perf_counter()
        self.client.text_document_did_open(
            types.DidOpenTextDocumentParams(types.TextDocumentItem(uri, "python", 1, text))
        )
        hints = await self.hints(uri)
        first = time.perf_counter() - began
        opened = Opened(first, source_only(hints), first, opened_at=began)
        while source_only(hints):
            await asyncio.wait_for(self.news.wait(), 300)
            self.news.clear()
            hints = await self.hints(uri)
        opened.compiled_s = time.perf_counter() - began
        return opened

    async def edit(self, uri: str, text: str, version: int) -> float:
        """``didChange`` to the hints of that version (asked once its diagnostics are out)."""
        began = time.perf_counter()
        self.client.text_document_did_change(
            types.DidChangeTextDocumentParams(
                text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
                content_changes=[types.TextDocumentContentChangeWholeDocument(text=text)],
            )
        )
        while (uri, version) not in self.published:  # woken by the publish, not polled: no CPU taken
            self.news.clear()
            await asyncio.wait_for(self.news.wait(), 300)
        hints = await self.hints(uri)
        done = time.perf_counter() - began
        if source_only(hints):
            raise RuntimeError(f"{uri} version {version}: hints are source-only: {hints[:1]}")
        return done


async def measure_server(
    server_path: Path | None, examples: dict[str, Path], edits: int
) -> tuple[float, dict[str, Opened]]:
    session = Session()
    env = dict(os.environ)
    if server_path is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(server_path), env.get("PYTHONPATH", "")])
    started = time.perf_counter()
    # run from that folder: ``-m`` puts the working directory ahead of PYTHONPATH
    cwd = str(server_path or ROOT)
    await session.client.start_io(sys.executable, "-m", "tilelang_lsp.cli", env=env, cwd=cwd)
    capabilities = types.ClientCapabilities(
        workspace=types.WorkspaceClientCapabilities(
            inlay_hint=types.InlayHintWorkspaceClientCapabilities(refresh_support=True)
        )
    )
    await session.client.initialize_session(
        types.InitializeParams(
            capabilities=capabilities,
            root_uri=ROOT.as_uri(),
            # background work (extra targets, full lowering, nvcc) held off: only the path from an
            # edit to its hints is timed, not the cancelling of background work an edit also does
            initialization_options={"trusted": True, "backgroundDelayMs": 10_000},
        )
    )
    figures: dict[str, Opened] = {}
    cold = 0.0
    for name, path in examples.items():
        uri, text = path.as_uri(), path.read_text()
        opened = await session.open(uri, text)
        if not cold:
            cold = time.perf_counter() - started
            figures["cold: " + name] = opened
            status = await session.client.protocol.send_request_async("tilelang/workerStatus", {})
            # The worker is launched with the server, so it imports tilelang while the server
            # starts and the client initializes; the open came this long after the launch.
            print(
                f"cold: open {opened.opened_at - started:.2f} s after the server (and worker) launch; "
                f"the worker's import of tilelang: {status.importSeconds:.2f} s; open to compiled "
                f"hints: {opened.compiled_s:.2f} s",
                flush=True,
            )
            # the same file again on the running server, as the other examples are
            session.client.text_document_did_close(
                types.DidCloseTextDocumentParams(types.TextDocumentIdentifier(uri))
            )
            await asyncio.sleep(1.0)
            opened = await session.open(uri, text)
        bare_analysis(path, text)  # warm, in this process too
        await asyncio.sleep(0.3)
        for index in range(edits):
            opened.edits.append(await session.edit(uri, edited(text, index), index + 2))
            # The same text analyzed bare now, while the server idles: a shared machine's load
            # changes by the minute, so both sides of the ratio are timed under the same one.
            opened.bare.append(bare_analysis(path, edited(text, index)))
            await asyncio.sleep(0.3)  # a typing pause: the next edit is analyzed at once
        figures[name] = opened
        # closed, so that its background lowering does not hold the worker for the next one
        session.client.text_document_did_close(
            types.DidCloseTextDocumentParams(types.TextDocumentIdentifier(uri))
        )
        await asyncio.sleep(0.5)
    await session.client.shutdown_session()
    await session.client.stop()
    return cold, figures


def bare_analysis(path: Path, text: str) -> float:
    """Seconds of ``tilelang_lsp.worker.analysis.analyze`` on ``text`` in this process: the request
    an edit sends (``Analyze``, up to layout inference), as the worker runs it."""
    from irtrace.lowering.warmup import WARMUP_KERNEL
    from tilelang_lsp.protocol import Analyze
    from tilelang_lsp.worker.analysis import analyze

    if not bare_analysis.__dict__.get("warm"):
        analyze(Analyze(path=str(ROOT / "bench" / "_lsp_warmup.py"), text=WARMUP_KERNEL))
        bare_analysis.__dict__["warm"] = True
    request = Analyze(path=str(path), text=text)
    began = time.perf_counter()
    analyze(request)
    return time.perf_counter() - began


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--server-path", type=Path, help="checkout whose tilelang_lsp the server runs")
    parser.add_argument("--smoke", action="store_true", help="the GEMM only, two edits: for CI")
    args = parser.parse_args()
    imported = import_seconds()
    examples = {"gemm.py": EXAMPLES["gemm.py"]} if args.smoke else EXAMPLES
    cold, figures = asyncio.run(measure_server(args.server_path, examples, 2 if args.smoke else EDITS))
    columns = [("first ms", 8), ("compiled ms", 11), ("p50 ms", 7), ("p95 ms", 7)]
    columns += [("bare p50", 8), ("ratio", 6)]
    print(f"{'example':<30} " + " ".join(f"{title:>{width}}" for title, width in columns))
    ratios: dict[str, float] = {}
    for name, opened in figures.items():
        row = f"{name:<30} {opened.first_hint_s * 1000:8.1f} {opened.compiled_s * 1000:11.1f}"
        if opened.edits:
            p50, p95 = statistics.median(opened.edits) * 1000, percentile(opened.edits, 0.95) * 1000
            bare_p50 = statistics.median(opened.bare) * 1000
            ratios[name] = p50 / bare_p50
            row += f" {p50:7.1f} {p95:7.1f} {bare_p50:8.1f} {ratios[name]:6.2f}"
        print(row + ("" if opened.first_hint_source_only else "  (first response already compiled)"))
    print(f"cold start to first compiled hints: {cold:.2f} s (import tilelang: {imported:.2f} s)")
    first = max(o.first_hint_s for o in figures.values()) * 1000
    compiled = max(o.compiled_s for n, o in figures.items() if not n.startswith("cold")) * 1000
    worst = max(ratios.values())
    results = [f"first_hint_ms={first:.1f} compiled_hints_ms={compiled:.1f} warm_ratio_max={worst:.2f}"]
    for key, name in (("", "gemm.py"), ("eager_", "eager_gemm (flagship style)")):
        if name not in figures:  # --smoke
            continue
        times = figures[name].edits
        p50, p95 = statistics.median(times) * 1000, percentile(times, 0.95) * 1000
        results.append(f"{key}p50_ratio={ratios[name]:.2f} {key}p50_ms={p50:.1f} {key}p95_ms={p95:.1f}")
    print(f"RESULT {' '.join(results)} cold_start_s={cold:.2f} import_s={imported:.2f}")


if __name__ == "__main__":
    main()
