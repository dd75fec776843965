"""The browser's look, with pytest-textual-snapshot (times fixed: see ``snapshot_trace``).

Keys are pressed in ``run_before`` and followed by ``settle``, so the screenshot is taken only
once the messages a key press sets off have all been handled, however busy the machine is.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from textual.pilot import Pilot

from irtrace.trace.model import Trace
from passviz.app import PassvizApp
from passviz.widgets.code_view import CodeView
from passviz.widgets.pass_table import PassTable

SIZE = (160, 45)


async def settle(pilot: Pilot) -> None:
    app = pilot.app
    assert isinstance(app, PassvizApp)
    for _ in range(200):
        await pilot.pause()
        if (
            app.query_one(PassTable).row_count
            and app.query_one("#code", CodeView).row_count
            and app.selected is not None
        ):
            break
    await app.workers.wait_for_complete()
    await pilot.pause()
    await pilot.wait_for_scheduled_animations()
    await pilot.pause()


def pressing(*keys: str, select: str | None = None) -> Callable[[Pilot], Awaitable[None]]:
    async def run_before(pilot: Pilot) -> None:
        await settle(pilot)
        if select is not None:
            app = pilot.app
            assert isinstance(app, PassvizApp) and app.current_run is not None
            app.query_one(PassTable).move_to(app.current_run.find_pass(select).index)
            await settle(pilot)
        for key in keys:
            await pilot.press(key)
            await settle(pilot)

    return run_before


def test_snapshot_first_screen(snap_compare, snapshot_trace: Trace) -> None:
    assert snap_compare(PassvizApp([snapshot_trace]), run_before=pressing(), terminal_size=SIZE)


def test_snapshot_side_by_side_diff_of_layout_inference(snap_compare, snapshot_trace: Trace) -> None:
    app = PassvizApp([snapshot_trace])
    assert snap_compare(app, run_before=pressing("s", select="tl.LayoutInference"), terminal_size=SIZE)


def test_snapshot_failed_ascend_pass_changed_only(snap_compare, snapshot_trace: Trace) -> None:
    assert snap_compare(
        PassvizApp([snapshot_trace]), run_before=pressing("t", "t", "c", "e"), terminal_size=SIZE
    )


def test_snapshot_help_screen(snap_compare, snapshot_trace: Trace) -> None:
    assert snap_compare(
        PassvizApp([snapshot_trace]), run_before=pressing("question_mark"), terminal_size=SIZE
    )


def test_snapshot_run_pane_of_the_failed_ascend_run(snap_compare, snapshot_trace: Trace) -> None:
    assert snap_compare(PassvizApp([snapshot_trace]), run_before=pressing("t", "t", "r"), terminal_size=SIZE)


def test_snapshot_kernel_target_picker(snap_compare, snapshot_trace: Trace) -> None:
    assert snap_compare(PassvizApp([snapshot_trace]), run_before=pressing("k"), terminal_size=SIZE)


def test_snapshot_full_width_unified_diff_with_reindented_lines(snap_compare, snapshot_trace: Trace) -> None:
    app = PassvizApp([snapshot_trace])
    assert snap_compare(app, run_before=pressing("f", "d", select="tl.LayoutInference"), terminal_size=SIZE)


NARROW = (80, 24)


def test_snapshot_first_screen_at_80x24(snap_compare, snapshot_trace: Trace) -> None:
    """The lists keep 36 columns and the pass table keeps +/- and time in view; the IR the rest."""
    assert snap_compare(PassvizApp([snapshot_trace]), run_before=pressing(), terminal_size=NARROW)


def test_snapshot_side_by_side_at_80x24(snap_compare, snapshot_trace: Trace) -> None:
    app = PassvizApp([snapshot_trace])
    assert snap_compare(app, run_before=pressing("s", select="tl.LayoutInference"), terminal_size=NARROW)


def test_snapshot_run_pane_at_80x24(snap_compare, snapshot_trace: Trace) -> None:
    assert snap_compare(
        PassvizApp([snapshot_trace]), run_before=pressing("t", "t", "r"), terminal_size=NARROW
    )


def test_snapshot_help_screen_at_80x24(snap_compare, snapshot_trace: Trace) -> None:
    assert snap_compare(
        PassvizApp([snapshot_trace]), run_before=pressing("question_mark"), terminal_size=NARROW
    )
