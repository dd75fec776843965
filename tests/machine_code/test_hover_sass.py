"""The language server's hover on a tile operation names the SASS instructions its line became, by
class, as nvdisasm's line table read by the test says (``test_sass_line_costs.nvdisasm_costs``):
the example GEMM on sm_90a, the editor's default lowering (1024^3) and the recording's the same."""

from __future__ import annotations

import asyncio
import re
from collections import Counter
from pathlib import Path

import pytest
from lsprotocol import types
from pytest_lsp import LanguageClient

from irtrace.trace.reader import load_trace
from tests.lsp.conftest import EXAMPLES, open_fresh, wait_published, whole_file_server

from .conftest import oracle_nvcc, record_machine_code
from .test_sass_line_costs import nvdisasm_costs

client = whole_file_server(
    trusted=True, extra_targets=[], default_target="cuda:sm_90a", background_delay_ms=0
)
pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.sweep]

SASS = re.compile(
    r"SASS instructions from this line: (\d+) MMA, (\d+) global, (\d+) shared, (\d+) barrier, "
    r"(\d+) other \((\d+) in all\)\."
)
CLASS_NAMES = ("mma", "global_memory", "shared_memory", "barrier", "other")


async def test_hover_names_the_sass_instructions_of_its_line(client: LanguageClient, tmp_path: Path) -> None:
    oracle_nvcc()
    gemm = EXAMPLES / "gemm.py"
    line = next(n for n, text in enumerate(gemm.read_text().splitlines(), 1) if "T.copy(C_local" in text)
    path, _, _ = record_machine_code(
        tmp_path, [("gemm.py::matmul(1024, 1024, 1024)", "cuda:sm_90a")], "--source-map"
    )
    trace = load_trace(path)
    (run,) = trace.runs
    per_line, _, _ = nvdisasm_costs(trace, run, tmp_path / "oracle")
    expected = per_line[(str(gemm), line)]
    assert expected["global_memory"] > 0, "T.copy into C stores to global memory"

    uri, version = open_fresh(client, gemm)
    await wait_published(client, uri, version)
    params = types.HoverParams(
        text_document=types.TextDocumentIdentifier(uri=uri), position=types.Position(line - 1, 14)
    )
    section = ""
    for _ in range(600):  # lowering with maps, then nvcc in a job of its own: hover again until done
        hover = await client.text_document_hover_async(params)
        assert hover is not None and isinstance(hover.contents, types.MarkupContent)
        section = hover.contents.value
        if SASS.search(section) or "SASS: nvcc failed" in section:
            break
        assert "lowering with source maps" in section or "compiling with nvcc" in section, section
        await asyncio.sleep(0.5)
    client.text_document_did_close(types.DidCloseTextDocumentParams(types.TextDocumentIdentifier(uri=uri)))
    found = SASS.search(section)
    assert found is not None, section
    counts = [int(n) for n in found.groups()]
    assert Counter({name: n for name, n in zip(CLASS_NAMES, counts[:5], strict=True) if n}) == expected
    assert counts[5] == sum(expected.values())
