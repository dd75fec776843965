"""The pass browser driven with Textual's Pilot, asserting on what it selects and shows."""

from __future__ import annotations

import html
import re
import shutil
from pathlib import Path

import pytest
from msgspec.structs import replace

from irtrace.diff import diff_texts
from irtrace.trace.model import Trace, text_sha256
from irtrace.trace.reader import load_trace
from irtrace.trace.writer import TraceWriter
from passviz.app import KEYS, PassvizApp, key_help
from passviz.widgets.code_view import CodeView
from passviz.widgets.help_screen import HelpScreen
from passviz.widgets.pass_header import PassHeader
from passviz.widgets.pass_table import PassTable

SIZE = (160, 45)


def run_of(trace: Trace, target: str):
    return next(run for run in trace.runs if run.target == target)


async def test_opens_on_the_first_run_and_shows_its_first_pass(three_target_trace: Trace) -> None:
    app = PassvizApp([three_target_trace])
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        first = three_target_trace.runs[0]
        assert app.current_run == first
        assert app.selected_record == first.passes[0]
        assert app.query_one(PassTable).row_count == len(first.passes)
        assert app.query_one("#code", CodeView).document_text == three_target_trace.ir_after(first.passes[0])


async def test_next_changed_key_selects_the_next_changed_pass_and_shows_its_ir(
    three_target_trace: Trace,
) -> None:
    run = three_target_trace.runs[0]
    changed = [p for p in run.passes if p.changed]
    app = PassvizApp([three_target_trace])
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press("n")
        await pilot.pause()
        assert app.selected_record == changed[0]
        await pilot.press("n")
        await pilot.pause()
        assert app.selected_record == changed[1]
        assert app.query_one("#code", CodeView).document_text == three_target_trace.ir_after(changed[1])
        await pilot.press("N")
        await pilot.pause()
        assert app.selected_record == changed[0]


async def test_arrow_keys_move_through_passes(three_target_trace: Trace) -> None:
    run = three_target_trace.runs[0]
    app = PassvizApp([three_target_trace])
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press("down", "down", "down")
        await pilot.pause()
        assert app.selected_record == run.passes[3]
        assert app.query_one("#code", CodeView).document_text == three_target_trace.ir_after(run.passes[3])


async def test_diff_keys_show_the_pass_diff_unified_and_side_by_side(three_target_trace: Trace) -> None:
    trace = three_target_trace
    run = trace.runs[0]
    layout = run.find_pass("tl.LayoutInference")
    expected = diff_texts(trace.ir_before(layout), trace.ir_after(layout))
    app = PassvizApp([trace])
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        app.query_one(PassTable).move_to(layout.index)
        await pilot.press("d")
        await pilot.pause()
        code = app.query_one("#code", CodeView)
        assert code.kind == "UnifiedRows"
        shown = code.document_text.splitlines()
        reindented = sum(line.startswith("~") for line in shown)
        assert reindented == expected.reindented > 0
        assert sum(line.startswith("+") for line in shown) + reindented == expected.added > 0
        assert sum(line.startswith("-") for line in shown) + reindented == expected.removed
        await pilot.press("s")
        await pilot.pause()
        assert code.kind == "SideBySideRows"
        assert code.row_count == len(expected.side_by_side())
        await pilot.press("i")
        await pilot.pause()
        assert code.document_text == trace.ir_after(layout)


async def test_switching_target_keeps_the_aligned_pass(three_target_trace: Trace) -> None:
    trace = three_target_trace
    cuda, hip = run_of(trace, "cuda:sm_90"), run_of(trace, "hip:gfx942")
    lower = cuda.find_pass("tl.LowerTileOp")
    app = PassvizApp([trace])
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        app.query_one(PassTable).move_to(lower.index)
        await pilot.pause()
        await pilot.press("t")
        await pilot.pause()
        assert app.current_run == hip
        assert app.selected_record == hip.find_pass("tl.LowerTileOp")
        assert app.query_one("#code", CodeView).document_text == trace.ir_after(
            hip.find_pass("tl.LowerTileOp")
        )
        await pilot.press("T")
        await pilot.pause()
        assert app.current_run == cuda
        assert app.selected_record == lower


async def test_switching_target_by_clicking_the_tree(three_target_trace: Trace) -> None:
    trace = three_target_trace
    hip = run_of(trace, "hip:gfx942")
    app = PassvizApp([trace])
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press("n", "n")
        await pilot.pause()
        name = app.selected_record.name
        # Row 0 of the tree is the kernel, rows 1.. its targets.
        await pilot.click("#runs", offset=(6, 2))
        await pilot.pause()
        assert app.current_run == hip
        assert app.selected_record.name == name


async def test_changed_only_filter_lists_changed_and_failed_passes(three_target_trace: Trace) -> None:
    run = three_target_trace.runs[0]
    app = PassvizApp([three_target_trace])
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press("c")
        await pilot.pause()
        visible = [entry.record for entry in app.visible_entries]
        assert visible == [p for p in run.passes if p.changed or p.failed]
        assert app.query_one(PassTable).row_count == len(visible)
        assert app.selected_record in visible
        await pilot.press("c")
        await pilot.pause()
        assert len(app.visible_entries) == len(run.passes)


async def test_name_search_and_phase_filter(three_target_trace: Trace) -> None:
    run = three_target_trace.runs[0]
    app = PassvizApp([three_target_trace])
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press("slash", *"simplify", "enter")
        await pilot.pause()
        names = [entry.record.name for entry in app.visible_entries]
        assert names == [p.name for p in run.passes if "simplify" in p.name.lower()]
        assert isinstance(app.focused, PassTable)
        await pilot.press("escape")
        await pilot.pause()
        assert len(app.visible_entries) == len(run.passes)
        await pilot.press("p")  # all -> check
        await pilot.pause()
        assert {e.record.phase for e in app.visible_entries} == {"check"}


async def test_failed_pass_is_marked_and_shows_its_error(three_target_trace: Trace) -> None:
    trace = three_target_trace
    ascend = run_of(trace, "ascend")
    failed = next(p for p in ascend.passes if p.failed)
    app = PassvizApp([trace])
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press("t", "t")
        await pilot.pause()
        assert app.current_run == ascend
        await pilot.press("home")
        await pilot.press("e")
        await pilot.pause()
        assert app.selected_record == failed
        table = app.query_one(PassTable)
        assert str(table.get_cell(str(failed.index), "mark")) == "✗"
        header = str(app.query_one(PassHeader).render())
        assert "FAILED" in header and failed.error and failed.error.splitlines()[0] in header
        await pilot.press("d")
        await pilot.pause()
        assert failed.error.splitlines()[0] in app.query_one("#code", CodeView).document_text


async def test_help_screen_lists_every_key(three_target_trace: Trace) -> None:
    app = PassvizApp([three_target_trace])
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        listed = dict(app.screen.keys)
        assert len(KEYS) + 1 == len(key_help()) == len(listed)
        assert "next pass that changed the IR" in listed.values()
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, HelpScreen)


async def test_compare_trace_opens_the_same_pass_in_the_other_trace(
    three_target_trace: Trace, tmp_path: Path
) -> None:
    assert three_target_trace.path is not None
    other_path = tmp_path / "rerun.jsonl"
    shutil.copy(three_target_trace.path, other_path)
    other = load_trace(other_path)
    app = PassvizApp([three_target_trace, other])
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press("n", "n", "n")
        await pilot.pause()
        record = app.selected_record
        await pilot.press("o")
        await pilot.pause()
        assert app.run_ref == (1, three_target_trace.runs[0].run_id)
        assert app.selected_record == record
        assert app.trace is app.traces[1]
        # The title names the trace shown first, then the one o goes to.
        assert app.sub_title.startswith("rerun.jsonl") and Path(three_target_trace.path).name in app.sub_title
        await pilot.press("o")
        await pilot.pause()
        assert app.run_ref == (0, three_target_trace.runs[0].run_id) and app.trace is app.traces[0]
        assert app.sub_title.startswith(Path(three_target_trace.path).name)


async def test_source_key_on_the_run_tab_shows_the_source_beside_the_ir(three_target_trace: Trace) -> None:
    app = PassvizApp([three_target_trace])
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press("r")
        await pilot.pause()
        assert app.view_mode == "run"
        await pilot.press("m")
        await pilot.pause()
        assert app.view_mode == "ir" and app.show_source
        assert app.query_one("#source").display


@pytest.mark.sweep  # slow; a sibling covers it in make test
async def test_ir_of_tens_of_thousands_of_lines_stays_responsive(
    three_target_trace: Trace, tmp_path: Path
) -> None:
    """The real CUDA run, with each IR text repeated 400 times (about 30,000 lines a pass)."""
    source = three_target_trace
    run = source.runs[0]
    big = {sha: "\n".join([text] * 400) for sha, text in source.texts.items()}
    renamed = {sha: text_sha256(text) for sha, text in big.items()}

    def bigger(sha: str | None) -> str | None:
        return renamed[sha] if sha is not None else None

    passes = tuple(replace(p, ir_before=bigger(p.ir_before), ir_after=bigger(p.ir_after)) for p in run.passes)
    large_run = replace(
        run,
        passes=passes,
        input_ir=bigger(run.input_ir),
        source_sha256=bigger(run.source_sha256),
        kernel_file_sha256=bigger(run.kernel_file_sha256),
    )
    with TraceWriter(tmp_path / "large.jsonl") as writer:
        writer.add_run(large_run, {renamed[sha]: text for sha, text in big.items()})
    trace = load_trace(tmp_path / "large.jsonl")
    lower = trace.runs[0].find_pass("tl.LowerTileOp")
    app = PassvizApp([trace])
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        code = app.query_one("#code", CodeView)
        app.query_one(PassTable).move_to(lower.index)
        await pilot.pause()
        assert code.row_count == len(trace.ir_after(lower).splitlines()) > 20_000
        await pilot.click("#code")
        assert app.focused is code
        await pilot.press("pagedown", "pagedown", "end")
        await pilot.pause()
        assert code.scroll_offset.y > 20_000  # speed is bench/tui_open.py's to measure, not a test's
        await app.workers.wait_for_complete()
        counts = app._counts[app.run_ref]
        expected = diff_texts(trace.ir_before(lower), trace.ir_after(lower))
        assert counts[lower.index] == (expected.added, expected.removed)


def screen_text(app: PassvizApp) -> str:
    """What the terminal shows, as text (from Textual's own screenshot of the screen)."""
    svg = app.export_screenshot()
    rows = re.findall(r"<text[^>]*>(.*?)</text>", svg, re.DOTALL)
    return html.unescape("".join(rows)).replace("\xa0", " ")


async def test_a_failed_passs_error_is_on_screen_at_80x24(three_target_trace: Trace) -> None:
    """At 80x24 the header has three lines beside the 40-column lists: the error of a failed pass
    must still be readable in full where the IR would be (oracle: the error the trace recorded)."""
    ascend = run_of(three_target_trace, "ascend")
    failed = next(p for p in ascend.passes if p.failed)
    assert failed.error
    app = PassvizApp([three_target_trace], show_times=False)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        await pilot.press("t", "t", "home", "e")
        await pilot.pause()
        assert app.selected_record == failed and app.view_mode == "ir"
        shown = " ".join(screen_text(app).split())
        first = " ".join(failed.error.splitlines()[0].split())
        words = first.split()
        # the whole first line of the error, however the 40-odd columns wrap it
        assert all(word in shown for word in words), (first, shown)
