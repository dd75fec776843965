"""An untrusted workspace never runs the user's module: source-only hints, and the reason."""

from __future__ import annotations

import pytest
from lsprotocol import types
from pytest_lsp import LanguageClient

from tests.lsp.conftest import EXAMPLES, hints, open_file, wait_published, whole_file_server

client = whole_file_server(inlayHints={"layout": False, "parameters": False}, debounceMs="fast")
pytestmark = pytest.mark.asyncio(loop_scope="module")


async def test_untrusted_workspace_gets_source_hints(client: LanguageClient) -> None:
    uri = open_file(client, EXAMPLES / "gemm.py")
    await wait_published(client, uri, 1)
    why = "source only: workspace not trusted"
    assert await hints(client, uri) == [
        types.InlayHint(
            position=types.Position(line=27, character=64),
            label=f"[block_M, block_K] dtype shared.dyn ({why})",
            kind=types.InlayHintKind.Type,
            padding_left=True,
        ),
        types.InlayHint(
            position=types.Position(line=28, character=64),
            label=f"[block_N, block_K] dtype shared.dyn ({why})",
            kind=types.InlayHintKind.Type,
            padding_left=True,
        ),
        types.InlayHint(
            position=types.Position(line=29, character=71),
            label=f"[block_M, block_N] accum_dtype local.fragment ({why})",
            kind=types.InlayHintKind.Type,
            padding_left=True,
        ),
    ]
    status = await client.protocol.send_request_async("tilelang/workerStatus", {})
    assert status.pid is None  # no worker was ever started
    messages = [m.message for m in client.messages]
    assert (
        'tilelang-lsp: option debounceMs: "fast" is not valid (expected `int`, got `str`); using 150'
        in messages
    )
    assert any("workspace is not trusted" in m for m in messages)
    hover = await client.text_document_hover_async(
        types.HoverParams(
            text_document=types.TextDocumentIdentifier(uri=uri),
            position=types.Position(line=29, character=14),
        )
    )
    assert hover.contents.value.endswith(
        "From the source only: the workspace is not trusted, so the kernel was not compiled."
    )
    # a tile operation's hover: TileLang's docs, and no lowering (no worker) to say what it became
    gemm_line = next(
        n for n, t in enumerate((EXAMPLES / "gemm.py").read_text().splitlines()) if "T.gemm(" in t
    )
    column = (EXAMPLES / "gemm.py").read_text().splitlines()[gemm_line].index("gemm(") + 1
    api = await client.text_document_hover_async(
        types.HoverParams(
            text_document=types.TextDocumentIdentifier(uri=uri),
            position=types.Position(line=gemm_line, character=column),
        )
    )
    assert "gemm" in api.contents.value and "through the pipeline" not in api.contents.value
    assert (await client.protocol.send_request_async("tilelang/workerStatus", {})).pid is None
