"""The pass browser treats PTX and SASS as stages: the phase filter reaches them, the code pane
shows their text as assembly, and the run pane has the resources ptxas reported."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from passviz.app import PassvizApp
from passviz.widgets.code_view import CodeView
from passviz.widgets.run_info import run_facts

from .conftest import CASES, Recorded

pytestmark = pytest.mark.slow
SIZE = (160, 45)


async def test_phase_filter_reaches_the_machine_stages(recorded: Recorded) -> None:
    trace = recorded.trace
    run = trace.runs[0]
    assert (run.kernel, run.target) == ("matmul", CASES[0][1])
    app = PassvizApp([trace])
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert app.current_run == run
        for _ in range(5):  # all -> check -> lower -> finalize -> codegen -> machine
            await pilot.press("p")
        await pilot.pause()
        assert [e.record.name for e in app.visible_entries] == ["ptx", "sass"]
        await pilot.press("end")
        await pilot.pause()
        sass = run.passes[-1]
        assert app.selected_record == sass
        code = app.query_one("#code", CodeView)
        assert code.document_text.splitlines() == trace.ir_after(sass).splitlines()
        assert code.language == "gas"


def test_run_pane_shows_the_resources(recorded: Recorded) -> None:
    run = recorded.trace.runs[0]
    (item,) = run.resources
    console = Console(file=io.StringIO(), width=400, color_system=None)
    console.print(run_facts(recorded.trace, run))
    lines = console.file.getvalue().splitlines()  # type: ignore[attr-defined]
    (row,) = [line for line in lines if line.lstrip().startswith("resources")]
    assert f"{item.function} ({item.arch}): {item.registers} registers" in row
    assert f"spills {item.spill_stores} B stored / {item.spill_loads} B loaded" in row
