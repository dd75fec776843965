"""A Python line's IR across passes, in the report and the browser, against the trace's own
``srcmap`` records read here from the file's JSON lines (docs/source-maps.md; the records
themselves are checked against TVM's spans in tests/irtrace/test_source_map.py and
tests/passdiff/test_origins.py). A trace without maps shows no mapping; hostile maps add nothing.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from irtrace.trace.model import KernelRun, PassRecord, Trace
from irtrace.trace.reader import load_trace
from passviz.app import PassvizApp
from passviz.report import pass_anchor, report_html, write_report
from passviz.widgets.code_view import CodeView, IrRows, UnifiedRows
from passviz.widgets.pass_table import PassTable
from tests.conftest import EXAMPLES

from .report_page import stored_texts

GEMM = EXAMPLES / "gemm.py"
GEMM_LINE = next(n for n, text in enumerate(GEMM.read_text().splitlines(), start=1) if "T.gemm(" in text)
SIZE = (160, 50)


def raw_maps(path: str) -> dict[tuple[int, int], dict[str, Any]]:
    """The trace's srcmap records by (run, pass index), read as JSON (not through irtrace)."""
    found = {}
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        if '"record":"srcmap"' in line:
            record = json.loads(line)
            if record.get("after") is not None:
                found[(record["run"], record["after"])] = record
    return found


def named(record: dict[str, Any], line: int) -> list[int]:
    """The IR lines a srcmap record says print a statement of ``line`` of the kernel's file, spanned
    or carried (the report lists both, the carried ones marked)."""
    files = {k for k, name in enumerate(record["files"]) if name == str(GEMM)}
    entries = [*record["lines"], *record.get("carried", [])]
    return sorted({ir for ir, file, py in entries if file in files and py == line})


def pymap(page: str, run: KernelRun) -> dict[str, Any]:
    found = re.search(
        rf"<script type='application/json' class='pymap' data-run='run{run.run_id}'>([^<]*)</script>", page
    )
    assert found, "no source map data for the run"
    return json.loads(found.group(1))


def own_records(trace: Trace, run: KernelRun) -> list[tuple[PassRecord, dict[str, Any]]]:
    """The passes that wrote a map of their own, with it (the kernel source's map, after codegen,
    is not a pass's IR: the report's IR panel leaves it out)."""
    assert trace.path is not None
    records = {key: raw for key, raw in raw_maps(trace.path).items() if raw.get("by") != "line_directives"}
    return [(p, records[(run.run_id, p.index)]) for p in run.passes if (run.run_id, p.index) in records]


@pytest.mark.parametrize("target", ["cuda:sm_90", "hip:gfx942"])
def test_the_report_lists_the_ir_lines_the_records_name_after_every_pass(
    gemm_trace: Trace, target: str
) -> None:
    run = gemm_trace.find_run("matmul", target)
    page = report_html(gemm_trace, [run])
    data = pymap(page, run)
    texts = stored_texts(page)
    entries = data["through"][str(GEMM_LINE)]
    covering = {p: entry for entry in entries for p in range(entry[0], entry[1] + 1)}
    checked = 0
    for record, raw in own_records(gemm_trace, run):
        lines = named(raw, GEMM_LINE)
        if not lines:
            assert record.index not in covering, record.name
            continue
        entry = covering[record.index]
        assert data["maps"][entry[6]][str(GEMM_LINE)] == lines, record.name
        assert texts[entry[5]] == gemm_trace.ir_after(record).rstrip("\n"), record.name
        checked += 1
    assert checked >= 10
    # the line is clickable in the source shown; a line no statement carries is not
    assert f"data-py='{GEMM_LINE}'" in page and "data-py='1'" not in page
    # each diff names the maps of the module its pass received and produced
    for record, raw in own_records(gemm_trace, run):
        if not record.changed or record.failed:
            continue
        found = re.search(
            rf"id='{pass_anchor(run, record)}' data-a='\d+' data-b='\d+'[^>]*data-pyb='(\d+)'", page
        )
        if found is not None:
            assert data["maps"][int(found.group(1))].get(str(GEMM_LINE), []) == named(raw, GEMM_LINE)


def test_a_report_without_maps_highlights_nothing(three_target_trace: Trace) -> None:
    page = report_html(three_target_trace)
    assert "data-py=" not in page and "class='pymap'" not in page and "data-pya" not in page
    assert page.count("--source-map") == len([r for r in three_target_trace.runs if r.kernel_file_sha256])


def _rewrite_maps(source: Trace, path: Path, change: Any) -> Trace:
    """``source`` with ``change`` applied to each srcmap record that names a file (with ``None``,
    the three attacks in turn)."""
    assert source.path is not None
    lines = Path(source.path).read_text(encoding="utf-8").splitlines()
    attacked = 0
    for number, line in enumerate(lines):
        if '"record":"srcmap"' in line:
            record = json.loads(line)
            if record["files"]:
                (change or ATTACKS[attacked % len(ATTACKS)])(record)
                attacked += 1
            lines[number] = json.dumps(record)
    path.write_text("\n".join(lines) + "\n")
    return load_trace(path)


ATTACKS = [
    lambda r: r.update(
        lines=[[10**6, 0, GEMM_LINE]], carried=[[10**6, 0, GEMM_LINE]]
    ),  # an IR line past the text
    lambda r: r.update(
        lines=[[1, 0, 10**6]], carried=[[1, 0, 10**6]]
    ),  # a Python line past the kernel's file
    lambda r: r.update(files=["/etc/passwd" for _ in r["files"]]),  # another file
]
HOSTILE = [
    pytest.param(ATTACKS[0], id="ir-line-past-the-text"),
    pytest.param(ATTACKS[1], id="python-line-past-the-file"),
    pytest.param(ATTACKS[2], id="another-file"),
]


@pytest.mark.parametrize("change", HOSTILE)
def test_hostile_maps_add_nothing_to_the_report(gemm_trace: Trace, tmp_path: Path, change: Any) -> None:
    trace = _rewrite_maps(gemm_trace, tmp_path / "bad.jsonl", change)
    page = report_html(trace)
    assert "passwd" not in page and "1000000" not in page
    for run in trace.runs:
        if "class='pymap'" in page:
            data = pymap(page, run)
            assert all(not m for m in data["maps"]) and not data["through"]
    assert "data-py=" not in page


# ----------------------------------------------------------------------------- in a real browser


@pytest.fixture(scope="module")
def gemm_report(gemm_trace: Trace, tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = gemm_trace.find_run("matmul", "cuda:sm_90")
    return write_report(gemm_trace, tmp_path_factory.mktemp("srclines") / "gemm.html", [run])


def test_clicking_a_line_highlights_its_ir_lines_in_the_browser(gemm_trace: Trace, gemm_report: Path) -> None:
    """Chromium runs the page's script: the lines it marks after a click are the records' lines,
    in the list of passes and in a drawn diff (both sides)."""
    from .test_report_browser import OVERFLOWING, choose_python_line, chromium_path, playwright_api

    path = chromium_path()
    if path is None:
        pytest.skip("no Chromium found (install one or set PASSVIZ_CHROMIUM)")
    run = gemm_trace.find_run("matmul", "cuda:sm_90")
    lower = run.find_pass("tl.LowerTileOp")
    records = dict(own_records(gemm_trace, run))
    before = next(r for p, r in reversed(own_records(gemm_trace, run)) if p.index < lower.index)
    with playwright_api.sync_playwright() as driver:
        browser = driver.chromium.launch(executable_path=path, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        errors: list[str] = []
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.goto(gemm_report.as_uri())
        page.wait_for_selector("body[data-ready='1']")
        choose_python_line(page, GEMM_LINE)
        shown = page.evaluate(
            """() => [...document.querySelectorAll('.pythrough .pyentry')].map(e => [+e.dataset.first,
                 +e.dataset.last, [...e.querySelectorAll('.pyhit')].map(s => +s.dataset.ir)])"""
        )
        overflow = page.evaluate(OVERFLOWING)  # the source and the filled panel stay in their boxes
        assert overflow["page"] <= overflow["window"] and not overflow["elements"], overflow
        anchor = pass_anchor(run, lower)
        page.locator(f"[id='{anchor}']").scroll_into_view_if_needed()
        page.wait_for_function(f"document.getElementById('{anchor}').dataset.drawn === 'side'")
        marked = page.evaluate(
            f"""() => [...document.getElementById('{anchor}').querySelectorAll('td.pyhit')].map(td =>
                 [td.dataset.o ? +td.dataset.o : null, td.dataset.n ? +td.dataset.n : null])"""
        )
        cells = page.evaluate(
            f"""() => [...document.getElementById('{anchor}').querySelectorAll('td[data-o], td[data-n]')]
                 .map(td => [td.dataset.o ? +td.dataset.o : null, td.dataset.n ? +td.dataset.n : null])"""
        )
        browser.close()
    assert not errors
    by_pass = {index: lines for first, last, lines in shown for index in range(first, last + 1)}
    for record, raw in records.items():
        assert by_pass.get(record.index, []) == named(raw, GEMM_LINE), record.name
    old, new = set(named(before, GEMM_LINE)), set(named(records[lower], GEMM_LINE))
    assert old and new
    expected = [cell for cell in cells if (cell[0] in old) or (cell[1] in new)]
    assert marked == expected and marked


# ----------------------------------------------------------------------------- the Textual browser


def code(app: PassvizApp) -> CodeView:
    return app.query_one("#code", CodeView)


async def test_g_picks_a_line_and_its_rows_follow_the_pass(gemm_trace: Trace) -> None:
    run = gemm_trace.find_run("matmul", "cuda:sm_90")
    records = dict(own_records(gemm_trace, run))
    app = PassvizApp([gemm_trace])
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        layout = run.find_pass("tl.LayoutInference")
        app.query_one(PassTable).move_to(layout.index)
        await pilot.pause()
        await pilot.press("g", *str(GEMM_LINE), "enter")
        await pilot.pause()
        assert app.picked_line == GEMM_LINE
        wanted = named(records[layout], GEMM_LINE)
        assert wanted and isinstance(code(app).rows, IrRows)
        assert sorted(code(app).marked) == [n - 1 for n in wanted]
        # the marks move with the pass: next changed passes, each against its own record
        moved = 0
        for _ in range(3):
            await pilot.press("n")
            await pilot.pause()
            record = app.selected_record
            assert record is not None
            if record in records:
                assert sorted(code(app).marked) == [n - 1 for n in named(records[record], GEMM_LINE)]
                moved += 1
        assert moved
        # the unified diff marks the added rows of the line after the pass
        await pilot.press("d")
        await pilot.pause()
        rows = code(app).rows
        record = app.selected_record
        assert isinstance(rows, UnifiedRows) and record is not None
        if record in records:
            new = set(named(records[record], GEMM_LINE))
            marked_new = {rows.items[k].new_no for k in code(app).marked if rows.items[k].kind != "delete"}
            assert marked_new == {
                line.new_no for line in rows.items if line.new_no in new and line.kind != "delete"
            }
        # m: each IR line names its source line from the map; enter with nothing stops the marks
        await pilot.press("i", "m")
        await pilot.pause()
        ir = code(app).rows
        assert isinstance(ir, IrRows) and ir.source_lines is not None
        record = app.selected_record
        if record in records:
            mapped = {n + 1 for n, line in enumerate(ir.source_lines) if line == GEMM_LINE}
            assert mapped <= set(named(records[record], GEMM_LINE))
        await pilot.press("g", "ctrl+u", "enter")
        await pilot.pause()
        assert app.picked_line is None and not code(app).marked


@pytest.mark.sweep  # a Pilot session of its own (~3 s of CPU); the report and passdiff attacks run always
async def test_hostile_maps_mark_nothing_in_the_browser(gemm_trace: Trace, tmp_path: Path) -> None:
    """The three attacks, each on a third of the records."""
    trace = _rewrite_maps(gemm_trace, tmp_path / "bad.jsonl", None)
    app = PassvizApp([trace])
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press("g", *str(GEMM_LINE), "enter", "m", "n", "n", "d")
        await pilot.pause()
        assert not code(app).marked
