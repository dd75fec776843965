"""The hover links to a picture of the buffer's layout, drawn by the server from the worker's record,
and the picture's cells are the layout the trace records for the same kernel (``irtrace record``
in the test's own process, apart from the server and its worker, read back with
``irtrace.facts.layout_eval``)."""

from __future__ import annotations

import random
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from urllib.parse import unquote, urlparse

import msgspec
import pytest
from lsprotocol import types
from pytest_lsp import LanguageClient

from irtrace.facts.layout_eval import forward_index, forward_thread
from irtrace.trace.reader import load_trace
from irtrace.trace.schema import BufferLayout
from tests.lsp.conftest import EXAMPLES, open_fresh, wait_published, whole_file_server
from tilelang_lsp.pictures import LayoutPictures

client = whole_file_server(trusted=True, extra_targets=[], summary=False, machine_code=False)
pytestmark = pytest.mark.asyncio(loop_scope="module")
LINK = re.compile(r"\[layout picture\]\((file://[^)]+)\)")
SVG = "{http://www.w3.org/2000/svg}"


@pytest.fixture(scope="module")
def traced(tmp_path_factory: pytest.TempPathFactory) -> dict[str, BufferLayout]:
    """The example GEMM as ``irtrace record`` records it on cuda:sm_90, with the arguments of the
    call the language server analyzes (``matmul()`` on the file's last lines)."""
    from irtrace.cli.main import main  # in process: this test's Python lowers it, no second start

    output = tmp_path_factory.mktemp("traces") / "gemm.jsonl"
    spec = f"{EXAMPLES / 'gemm.py'}::matmul()"
    assert main(["record", spec, "-t", "cuda:sm_90", "-o", str(output), "-q"]) == 0
    (run,) = load_trace(output).runs
    return {layout.buffer: layout for layout in run.layouts[0].layouts}


async def hover_text(client: LanguageClient, uri: str, line: int, character: int) -> str:
    hover = await client.text_document_hover_async(
        types.HoverParams(
            text_document=types.TextDocumentIdentifier(uri=uri),
            position=types.Position(line=line, character=character),
        )
    )
    assert hover is not None and isinstance(hover.contents, types.MarkupContent)
    return hover.contents.value


def svg_cells(path: Path) -> dict[tuple[int, int], dict[str, str]]:
    root = ET.fromstring(path.read_text(encoding="utf-8"))
    return {
        (int(rect.attrib["data-row"]), int(rect.attrib["data-col"])): dict(rect.attrib)
        for rect in root.iter(f"{SVG}rect")
        if "data-row" in rect.attrib
    }


def picture_path(text: str) -> Path:
    (link,) = LINK.findall(text)
    path = Path(unquote(urlparse(link).path))
    assert path.is_file(), link
    return path


async def test_fragment_hover_links_to_the_traced_layout(
    client: LanguageClient, traced: dict[str, BufferLayout]
) -> None:
    uri, version = open_fresh(client, EXAMPLES / "gemm.py")
    await wait_published(client, uri, version)
    text = await hover_text(client, uri, 29, 14)  # C_local
    words, _, link = text.rpartition("\n\n")
    assert words.startswith("**C_local** — allocation in `matmul`") and "128 thr, 128 elem/thr" in words
    assert link.startswith("[layout picture](file://")  # after the words, which stay as they were
    path = picture_path(text)
    cells = svg_cells(path)

    fragment = traced["C_local"]
    assert fragment.kind == "fragment"
    assert len(cells) == 128 * 128  # the whole 128 x 128 fragment
    rng = random.Random(0)
    chosen = [(0, 0), (127, 127), (8, 1), *rng.sample(sorted(cells), 40)]
    threads = set()
    for row, col in chosen:
        attrs = cells[(row, col)]
        assert int(attrs["data-thread"]) == forward_thread(fragment, (row, col)), (row, col)
        assert int(attrs["data-local"]) == forward_index(fragment, (row, col))[0], (row, col)
        threads.add(int(attrs["data-thread"]))
    assert len(threads) > 8  # the cells show the mapping, not one thread

    # The same layout again (hovering where it is used) is the same file; a shared buffer's
    # picture shows banks.
    again = await hover_text(client, uri, 35, 43)  # T.gemm(A_shared, B_shared, C_local)
    assert picture_path(again) == path
    shared = picture_path(await hover_text(client, uri, 28, 12))  # B_shared
    assert shared != path and path.parent == shared.parent
    assert {"data-bank", "data-offset"} <= set(next(iter(svg_cells(shared).values())))


async def test_pictures_are_capped_and_an_undrawable_layout_gets_no_link(
    traced: dict[str, BufferLayout],
) -> None:
    layout = traced["C_local"]
    pictures = LayoutPictures(limit=3)
    paths = []
    for modulus in range(2, 7):  # five distinct layouts
        thread = f"({layout.forward_thread}) % {modulus}"
        path = pictures.picture(msgspec.structs.replace(layout, forward_thread=thread))
        assert path is not None
        paths.append(path)
    assert pictures.folder is not None
    assert sorted(pictures.folder.glob("*.svg")) == sorted(paths[-3:])
    assert pictures.picture(msgspec.structs.replace(layout, input_shape=["n", 128])) is None
    hostile = msgspec.structs.replace(layout, forward_thread="__import__('os').system('true')")
    assert pictures.picture(hostile) is None
