"""The report's Python-lines panel on a trace that ``irtrace run`` captured (maps on by default):
the captured run holds its kernel's file, the panel makes the author's lines clickable, and in the
browser a click on a ``T.reduce_sum`` line (found with ``ast``) lists, after every pass, the IR
lines the trace's ``srcmap`` records name (read here from the file's JSON lines)."""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from irtrace.trace.model import Trace
from irtrace.trace.reader import load_trace
from passviz.report import write_report
from tests.conftest import DATA

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = """\
import tilelang
from row_reduce import row_reduce

tilelang.compile(row_reduce(), target="auto")
"""


def reduce_sum_line(path: Path) -> int:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    (line,) = [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "reduce_sum"
    ]
    return line


@pytest.fixture(scope="module")
def captured(tmp_path_factory: pytest.TempPathFactory) -> tuple[Trace, Path]:
    folder = tmp_path_factory.mktemp("run-lines")
    shutil.copy(DATA / "row_reduce.py", folder / "row_reduce.py")
    (folder / "script.py").write_text(SCRIPT)
    out = folder / "t.jsonl"
    done = subprocess.run(
        [sys.executable, "-m", "irtrace.cli", "run", "-o", str(out), "--", "script.py"],
        capture_output=True,
        text=True,
        cwd=folder,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    return load_trace(out), folder


def raw_records(path: Path, file: Path, line: int) -> dict[int, list[int]]:
    """Pass index -> the IR lines (spanned or carried) its own srcmap record names for ``line``."""
    found = {}
    for text in path.read_text(encoding="utf-8").splitlines():
        if '"record":"srcmap"' not in text:
            continue
        record = json.loads(text)
        if record.get("after") is None or record.get("by") != "printer":
            continue
        files = {k for k, name in enumerate(record["files"]) if Path(name).resolve() == file.resolve()}
        entries = record["lines"] + record.get("carried", [])
        found[record["after"]] = sorted({ir for ir, f, py in entries if f in files and py == line})
    return found


def test_a_captured_run_keeps_its_kernel_file_and_the_panel(captured: tuple[Trace, Path]) -> None:
    trace, folder = captured
    (run,) = trace.runs
    assert run.source_maps, "irtrace run stores maps by default"
    assert trace.kernel_file(run) == (folder / "row_reduce.py").read_text(encoding="utf-8")
    page = write_report(trace, folder / "report.html", [run]).read_text(encoding="utf-8")
    line = reduce_sum_line(folder / "row_reduce.py")
    assert f"data-py='{line}'" in page


def test_clicking_a_reduction_line_of_a_captured_run_in_the_browser(captured: tuple[Trace, Path]) -> None:
    from .test_report_browser import choose_python_line, chromium_path, playwright_api

    path = chromium_path()
    if path is None:
        pytest.skip("no Chromium found (install one or set PASSVIZ_CHROMIUM)")
    trace, folder = captured
    (run,) = trace.runs
    kernel = folder / "row_reduce.py"
    line = reduce_sum_line(kernel)
    report = write_report(trace, folder / "browser.html", [run])
    records = raw_records(folder / "t.jsonl", kernel, line)
    with playwright_api.sync_playwright() as driver:
        browser = driver.chromium.launch(executable_path=path, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        errors: list[str] = []
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.goto(report.as_uri())
        page.wait_for_selector("body[data-ready='1']")
        choose_python_line(page, line)
        shown: list[Any] = page.evaluate(
            """() => [...document.querySelectorAll('.pythrough .pyentry')].map(e => [+e.dataset.first,
                 +e.dataset.last, [...e.querySelectorAll('.pyhit')].map(s => +s.dataset.ir)])"""
        )
        browser.close()
    assert not errors
    by_pass = {index: lines for first, last, lines in shown for index in range(first, last + 1)}
    named = {index: lines for index, lines in records.items() if lines}
    assert named, "the records name no IR line for the reduction"
    for index, lines in named.items():
        assert by_pass.get(index) == lines, index
