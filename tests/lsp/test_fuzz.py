"""Hundreds of random edits of the example kernels and of the kernel-style corpus never kill the
server or its worker; each request answers in 5 s."""

from __future__ import annotations

import asyncio
import random
import time
from pathlib import Path

import pytest
from lsprotocol import types
from pytest_lsp import LanguageClient

from tests.lsp.conftest import EXAMPLES, change, open_fresh, styles_corpus, wait_published, whole_file_server

client = whole_file_server(trusted=True, debounce_ms=20, hint_wait_s=0.5, extra_targets=[], summary=False)
pytestmark = pytest.mark.asyncio(loop_scope="module")

EDITS = 320
LIMIT_S = 5.0
EXAMPLE_FILES = [EXAMPLES / "gemm.py", EXAMPLES / "flash_attention.py", EXAMPLES / "rmsnorm.py"]
STYLE_FILES = [
    "eager_gemm.py",
    "eager_elementwise.py",
    "dynamic_gemm.py",
    "autotune_gemm.py",
    "lazy_kernels.py",
    "quantpkg/kernels/per_token.py",
    "ascend_scale.py",
]


def mutate(text: str, rng: random.Random) -> str:
    """One random edit: truncate, delete or insert characters or lines, or swap two lines."""
    lines = text.splitlines(keepends=True)
    kind = rng.choice(
        ["truncate", "delete_chars", "insert_chars", "delete_line", "insert_line", "swap_lines"]
    )
    if kind == "truncate":
        return text[: rng.randrange(len(text) + 1)]
    if kind == "delete_chars" and text:
        start = rng.randrange(len(text))
        return text[:start] + text[start + rng.randint(1, 12) :]
    if kind == "insert_chars":
        start = rng.randrange(len(text) + 1)
        junk = "".join(rng.choice("()[]:,.=+-*/ _#'\"\\\n\tTx0123456789") for _ in range(rng.randint(1, 8)))
        return text[:start] + junk + text[start:]
    if kind == "delete_line" and lines:
        del lines[rng.randrange(len(lines))]
    elif kind == "insert_line":
        lines.insert(rng.randrange(len(lines) + 1), rng.choice(lines) if lines else "\n")
    elif kind == "swap_lines" and len(lines) > 1:
        i, j = rng.sample(range(len(lines)), 2)
        lines[i], lines[j] = lines[j], lines[i]
    return "".join(lines)


async def timed(request) -> float:  # type: ignore[no-untyped-def]
    started = time.monotonic()
    await asyncio.wait_for(request, LIMIT_S)
    return time.monotonic() - started


@pytest.mark.sweep  # 16-20 s on 2 cores: with the sweeps, to keep make test within 10 minutes
async def test_random_edits_are_survived(client: LanguageClient, tmp_path: Path) -> None:
    rng = random.Random(4)
    styles = styles_corpus(tmp_path / "styles")
    examples = [str(path) for path in [*EXAMPLE_FILES, *(styles / name for name in STYLE_FILES)]]
    originals = {name: Path(name).read_text() for name in examples}
    opened = {name: open_fresh(client, Path(name), originals[name]) for name in examples}
    uris = {name: uri for name, (uri, _) in opened.items()}
    versions = {name: version for name, (_, version) in opened.items()}
    texts = dict(originals)
    start = await client.protocol.send_request_async("tilelang/workerStatus", {})
    slowest = 0.0
    for step in range(EDITS):
        name = rng.choice(examples)
        texts[name] = originals[name] if rng.random() < 0.15 else mutate(texts[name], rng)
        versions[name] += 1
        change(client, uris[name], versions[name], texts[name])
        if rng.random() < 0.5:
            await asyncio.sleep(rng.choice([0.0, 0.01, 0.05, 0.2]))
        document = types.TextDocumentIdentifier(uri=uris[name])
        whole = types.Range(start=types.Position(0, 0), end=types.Position(10_000, 0))
        slowest = max(
            slowest,
            await timed(client.text_document_inlay_hint_async(types.InlayHintParams(document, whole))),
        )
        if step % 5 == 0:
            position = types.Position(line=rng.randrange(60), character=rng.randrange(40))
            slowest = max(
                slowest, await timed(client.text_document_hover_async(types.HoverParams(document, position)))
            )
            slowest = max(
                slowest, await timed(client.text_document_code_lens_async(types.CodeLensParams(document)))
            )
    assert slowest < LIMIT_S
    # After the storm, each pristine file still analyzes to compiled hints only.
    for name in examples:
        versions[name] += 1
        change(client, uris[name], versions[name], originals[name])
        await wait_published(client, uris[name], versions[name])
        got = await client.text_document_inlay_hint_async(
            types.InlayHintParams(types.TextDocumentIdentifier(uri=uris[name]), whole)
        )
        labels = [h.label for h in got or []]
        assert labels and not [label for label in labels if "source only" in label], (name, labels)
    # The worker survived every edit: the same process, never restarted.
    status = await client.protocol.send_request_async("tilelang/workerStatus", {})
    assert (status.pid, status.restarts) == (start.pid, start.restarts) and status.pid is not None
    assert [m.message for m in client.messages if "worker" in m.message] == []
