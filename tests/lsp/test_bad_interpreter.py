"""A ``python`` option naming no interpreter: said once at start, and on each document, no hang."""

from __future__ import annotations

import pytest
from pytest_lsp import LanguageClient

from tests.lsp.conftest import EXAMPLES, open_file, wait_published, whole_file_server

client = whole_file_server(trusted=True, python="/nonexistent/python3", extra_targets=[], summary=False)
pytestmark = pytest.mark.asyncio(loop_scope="module")

REASON = "cannot start the TileLang worker with /nonexistent/python3: No such file or directory"


async def test_missing_interpreter_is_reported(client: LanguageClient) -> None:
    uri = open_file(client, EXAMPLES / "gemm.py")
    published = await wait_published(client, uri, 1, timeout=30)
    assert [d.message for d in published.diagnostics if REASON in d.message]
    assert f"tilelang-lsp: {REASON}" in [m.message for m in client.messages]
