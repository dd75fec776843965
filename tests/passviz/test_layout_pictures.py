"""Layout pictures read back and checked against TileLang's own layout objects.

The oracle is the module right after ``tl.LayoutInference``, caught by a plain TVM instrument
(``tests/passviz/layout_oracle.py``), and the ``Fragment``/``Layout`` methods on its
``layout_map`` (``map_forward_thread``, ``map_forward_index``), never irtrace's recorder or
evaluator.
"""

from __future__ import annotations

import random
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from irtrace.base.errors import UsageError
from irtrace.edge.layout_pictures import (
    LayoutDrawingError,
    bank_of,
    element_bits,
    layout_grid,
    layout_svg,
)
from irtrace.trace.model import KernelRun, Trace
from irtrace.trace.schema import BufferLayout
from passviz.cli import main as passviz_main
from passviz.layout_text import layout_text
from tests.passviz.layout_oracle import int_of, oracle_layouts

TARGETS = ["cuda:sm_90", "hip:gfx942"]


def _run(trace: Trace, kernel: str, target: str) -> KernelRun:
    return next(r for r in trace.runs if r.kernel == kernel and r.target == target)


def _cells(svg: str) -> dict[tuple[int, int], dict[str, str]]:
    root = ET.fromstring(svg)
    return {
        (int(rect.get("data-row", -1)), int(rect.get("data-col", -1))): dict(rect.attrib)
        for rect in root.iter("{http://www.w3.org/2000/svg}rect")
        if rect.get("data-row") is not None
    }


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("kernel", ["matmul", "flash_attention_fwd"])
def test_svg_cells_equal_tilelangs_own_mapping(layouts_trace: Trace, kernel: str, target: str) -> None:
    run = _run(layouts_trace, kernel, target)
    oracle = oracle_layouts(kernel, target)
    recorded = {layout.buffer: layout for layout in run.layouts[0].layouts}
    assert set(recorded) == set(oracle)
    rng = random.Random(0)
    checked = {"fragment": 0, "layout": 0}
    for name, layout in recorded.items():
        live = oracle[name]
        rows = range(0, min(32, 1 if len(layout.input_shape) == 1 else int(layout.input_shape[-2])))
        svg = layout_svg(layout_grid(layout, rows, range(0, min(32, int(layout.input_shape[-1])))))
        cells = _cells(svg)
        for row, col in rng.sample(sorted(cells), 12):
            attrs = cells[(row, col)]
            coords = [col] if len(layout.input_shape) == 1 else [row, col]
            coords = [0] * (len(layout.input_shape) - len(coords)) + coords
            if layout.kind == "fragment":
                replicas = int(live.replicate_size)
                rep = [0] if replicas > 1 else []
                assert int(attrs["data-thread"]) == int_of(live.map_forward_thread(rep + coords)[0]), (
                    name,
                    row,
                    col,
                )
                assert int(attrs["data-local"]) == int_of(live.map_forward_index(rep + coords)[0])
                if replicas > 1:
                    every = [int_of(live.map_forward_thread([r, *coords])[0]) for r in range(replicas)]
                    assert attrs["data-threads"].split() == [str(t) for t in every]
                    assert int(attrs["data-replicas"]) == replicas
            else:
                out = [int_of(e) for e in live.map_forward_index(coords)]
                shape = [int(d) for d in live.get_output_shape()]
                offset = 0
                for value, dim in zip(out, shape, strict=True):
                    offset = offset * dim + value
                bits = int(str(layout.dtype).rstrip("abcdefghijklmnopqrstuvwxyz_").split("float")[-1] or 16)
                assert int(attrs["data-bank"]) == (offset * bits // 8 // 4) % 32, (name, row, col)
                assert int(attrs["data-offset"]) == offset
            checked[layout.kind] += 1
    assert checked["fragment"] > 0 and checked["layout"] > 0


def _linear(rows: int = 16, cols: int = 64) -> BufferLayout:
    return BufferLayout(
        buffer="S",
        scope="shared.dyn",
        dtype="float16",
        shape=[rows, cols],
        kind="layout",
        input_shape=[rows, cols],
        output_shape=[rows, cols],
        forward_vars=["i", "j"],
        forward_index=["i", "j"],
        swizzle="linear",
        summary="linear",
        text="Layout(linear)",
    )


def test_a_linear_shared_layout_shows_its_conflicts_and_a_swizzle_none(layouts_trace: Trace) -> None:
    svg = layout_svg(layout_grid(_linear()))
    marks = ET.fromstring(svg).findall(".//{http://www.w3.org/2000/svg}text[@data-ways]")
    assert {m.get("data-ways") for m in marks} == {
        "8"
    }  # 128-byte rows: a 16-byte column, 8 rows, one bank set
    swizzled = _run(layouts_trace, "flash_attention_fwd", "cuda:sm_90").layouts[0].layouts
    q_shared = next(layout for layout in swizzled if layout.buffer == "Q_shared")
    assert "swizzle 128B" in layout_svg(layout_grid(q_shared))
    assert layout_grid(q_shared).conflicts == {}


def test_terminal_grid_fits_80_columns(layouts_trace: Trace) -> None:
    for layout in _run(layouts_trace, "matmul", "cuda:sm_90").layouts[0].layouts:
        console = Console(width=80, record=True, color_system=None)
        console.print(layout_text(layout, width=80))
        lines = console.export_text().splitlines()
        assert lines and max(len(line) for line in lines) <= 80
        assert any(line.lstrip().startswith("15 ") for line in lines)  # 16 rows drawn


def test_passviz_layout_command(
    layouts_trace: Trace, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = str(layouts_trace.path)
    output = tmp_path / "c.svg"
    args = ["layout", trace, "-k", "matmul", "-t", "hip:gfx942", "C_local"]
    assert passviz_main([*args, "-o", str(output), "--rows", "8:24", "--cols", "0:16"]) == 0
    cells = _cells(output.read_text())
    assert len(cells) == 16 * 16 and min(cells)[0] == 8
    assert passviz_main([*args, "--width", "80"]) == 0
    assert "C_local" in capsys.readouterr().out
    assert passviz_main([*args, "--rows", "5:2"]) == 2
    assert passviz_main([*args[:-1], "nope"]) == 8


def _hostile(**changes: Any) -> BufferLayout:
    fields = {
        "buffer": "evil\x1b]0;title\x07</text><script>",
        "scope": "local.fragment",
        "dtype": "float32",
        "shape": [31623, 31623],
        "kind": "fragment",
        "input_shape": [31623, 31623],
        "output_shape": [1],
        "forward_vars": ["i", "j"],
        "forward_index": ["0"],
        "forward_thread": "i * 31623 + j",
        "threads": 1_000_000_000,
        "summary": "<b>huge</b>",
        "text": "x",
    }
    fields.update(changes)
    return BufferLayout(**fields)


def test_hostile_layouts_are_cropped_or_refused() -> None:
    huge = _hostile()
    grid = layout_grid(huge)  # a billion elements: only the 128 x 128 crop is evaluated
    assert len(grid.cells) == 128 * 128 and grid.cropped
    svg = layout_svg(layout_grid(huge, range(0, 4), range(0, 4)))
    root = ET.fromstring(svg)  # well-formed: the name's markup and control characters are escaped
    assert "<script>" not in svg and "\x1b" not in svg
    assert root.get("data-buffer", "").startswith("evil\\x1b")
    with pytest.raises(UsageError):
        layout_grid(huge, range(0, 1000), range(0, 1000))
    with pytest.raises(LayoutDrawingError):
        layout_grid(_hostile(forward_thread="__import__('os').system('true')"), range(1), range(1))
    with pytest.raises(LayoutDrawingError):
        layout_grid(_hostile(input_shape=["n", 4]), range(1), range(1))
    with pytest.raises(LayoutDrawingError):
        layout_grid(_hostile(forward_thread="2 ** 10 ** 10"), range(1), range(1))
    replicated = _hostile(replicate=10**9, replicate_var="r", forward_thread="r")
    cell = layout_grid(replicated, range(1), range(1)).cells[0]
    assert len(cell.threads) == 64  # a billion replicas are counted, not listed
    console = Console(width=80, record=True, color_system=None)
    console.print(layout_text(huge, width=80))
    assert "\x1b" not in console.export_text()


def test_element_bits_and_banks() -> None:
    assert [element_bits(d) for d in ("float16", "float32", "float8_e4m3", "int8", "bool")] == [
        16,
        32,
        8,
        8,
        8,
    ]
    assert bank_of(64, 16) == 0 and bank_of(2, 16) == 1 and bank_of(31, 32) == 31


def test_report_draws_each_distinct_layout_once(layouts_trace: Trace) -> None:
    import re

    from passviz.report import report_html

    page = report_html(layouts_trace)
    drawn = re.findall(r"<h3 id='(layout\d+)'>", page)
    links = re.findall(r"<a href='#(layout\d+)'>", page)
    assert drawn and len(set(drawn)) == len(drawn)
    # the flash-attention statistics fragments (scores_max, logsum, ...) share one drawing
    assert len(links) > len(drawn) and set(links) == set(drawn)
    from tests.passviz.report_page import stored_html

    # The drawings are kept compressed in the page until seen (passviz/report_diffs.py).
    svgs = re.findall(r"<svg .*?</svg>", "".join(stored_html(page)), flags=re.S)
    fragment = next(s for s in svgs if 'data-kind="fragment"' in s)
    ET.fromstring(fragment.replace("<svg ", '<svg xmlns="http://www.w3.org/2000/svg" ', 1))
