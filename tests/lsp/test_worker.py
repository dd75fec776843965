"""The worker is expendable: killed, hung or untrusted, the server carries on."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

import pytest
from lsprotocol import types
from pytest_lsp import LanguageClient

from tests.lsp.conftest import (
    DATA,
    EXAMPLES,
    change,
    hints,
    open_fresh,
    wait_published,
    whole_file_server,
)

client = whole_file_server(trusted=True, analysis_timeout_s=4, extra_targets=[], summary=False)
pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest.mark.sweep  # 13 s; both servers share irtrace.edge.worker_client, whose restart
# tests/mcp/test_trust.py checks in make test (a worker that dies is replaced)
async def test_killed_worker_is_restarted(client: LanguageClient) -> None:
    path = EXAMPLES / "rmsnorm.py"
    uri, version = open_fresh(client, path)
    await wait_published(client, uri, version)
    status = await client.protocol.send_request_async("tilelang/workerStatus", {})
    assert status.pid
    restarts = status.restarts
    client.messages.clear()
    os.kill(status.pid, signal.SIGKILL)
    await asyncio.sleep(0.5)
    change(client, uri, version + 1, path.read_text().replace("blk_m=1", "blk_m=2"))
    published = await wait_published(client, uri, version + 1)
    assert list(published.diagnostics) == []
    labels = [h.label for h in await hints(client, uri)]
    assert "[2, 1024] float32 shared.dyn" in labels
    status = await client.protocol.send_request_async("tilelang/workerStatus", {})
    assert status.restarts == restarts + 1 and status.pid
    assert [m.message for m in client.messages if "exited unexpectedly" in m.message] == [
        "the TileLang worker exited unexpectedly (code -9)"
    ]


@pytest.mark.sweep  # 9 s; the shared client's time limit is checked in make test by
# tests/mcp/test_trust.py (a hanging file times out and the server goes on)
async def test_build_that_loops_forever_is_cut_off(client: LanguageClient) -> None:
    uri, version = open_fresh(client, DATA / "forever.py")
    published = await wait_published(client, uri, version, timeout=200)
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
    uri2, version2 = open_fresh(client, EXAMPLES / "gemm.py")
    published = await wait_published(client, uri2, version2, timeout=200)
    assert list(published.diagnostics) == []
    assert any("ran past 4 s while building loops_forever" in m.message for m in client.messages)


async def test_files_without_tilelang_are_never_executed(client: LanguageClient, tmp_path: Path) -> None:
    """A trusted workspace runs a file only when its text imports tilelang: any other script's top
    level would run on every edit."""
    marker = tmp_path / "ran.txt"
    script = f"import pathlib\npathlib.Path({str(marker)!r}).write_text('ran')\nx: int = 1\n"
    path = tmp_path / "script.py"
    uri, version = open_fresh(client, path, script)
    published = await wait_published(client, uri, version)
    assert list(published.diagnostics) == []
    assert await hints(client, uri) == []
    hover = await client.text_document_hover_async(
        types.HoverParams(text_document=types.TextDocumentIdentifier(uri=uri), position=types.Position(2, 0))
    )
    assert hover is None
    change(client, uri, version + 1, script + "y = 2\n")
    await wait_published(client, uri, version + 1)
    assert not marker.exists()
    # The same text importing tilelang is a kernel file: it runs, as `import` would run it.
    change(client, uri, version + 2, "import tilelang.language as T\n" + script)
    await wait_published(client, uri, version + 2)
    assert marker.read_text() == "ran"


@pytest.mark.parametrize(
    "mention",
    [
        '"""Kernels for the notes below.\n\nimport tilelang\n"""\n',  # in the module docstring
        "# import tilelang\n",  # in a comment
        'NOTE = """\nfrom tilelang import language as T\n"""\n',  # in a string, at a line's start
    ],
)
async def test_tilelang_named_only_in_text_does_not_run(
    client: LanguageClient, tmp_path: Path, mention: str
) -> None:
    """The attack: a plain script with ``import tilelang`` in its text but not in its code. It ran
    when a line of it started with the import; it runs only when a real import statement has it."""
    marker = tmp_path / "ran.txt"
    script = mention + f"import pathlib\npathlib.Path({str(marker)!r}).write_text('ran')\n"
    uri, version = open_fresh(client, tmp_path / "script.py", script)
    published = await wait_published(client, uri, version)
    assert list(published.diagnostics) == []
    assert await hints(client, uri) == []
    await asyncio.sleep(0.5)  # nothing pending either
    assert not marker.exists()
    # the control: one real import statement, in a function the module never calls, makes it run
    change(client, uri, version + 1, script + "def unused():\n    import tilelang\n")
    await wait_published(client, uri, version + 1)
    assert marker.read_text() == "ran"


async def test_text_that_does_not_parse_never_reaches_the_worker(
    client: LanguageClient, tmp_path: Path
) -> None:
    """The worker is frozen, yet the syntax error comes at once: the server finds it with ``ast``
    and never sends the text (sent, it would wait for the worker and be cut off after 4 s)."""
    status = await client.protocol.send_request_async("tilelang/workerStatus", {})
    text = "import tilelang.language as T\n\n\ndef broken(:\n    pass\n"
    os.kill(status.pid, signal.SIGSTOP)
    try:
        uri, version = open_fresh(client, tmp_path / "kernel.py", text)
        published = await wait_published(client, uri, version, timeout=3)
    finally:
        os.kill(status.pid, signal.SIGCONT)
    assert list(published.diagnostics) == [
        types.Diagnostic(
            range=types.Range(start=types.Position(3, 0), end=types.Position(3, 12)),
            message="syntax error: invalid syntax",
            severity=types.DiagnosticSeverity.Error,
            code="syntax",
            source="tilelang",
        )
    ]
    labels = [h.label for h in await hints(client, uri)]
    assert labels == []  # no allocation to hint, and no analysis pending


async def test_symbolic_kernels_survive_analysis_after_analysis(client: LanguageClient) -> None:
    """T.dynamic and symbolic T.const sizes: the worker once crashed (SIGSEGV) freeing the TVM
    strings of an earlier analysis."""
    path = DATA / "styles" / "eager_elementwise.py"
    text = path.read_text().replace('if __name__ == "__main__":\n    main()\n', "")  # no run: symbolic sizes
    before = await client.protocol.send_request_async("tilelang/workerStatus", {})
    uri, version = open_fresh(client, path, text)
    await wait_published(client, uri, version)
    for step in range(1, 5):
        change(client, uri, version + step, text + f"\n# edit {step}\n")
        published = await wait_published(client, uri, version + step)
        assert [d for d in published.diagnostics if d.code == "analysis"] == []
    labels = [h.label for h in await hints(client, uri)]
    assert labels.count("[M, N] float32 global") == 3  # symbolic T.const, named as in the source
    assert labels.count("[M, 2048] bfloat16 global") == 2  # T.dynamic("tokens") bound to M
    after = await client.protocol.send_request_async("tilelang/workerStatus", {})
    assert (after.pid, after.restarts) == (before.pid, before.restarts)
