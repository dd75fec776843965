"""The language server's code lens shows registers, spills and shared memory once the background
lowering is compiled, matching ptxas run by the test on a plain ``tilelang.lower`` source."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

import pytest
from lsprotocol import types
from pytest_lsp import LanguageClient

from tests.lsp.conftest import EXAMPLES, open_fresh, wait_published, whole_file_server

from .conftest import CASES, Recorded, oracle_resources, ptxas_verbose

client = whole_file_server(
    trusted=True, extra_targets=[], default_target="cuda:sm_90a", background_delay_ms=0
)
pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.slow]


async def lens_titles(client: LanguageClient, uri: str, until: str, seconds: float = 240) -> list[str]:
    """The lens titles once the first one contains ``until`` (polling, as an editor would on refresh)."""
    titles: list[str] = []
    for _ in range(int(seconds * 10)):
        lenses = await client.text_document_code_lens_async(
            types.CodeLensParams(text_document=types.TextDocumentIdentifier(uri=uri))
        )
        titles = [lens.command.title for lens in lenses or [] if lens.command is not None]
        if titles and until in titles[0]:
            return titles
        await asyncio.sleep(0.1)
    raise AssertionError(f"no lens with {until!r}; last titles: {titles}")


async def test_code_lens_shows_ptxas_resources(
    client: LanguageClient, recorded: Recorded, tmp_path: Path
) -> None:
    # the editor lowers gemm.py's matmul() with its defaults (the call site): 1024^3, as CASES[0]
    spec, target = CASES[0]
    assert (spec, target) == ("gemm.py::matmul(1024, 1024, 1024)", "cuda:sm_90a")
    plain = recorded.plain[("matmul", target)]
    (run,) = recorded.trace.select("matmul", target)
    log, _ = ptxas_verbose(str(plain["source"]), json.loads(run.target_detail)["arch"], tmp_path)
    (expected,) = oracle_resources(log).values()
    dynamic = plain["dynamic_smem"]
    assert isinstance(dynamic, dict)
    (dynamic_bytes,) = dynamic.values()
    smem_kib = (expected["static_smem"] + int(dynamic_bytes)) / 1024
    spills = expected["spill_stores"] + expected["spill_loads"]

    uri, version = open_fresh(client, EXAMPLES / "gemm.py")
    await wait_published(client, uri, version)
    titles = await lens_titles(client, uri, until="regs ")
    title = titles[0]
    assert title.startswith("cuda:sm_90a · ") and " passes · " in title
    assert title.endswith(f" ms · regs {expected['registers']} · spills {spills} · smem {smem_kib:.1f} KiB")
    assert titles[1:] == ["Trace", "IR after pass…"]


@pytest.mark.sweep  # a language server of its own and nvcc twice: with the sweeps, as its sibling
async def test_an_nvcc_error_in_the_lens_keeps_what_to_do(client: LanguageClient, tmp_path: Path) -> None:
    """The example GEMM for plain ``cuda:sm_90``: nvcc rejects TileLang's warp-specialized code,
    and its message ends with what to do (``such as sm_90a``). The lens used to cut it at 80
    characters, before that; it keeps the start and the end. Oracle: nvcc's own message,
    from ``irtrace record --machine-code`` of the same kernel and target."""
    import subprocess
    import sys

    from irtrace.trace.reader import load_trace

    out = tmp_path / "sm90.jsonl"
    spec = f"{EXAMPLES / 'gemm.py'}::matmul()"
    record = [sys.executable, "-m", "irtrace.cli", "record", "--machine-code", spec]
    subprocess.run([*record, "-t", "cuda:sm_90", "-o", str(out), "-q"], capture_output=True)
    (run,) = load_trace(out).runs
    found = re.search(r'static assertion failed with "([^"]+)"', run.error or "")
    assert found is not None, run.error
    nvcc_says = found[1]
    assert nvcc_says.endswith("such as sm_90a") and len(nvcc_says) > 80

    text = (
        (EXAMPLES / "gemm.py")
        .read_text()
        .replace("def matmul(", "# tilelang: target=cuda:sm_90\ndef matmul(")
    )
    path = tmp_path / "gemm_sm90.py"
    path.write_text(text)
    uri, version = open_fresh(client, path)
    await wait_published(client, uri, version)
    title = (await lens_titles(client, uri, until="nvcc: "))[0]
    message = title.split(" · nvcc: ", 1)[1]
    assert len(message) <= 80 and message.endswith("such as sm_90a")
    assert message.startswith(nvcc_says.split()[0])  # what failed: tl::warpgroup_reg_dealloc
