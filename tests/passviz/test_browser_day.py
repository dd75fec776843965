"""The browser for a whole day's use, driven with Pilot on real traces: keys, panes, failures,
the --compare diff, colours and the source map."""

from __future__ import annotations

import itertools
import subprocess
from pathlib import Path

from textual import events
from textual.widgets import Input

from irtrace.diff import diff_texts
from irtrace.trace.model import KernelRun, PassRecord, Trace
from irtrace.trace.reader import load_trace
from passviz.app import PassvizApp
from passviz.semantics import BY_NAME
from passviz.widgets.code_view import CodeView, IrRows
from passviz.widgets.pass_header import PassHeader
from passviz.widgets.pass_table import PassTable
from passviz.widgets.run_info import RunInfo
from passviz.widgets.run_picker import RunPicker

SIZE = (160, 45)


def top_level_after(run: KernelRun, name: str, previous: str) -> PassRecord:
    """The top-level pass ``name`` that follows the top-level pass ``previous``."""
    top = [p for p in run.passes if p.parent is None]
    return next(p for before, p in itertools.pairwise(top) if p.name == name and before.name == previous)


def code(app: PassvizApp) -> CodeView:
    return app.query_one("#code", CodeView)


async def test_home_and_end_go_to_the_first_and_last_pass(three_target_trace: Trace) -> None:
    run = three_target_trace.runs[0]
    app = PassvizApp([three_target_trace])
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press("down", "down", "end")
        await pilot.pause()
        assert app.selected_record == run.passes[-1]
        assert code(app).document_text.rstrip() == three_target_trace.ir_after(run.passes[-1]).rstrip()
        await pilot.press("home")
        await pilot.pause()
        assert app.selected_record == run.passes[0]


async def test_quickly_repeated_keys_each_act_on_the_pass_the_previous_one_chose(
    three_target_trace: Trace,
) -> None:
    run = three_target_trace.runs[0]
    changed = [p for p in run.passes if p.changed]
    app = PassvizApp([three_target_trace])
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        # Posted at once, without waiting for the screen between them, as fast typing does.
        for _ in range(5):
            app.post_message(events.Key("n", "n"))
        await pilot.pause(0.3)
        await pilot.pause()
        assert app.selected_record == changed[4]
        for _ in range(3):
            app.post_message(events.Key("down", None))
        await pilot.pause(0.3)
        await pilot.pause()
        assert app.selected_record == run.passes[run.passes.index(changed[4]) + 3]
        assert code(app).document_text.rstrip() == three_target_trace.ir_after(app.selected_record).rstrip()


async def test_the_code_pane_gets_most_of_the_width_and_f_gives_it_all(three_target_trace: Trace) -> None:
    app = PassvizApp([three_target_trace])
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        left = app.query_one("#left").size.width
        assert code(app).size.width > left
        await pilot.press("f")
        await pilot.pause()
        assert not app.query_one("#left").display
        assert code(app).size.width >= SIZE[0] - 2
        await pilot.press("f")
        await pilot.pause()
        assert app.query_one("#left").display and code(app).size.width < SIZE[0] - left + 2


async def test_k_picks_a_kernel_and_target_by_typing(
    factory_failure_trace: Trace, three_target_trace: Trace
) -> None:
    app = PassvizApp([three_target_trace])
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press("n", "n")
        await pilot.pause()
        name = app.selected_record.name if app.selected_record else None
        await pilot.press("k")
        await pilot.pause()
        assert isinstance(app.screen, RunPicker)
        assert len(app.screen.shown) == len(three_target_trace.runs)
        # The hint is a query that finds a run of this trace: typed, it leaves some listed.
        hint = app.screen.query_one("#picker-filter", Input).placeholder.removeprefix("e.g. ")
        await pilot.press(*hint)
        await pilot.pause()
        assert 0 < len(app.screen.shown) < len(three_target_trace.runs) or len(three_target_trace.runs) == 1
        await pilot.press(*["backspace"] * len(hint))
        await pilot.press(*"gfx", "enter")
        await pilot.pause()
        assert not isinstance(app.screen, RunPicker)
        assert app.current_run is not None and app.current_run.target == "hip:gfx942"
        assert app.selected_record is not None and app.selected_record.name == name


async def test_r_shows_spec_arguments_pass_configs_and_error(
    three_target_trace: Trace, no_ws_trace: Trace
) -> None:
    app = PassvizApp([no_ws_trace])
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press("r")
        await pilot.pause()
        info = app.query_one(RunInfo)
        assert info.display and not code(app).display
        text = info.text
        run = no_ws_trace.runs[0]
        assert run.spec in text and "256, 256, 256" in text
        assert "tl.disable_warp_specialized = true" in text
    ascend = next(r for r in three_target_trace.runs if r.target == "ascend")
    app = PassvizApp([three_target_trace])
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press("t", "t", "r")
        await pilot.pause()
        assert app.current_run == ascend
        text = app.query_one(RunInfo).text
        assert (
            "failed" in text and ascend.error and ascend.error.splitlines()[0][:60] in text.replace("\n", "")
        )


async def test_a_cut_short_trace_says_so(three_target_trace: Trace, tmp_path: Path) -> None:
    assert three_target_trace.path is not None
    lines = Path(three_target_trace.path).read_text().splitlines(keepends=True)
    end = max(k for k, line in enumerate(lines) if line.startswith('{"record":"pass"'))
    cut = tmp_path / "cut.jsonl"
    cut.write_text("".join(lines[:end]))  # the last runs lose their end records
    trace = load_trace(cut)
    assert trace.truncated
    app = PassvizApp([trace])
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        last = trace.runs[-1]
        app.open_run((0, last.run_id))
        await pilot.press("r")
        await pilot.pause()
        assert "cut short" in app.query_one(RunInfo).text
        assert "cut short" in str(app.query_one(PassHeader).render())


async def test_a_kernel_whose_factory_raised_shows_its_error(factory_failure_trace: Trace) -> None:
    failed = factory_failure_trace.runs[0]
    assert failed.kernel == "rms_norm" and not failed.passes and failed.error
    app = PassvizApp([factory_failure_trace])
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert app.current_run == failed
        header = str(app.query_one(PassHeader).render())
        assert "before its first pass" in header and "threads must be a power of two" in header
        assert "no pass selected" not in header
        assert "threads must be a power of two" in code(app).document_text


async def test_t_keeps_the_pipeline_point_not_the_name_and_number(three_target_trace: Trace) -> None:
    """The top-level tl.Simplify after tl.LowerAccessPtr is tl.Simplify#5 on CUDA and #4 on HIP."""
    trace = three_target_trace
    cuda, hip = trace.runs[0], trace.runs[1]
    here = top_level_after(cuda, "tl.Simplify", "tl.LowerAccessPtr")
    there = top_level_after(hip, "tl.Simplify", "tl.LowerAccessPtr")
    labels_cuda = dict(zip((p.index for p in cuda.passes), cuda.occurrence_names(), strict=True))
    labels_hip = dict(zip((p.index for p in hip.passes), hip.occurrence_names(), strict=True))
    assert labels_cuda[here.index] != labels_hip[there.index]
    app = PassvizApp([trace])
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        app.query_one(PassTable).move_to(here.index)
        await pilot.press("t")
        await pilot.pause()
        assert app.current_run == hip and app.selected_record == there


async def test_compare_diffs_the_same_pass_of_the_two_traces(
    three_target_trace: Trace, no_ws_trace: Trace
) -> None:
    ws, no_ws = three_target_trace.runs[0], no_ws_trace.runs[0]
    here = top_level_after(ws, "tl.Simplify", "tl.LowerAccessPtr")
    there = top_level_after(no_ws, "tl.Simplify", "tl.LowerAccessPtr")
    expected = diff_texts(three_target_trace.ir_after(here), no_ws_trace.ir_after(there))
    app = PassvizApp([three_target_trace, no_ws_trace])
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        app.query_one(PassTable).move_to(here.index)
        await pilot.press("x")
        await pilot.pause()
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert app.view_mode == "other" and code(app).kind == "UnifiedRows"
        shown = code(app).document_text.splitlines()
        reindented = sum(line.startswith("~") for line in shown)
        assert sum(line.startswith("+") for line in shown) + reindented == expected.added > 0
        assert sum(line.startswith("-") for line in shown) + reindented == expected.removed
        header = str(app.query_one(PassHeader).render())
        labels = dict(zip((p.index for p in no_ws.passes), no_ws.occurrence_names(), strict=True))
        assert labels[there.index] in header
        # o opens the other trace at the same pipeline point.
        await pilot.press("o")
        await pilot.pause()
        assert app.run_ref == (1, no_ws.run_id) and app.selected_record == there


async def test_a_moved_line_counts_in_the_table_and_header(three_target_trace: Trace, tmp_path: Path) -> None:
    trace = three_target_trace
    run = trace.runs[0]
    record = run.find_pass("tl.PlanAndUpdateBufferAllocationLocation")
    before, after = tmp_path / "before", tmp_path / "after"
    before.write_text(trace.ir_before(record) + "\n")
    after.write_text(trace.ir_after(record) + "\n")
    # GNU diff, the oracle: the lines it adds and removes.
    out = subprocess.run(
        ["diff", str(before), str(after)], capture_output=True, text=True
    ).stdout.splitlines()
    added, removed = sum(x.startswith(">") for x in out), sum(x.startswith("<") for x in out)
    before_lines, after_lines = trace.ir_before(record).splitlines(), trace.ir_after(record).splitlines()
    assert (added, removed) != (0, 0) and sorted(before_lines) == sorted(after_lines)  # a moved line
    app = PassvizApp([trace])
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        app.query_one(PassTable).move_to(record.index)
        await pilot.pause()
        cell = str(app.query_one(PassTable).get_cell(str(record.index), "lines"))
        assert cell == f"+{added} -{removed}"
        assert f"+{added} -{removed}" in str(app.query_one(PassHeader).render())


def test_tile_operators_synchronization_and_intrinsics_get_their_colours(three_target_trace: Trace) -> None:
    from passviz.highlight import SEMANTIC_STYLES, highlighter

    run = three_target_trace.runs[0]
    lowered = three_target_trace.ir_after(run.find_pass("tl.LowerTileOp"))
    frontend = three_target_trace.text(run.input_ir)
    examples = {
        "tile": next(line for line in frontend.splitlines() if "T.copy(" in line),
        "sync": next(line for line in lowered.splitlines() if "T.mbarrier_wait_parity(" in line),
        "intrinsic": next(line for line in lowered.splitlines() if "T.tma_load(" in line),
    }
    for category, line in examples.items():
        call = {"tile": "T.copy", "sync": "T.mbarrier_wait_parity", "intrinsic": "T.tma_load"}[category]
        text = highlighter("python").highlight(line)
        start = line.index(call)
        styles = [span.style for span in text.spans if span.start <= start < span.end]
        assert SEMANTIC_STYLES[category] in styles, (category, line)
        assert SEMANTIC_STYLES[category].color is not None
        assert str(SEMANTIC_STYLES[category].color.name).lower() == BY_NAME[category].colour
    # A barrier buffer's name is not a call: not coloured.
    assert not highlighter("python").highlight(
        'mbarrier = T.handle("uint64", "shared.barrier")'
    ).spans or all(
        s.style not in SEMANTIC_STYLES.values()
        for s in highlighter("python").highlight('mbarrier = T.handle("uint64", "shared.barrier")').spans
    )


async def test_m_shows_the_source_beside_the_ir_and_guesses_no_mapping(three_target_trace: Trace) -> None:
    """The trace was recorded without source maps: the kernel's file shows beside the IR, and no
    IR line names a source line (tests/passviz/test_source_lines.py checks the exact mapping)."""
    run = three_target_trace.runs[0]
    record = run.find_pass("tl.LayoutInference")
    app = PassvizApp([three_target_trace])
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        app.query_one(PassTable).move_to(record.index)
        await pilot.press("m")
        await pilot.pause()
        source = app.query_one("#source", CodeView)
        assert source.display and isinstance(source.rows, IrRows)
        kernel_file = Path(run.spec.split("::")[0]).read_text().splitlines()
        assert list(source.rows.items) == kernel_file
        rows = code(app).rows
        assert isinstance(rows, IrRows) and rows.source_lines is None
        assert not source.marked
        # g asks for a line, but without maps there is nothing to highlight: it says how to get them
        await pilot.press("g", "3", "6", "enter")
        await pilot.pause()
        assert app.picked_line is None and not code(app).marked
