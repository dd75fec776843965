"""Hints at once: a hint request right after ``didOpen`` never waits for the worker. A client with
``workspace.inlayHint.refreshSupport`` gets the shapes as written at once, then a refresh request
when the compiled facts are in; a client without it waits (``hintWaitS``) for compiled hints.

Each server here is fresh, so the first request meets a worker still importing tilelang: the
answer that comes at once cannot be compiled. Time bounds only guard against hangs; the figures
are ``bench/lsp_latency.py``'s.
"""

from __future__ import annotations

import asyncio
import importlib.util
import time

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import LanguageClient

from tests.lsp.conftest import CONFIG, EXAMPLES, ROOT, hints, open_file, start
from tests.lsp.oracle import compiler_buffers, expected_hint, tilelang_target

pytestmark = pytest.mark.asyncio(loop_scope="function")
OPTIONS = {"trusted": True, "extra_targets": [], "summary": False, "hint_wait_s": 170.0}
"""``hintWaitS`` far above a cold start: a server that made the request wait for the worker would
answer with compiled hints, not the shapes as written."""
HANG_S = 30.0
"""Far above any answer that does not wait for the worker: only a hang fails this."""

GEMM_AS_WRITTEN = [
    (23, "[M, K] dtype global (source only: analyzing)"),
    (24, "[N, K] dtype global (source only: analyzing)"),
    (25, "[M, N] dtype global (source only: analyzing)"),
    (28, "[block_M, block_K] dtype shared.dyn (source only: analyzing)"),
    (29, "[block_N, block_K] dtype shared.dyn (source only: analyzing)"),
    (30, "[block_M, block_N] accum_dtype local.fragment (source only: analyzing)"),
]
"""``examples/gemm.py``'s buffers as its text writes them (1-based lines)."""


def gemm_compiler_hints() -> list[tuple[int, str]]:
    """The oracle: the example's own call (``matmul()``) lowered by TileLang with a plain pass
    instrument, its buffers read after layout inference."""
    spec = importlib.util.spec_from_file_location("_hints_at_once_gemm", EXAMPLES / "gemm.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    with tilelang_target("cuda:sm_90"):
        func = module.matmul()
    found = compiler_buffers(func, "cuda:sm_90")
    return sorted((b.line, expected_hint(b, "cuda:sm_90")) for b in found if b.line is not None)


def labelled(got: list[types.InlayHint]) -> list[tuple[int, str]]:
    return sorted((h.position.line + 1, str(h.label)) for h in got)


@pytest_lsp.fixture(config=CONFIG)
async def refreshing(lsp_client: LanguageClient):  # type: ignore[no-untyped-def]
    """A fresh server whose client declares inlay-hint and code-lens refresh support."""
    await start(lsp_client, **OPTIONS)
    yield
    await lsp_client.shutdown_session()


@pytest_lsp.fixture(config=CONFIG)
async def plain(lsp_client: LanguageClient):  # type: ignore[no-untyped-def]
    """A fresh server whose client declares no refresh support at all."""
    await lsp_client.initialize_session(
        types.InitializeParams(
            capabilities=types.ClientCapabilities(),
            root_uri=ROOT.as_uri(),
            initialization_options=OPTIONS,
        )
    )
    yield
    await lsp_client.shutdown_session()


async def test_source_hints_at_once_then_refresh_then_compiled(refreshing: LanguageClient) -> None:
    client = refreshing
    uri = open_file(client, EXAMPLES / "gemm.py")
    began = time.monotonic()
    first = await asyncio.wait_for(hints(client, uri), HANG_S)
    hover = await asyncio.wait_for(
        client.text_document_hover_async(
            types.HoverParams(types.TextDocumentIdentifier(uri), types.Position(line=27, character=14))
        ),
        HANG_S,
    )
    assert time.monotonic() - began < HANG_S
    assert labelled(first) == GEMM_AS_WRITTEN
    assert hover is not None and isinstance(hover.contents, types.MarkupContent)
    assert hover.contents.value == (
        "**A_shared** — `[block_M, block_K]` `dtype` `shared.dyn`\n\n"
        "From the source only: the kernel is still being analyzed."
    )
    refreshes = client.refreshes  # type: ignore[attr-defined]
    assert "inlayHint" not in refreshes  # nothing compiled yet: the worker is still importing
    deadline = time.monotonic() + 170
    while "inlayHint" not in refreshes and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    assert "inlayHint" in refreshes, "no workspace/inlayHint/refresh once the compiled facts came"
    assert labelled(await hints(client, uri)) == gemm_compiler_hints()


async def test_client_without_refresh_support_still_gets_compiled_hints(plain: LanguageClient) -> None:
    client = plain
    uri = open_file(client, EXAMPLES / "gemm.py")
    got = await hints(client, uri)  # waits, up to hintWaitS, for the analysis: no refresh will come
    assert labelled(got) == gemm_compiler_hints()
    assert client.refreshes == []  # type: ignore[attr-defined]
