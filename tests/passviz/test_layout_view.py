"""The browser's layouts view (``l``) at 80 x 24, read off the screen and checked against TileLang's
own ``Fragment``/``Layout`` objects (``tests/passviz/layout_oracle.py``); ``w`` writes the SVG."""

from __future__ import annotations

import re
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import msgspec
import pytest
from textual.pilot import Pilot

from irtrace.trace.model import Trace
from irtrace.trace.reader import load_trace
from passviz.app import PassvizApp, key_help
from passviz.widgets.layout_view import LayoutView, svg_path
from tests.passviz.layout_oracle import int_of, oracle_layouts
from tests.passviz.test_snapshots import pressing, settle

SMALL = (80, 24)
ROW = re.compile(r"^\s{0,4}(\d+) ((?:\s*\d+\*?)+)\s*$")


def screen_lines(app: PassvizApp) -> list[str]:
    """What the terminal shows, line by line."""
    return [strip.text for strip in app.screen._compositor.render_strips()]


def grid_rows(lines: list[str]) -> dict[int, list[int]]:
    """``row -> the numbers in its cells`` for the grid rows on screen (a row label, then cells)."""
    rows: dict[int, list[int]] = {}
    for line in lines:
        match = ROW.match(line.rstrip(" ▎▍▌▋▊▉█▇▆▅▄▃▂▁"))
        if match:
            cells = [int(cell.rstrip("*")) for cell in match.group(2).split()]
            rows[int(match.group(1))] = cells[:-1]  # the last may be cut by the pane's edge
    return rows


async def pick(pilot: Pilot, kernel: str, target: str, buffer: str) -> LayoutView:
    """The run, the layouts view, and ``buffer`` picked with the arrows."""
    app = pilot.app
    assert isinstance(app, PassvizApp)
    await settle(pilot)
    run = next(r for r in app.traces[0].runs if r.kernel == kernel and r.target == target)
    app.open_run((0, run.run_id))
    await settle(pilot)
    await pilot.press("l")
    await settle(pilot)
    assert app.full_width  # under 120 columns the view takes the whole width
    view = app.query_one(LayoutView)
    assert view.record is not None
    for _ in range([layout.buffer for layout in view.record.layouts].index(buffer)):
        await pilot.press("down")
    await settle(pilot)
    assert view.selected is not None and view.selected.buffer == buffer
    return view


def thread_of(live: Any, coords: list[int]) -> int:
    replica = [0] if int(live.replicate_size) > 1 else []
    return int_of(live.map_forward_thread([*replica, *coords])[0])


def bank_of_element(live: Any, coords: list[int], bits: int) -> int:
    offset = 0
    for value, dim in zip(
        [int_of(e) for e in live.map_forward_index(coords)], live.get_output_shape(), strict=True
    ):
        offset = offset * int(dim) + value
    return offset * bits // 32 % 32


async def test_fragment_cells_on_screen_are_tilelangs_threads(layouts_trace: Trace) -> None:
    for target in ("cuda:sm_90", "hip:gfx942"):
        live = oracle_layouts("matmul", target)["C_local"]
        app = PassvizApp([layouts_trace], show_times=False)
        async with app.run_test(size=SMALL) as pilot:
            await pick(pilot, "matmul", target, "C_local")
            lines = screen_lines(app)
            assert len(lines) == 24 and max(len(line) for line in lines) <= 80
            assert any("C_local · local.fragment float32 [128, 128] · Fragment" in line for line in lines)
            rows = grid_rows(lines)
            assert rows and min(rows) == 0 and all(len(cells) >= 8 for cells in rows.values())
            for row, cells in rows.items():
                assert cells == [thread_of(live, [row, col]) for col in range(len(cells))], (target, row)

            # tab to the grid: it scrolls down to rows the first screen did not show
            await pilot.press("tab")
            for _ in range(3):
                await pilot.press("pagedown")
            await settle(pilot)
            scrolled = grid_rows(screen_lines(app))
            assert scrolled and min(scrolled) > max(rows)
            for row, cells in scrolled.items():
                assert cells == [thread_of(live, [row, col]) for col in range(len(cells))], (target, row)


async def test_shared_buffer_cells_on_screen_are_banks(layouts_trace: Trace) -> None:
    live = oracle_layouts("matmul", "cuda:sm_90")["B_shared"]  # [3, 128, 32], swizzle 64B
    app = PassvizApp([layouts_trace], show_times=False)
    async with app.run_test(size=SMALL) as pilot:
        await pick(pilot, "matmul", "cuda:sm_90", "B_shared")
        lines = screen_lines(app)
        assert any("swizzle 64B" in line for line in lines)
        rows = grid_rows(lines)
        assert rows
        stage_rows = int(live.get_input_shape()[1])
        for row, cells in rows.items():
            expected = [
                bank_of_element(live, [row // stage_rows, row % stage_rows, col], 16)
                for col in range(len(cells))
            ]
            assert cells == expected, row


async def test_w_writes_the_whole_layout_beside_the_trace(layouts_trace: Trace, tmp_path: Path) -> None:
    copy = tmp_path / "traces" / "mine.jsonl"
    copy.parent.mkdir()
    shutil.copy(layouts_trace.path or "", copy)
    live = oracle_layouts("matmul", "hip:gfx942")["C_local"]
    app = PassvizApp([load_trace(copy)], show_times=False)
    async with app.run_test(size=SMALL) as pilot:
        await pick(pilot, "matmul", "hip:gfx942", "C_local")
        await pilot.press("w")
        await settle(pilot)
        (written,) = copy.parent.glob("*.svg")
        assert written.name == "mine.matmul.hip_gfx942.C_local.svg"
        said = [n.message for n in app._notifications]
        assert said == [f"layout of C_local (128 x 128) written to {written}"]
    root = ET.fromstring(written.read_text(encoding="utf-8"))
    cells = {
        (int(rect.attrib["data-row"]), int(rect.attrib["data-col"])): int(rect.attrib["data-thread"])
        for rect in root.iter("{http://www.w3.org/2000/svg}rect")
        if "data-row" in rect.attrib
    }
    assert len(cells) == 128 * 128
    for row, col in [(0, 0), (127, 127), (17, 90), (64, 3), (100, 41)]:
        assert cells[(row, col)] == thread_of(live, [row, col])


@pytest.mark.sweep  # 17 s on 2 cores: the no-layout path, run with the sweeps
async def test_a_run_without_layouts_says_so_and_w_explains(factory_failure_trace: Trace) -> None:
    app = PassvizApp([factory_failure_trace], show_times=False)
    async with app.run_test(size=SMALL) as pilot:
        await settle(pilot)
        failed = next(r for r in app.traces[0].runs if r.kernel == "rms_norm")  # its factory raised
        assert not failed.layouts and not failed.passes
        app.open_run((0, failed.run_id))
        await settle(pilot)
        await pilot.press("l")
        await settle(pilot)
        text = " ".join(line.strip() for line in screen_lines(app))
        assert "has no layout" in text
        await pilot.press("w")
        await pilot.pause()  # not settle: with no pass listed it waits longer than the message stays
        assert [n.message for n in app._notifications] == ["no layout to write: press l and pick a buffer"]
        await pilot.press("i")  # leaving the view brings back the lists it hid
        await pilot.pause()
        assert not app.full_width and app.query_one("#left").display


def test_help_lists_the_layout_keys() -> None:
    keys = dict(key_help())
    assert "layouts" in keys["l"] and "SVG" in keys["w"]


def test_snapshot_layouts_view_80x24(snap_compare, snapshot_trace: Trace) -> None:
    assert snap_compare(
        PassvizApp([snapshot_trace]), run_before=pressing("l", "down", "down"), terminal_size=SMALL
    )


def test_svg_names_from_hostile_trace_text_stay_beside_the_trace(layouts_trace: Trace) -> None:
    run = next(r for r in layouts_trace.runs if r.kernel == "matmul")
    layout = msgspec.structs.replace(run.layouts[0].layouts[0], buffer="../../etc/[bold]evil\x1b]0;x\x07")
    hostile_run = msgspec.structs.replace(run, kernel="../..", target="cuda:sm_90/../x")
    path = svg_path(layouts_trace, hostile_run, layout)
    assert path.parent == Path(layouts_trace.path or "").parent
    assert re.fullmatch(r"[A-Za-z0-9_.-]+\.svg", path.name) and ".." not in path.name


def test_w_draws_at_most_max_cells_of_a_large_layout(layouts_trace: Trace, tmp_path: Path) -> None:
    from irtrace.edge.layout_pictures import MAX_CELLS
    from irtrace.trace.schema import BufferLayout
    from passviz.widgets.layout_view import write_svg

    wide = BufferLayout(
        buffer="S",
        scope="shared.dyn",
        dtype="float16",
        shape=[100, 1000],
        kind="layout",
        input_shape=[100, 1000],
        output_shape=[100, 1000],
        forward_vars=["i", "j"],
        forward_index=["i", "j"],
        summary="linear",
        text="Layout(linear)",
    )
    trace = Trace(runs=(), texts={}, path=str(tmp_path / "t.jsonl"))
    run = msgspec.structs.replace(layouts_trace.runs[0], kernel="k", target="cuda:sm_90")
    path, drawn = write_svg(trace, run, wide)
    rows = {int(r.attrib["data-row"]) for r in ET.parse(path).iter() if "data-row" in r.attrib}
    assert rows == set(range(MAX_CELLS // 1000)) and drawn == "the top-left 65 x 1000 of 100 x 1000"
