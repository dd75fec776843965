"""The browser's look, with pytest-textual-snapshot (times fixed: see ``snapshot_trace``)."""

from __future__ import annotations

from irtrace.trace import Trace
from passviz.app import PassvizApp
from passviz.widgets.pass_table import PassTable

SIZE = (160, 45)


def test_snapshot_first_screen(snap_compare, snapshot_trace: Trace) -> None:
    assert snap_compare(PassvizApp([snapshot_trace]), terminal_size=SIZE)


def test_snapshot_side_by_side_diff_of_layout_inference(snap_compare, snapshot_trace: Trace) -> None:
    index = snapshot_trace.runs[0].find_pass("tl.LayoutInference").index

    async def select(pilot) -> None:
        await pilot.pause()
        pilot.app.query_one(PassTable).move_to(index)
        await pilot.pause()

    assert snap_compare(PassvizApp([snapshot_trace]), run_before=select, press=["s"], terminal_size=SIZE)


def test_snapshot_failed_ascend_pass_changed_only(snap_compare, snapshot_trace: Trace) -> None:
    assert snap_compare(PassvizApp([snapshot_trace]), press=["t", "t", "c", "e"], terminal_size=SIZE)


def test_snapshot_help_screen(snap_compare, snapshot_trace: Trace) -> None:
    assert snap_compare(PassvizApp([snapshot_trace]), press=["question_mark"], terminal_size=SIZE)
