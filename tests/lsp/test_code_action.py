"""The ``T.clear`` quick fix for ``buffer-init``, checked by re-analysis: the edited kernel, lowered
again by the real worker, no longer has the diagnostic. Also: in a trusted workspace the API index
comes from the worker itself and is cached on disk."""

from __future__ import annotations

import asyncio
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient

from tests.lsp.conftest import DATA, SERVER, change, open_fresh, recording_client, start, wait_published
from tilelang_lsp.features.code_action import clear_before_first_use

CACHE = tempfile.mkdtemp(prefix="tilelang-lsp-api-cache-")
CONFIG = ClientServerConfig(
    server_command=SERVER,
    client_factory=recording_client,
    server_env={**os.environ, "XDG_CACHE_HOME": CACHE},
)
pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest_lsp.fixture(config=CONFIG, scope="module", loop_scope="module")
async def client(lsp_client: LanguageClient):  # type: ignore[no-untyped-def]
    await start(lsp_client, trusted=True, extra_targets=[], summary=False, machine_code=False)
    yield
    await lsp_client.shutdown_session()


def apply(text: str, edit: types.TextEdit) -> str:
    lines = text.splitlines(keepends=True)
    start, end = edit.range.start, edit.range.end
    offset = sum(len(line) for line in lines[: start.line]) + start.character
    stop = sum(len(line) for line in lines[: end.line]) + end.character
    return text[:offset] + edit.new_text + text[stop:]


async def test_clear_fix_removes_the_read_before_write_diagnostic(client: LanguageClient) -> None:
    path = DATA / "read_before_write.py"
    text = path.read_text()
    uri, version = open_fresh(client, path)
    published = await wait_published(client, uri, version)
    found = [d for d in published.diagnostics if d.code == "buffer-init"]
    assert len(found) == 1, published.diagnostics
    actions: Any = await client.text_document_code_action_async(
        types.CodeActionParams(
            text_document=types.TextDocumentIdentifier(uri=uri),
            range=found[0].range,
            context=types.CodeActionContext(diagnostics=found),
        )
    )
    assert [a.kind for a in actions] == [types.CodeActionKind.QuickFix]
    edits = actions[0].edit.changes[uri]
    assert len(edits) == 1
    fixed = apply(text, edits[0])
    lines = fixed.splitlines()
    loop = next(i for i, line in enumerate(lines) if line.lstrip().startswith("for ko in T.Pipelined"))
    assert lines[loop - 1] == "            T.clear(C_local)"  # once, before the loop: not in it
    change(client, uri, version + 1, fixed)
    again = await wait_published(client, uri, version + 1)
    assert not [d for d in again.diagnostics if d.code == "buffer-init"], again.diagnostics
    assert not [d for d in again.diagnostics if d.severity == types.DiagnosticSeverity.Error]


async def test_trusted_worker_sends_the_index_and_it_is_cached(client: LanguageClient) -> None:
    path = Path(tempfile.mkdtemp(prefix="tilelang-lsp-api-")) / "k.py"
    path.write_text("import tilelang.language as T\n\nT.alloc_frag\n")
    uri, _ = open_fresh(client, path)
    deadline = time.monotonic() + 180
    while True:
        result: Any = await client.text_document_completion_async(
            types.CompletionParams(
                text_document=types.TextDocumentIdentifier(uri=uri),
                position=types.Position(line=2, character=12),
            )
        )
        if result is not None and result.items:
            break
        assert time.monotonic() < deadline
        await asyncio.sleep(0.5)
    assert [i.label for i in result.items] == ["alloc_fragment"]
    assert any(Path(CACHE, "tilelang-lsp", "api").glob("*.json"))


async def test_clear_goes_before_the_first_use_in_the_allocating_block() -> None:
    """The statement that first uses the buffer, at the level of its allocation, whatever nests it."""
    text = (
        "import tilelang.language as T\n"
        "def k():\n"
        "    with T.Kernel(1, threads=128) as bx:\n"
        "        acc = T.alloc_fragment((16, 16), T.float32)\n"
        "        other = T.alloc_fragment((16, 16), T.float32)\n"
        "        if bx > 0:\n"
        "            for i in T.serial(4):\n"
        "                acc[0, 0] += other[0, 0]\n"
    )
    edit = clear_before_first_use(text, "acc", 8)
    assert edit is not None
    assert (edit.range.start.line, edit.new_text) == (5, "        T.clear(acc)\n")
    assert clear_before_first_use(text, "missing", 8) is None
    assert clear_before_first_use("def broken(:\n", "acc", 1) is None
