"""The worker is expendable: killed, hung or untrusted, the server carries on."""

from __future__ import annotations

import asyncio
import os
import signal

import pytest
from lsprotocol import types
from pytest_lsp import LanguageClient

from tests.lsp.conftest import DATA, EXAMPLES, change, hints, open_file, wait_published, whole_file_server

client = whole_file_server(trusted=True, analysis_timeout_s=4, extra_targets=[], summary=False)
pytestmark = pytest.mark.asyncio(loop_scope="module")


async def test_killed_worker_is_restarted(client: LanguageClient) -> None:
    path = EXAMPLES / "rmsnorm.py"
    uri = open_file(client, path)
    await wait_published(client, uri, 1)
    status = await client.protocol.send_request_async("tilelang/workerStatus", {})
    assert status.pid and status.restarts == 0
    os.kill(status.pid, signal.SIGKILL)
    await asyncio.sleep(0.5)
    change(client, uri, 2, path.read_text().replace("blk_m=1", "blk_m=2"))
    published = await wait_published(client, uri, 2)
    assert list(published.diagnostics) == []
    labels = [h.label for h in await hints(client, uri)]
    assert "[2, 1024] float32 shared.dyn" in labels
    status = await client.protocol.send_request_async("tilelang/workerStatus", {})
    assert status.restarts == 1 and status.pid
    assert [m.message for m in client.messages if "exited unexpectedly" in m.message] == [
        "the TileLang worker exited unexpectedly (code -9)"
    ]


async def test_build_that_loops_forever_is_cut_off(client: LanguageClient) -> None:
    uri = open_file(client, DATA / "forever.py")
    published = await wait_published(client, uri, 1, timeout=200)
    assert list(published.diagnostics) == [
        types.Diagnostic(
            range=types.Range(start=types.Position(3, 0), end=types.Position(3, 25)),
            message=(
                "TileLang analysis stopped after 4 s while building loops_forever; "
                "hints show what the source alone says"
            ),
            severity=types.DiagnosticSeverity.Warning,
            code="analysis",
            source="tilelang",
        )
    ]
    # The next analysis runs in a fresh worker, and the restart was reported once.
    uri2 = open_file(client, EXAMPLES / "gemm.py")
    published = await wait_published(client, uri2, 1, timeout=200)
    assert list(published.diagnostics) == []
    assert any("ran past 4 s while building loops_forever" in m.message for m in client.messages)
