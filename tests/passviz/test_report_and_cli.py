"""The HTML report and the ``passviz`` command line."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from irtrace.base.errors import ExitCode
from irtrace.trace.model import Trace
from passviz.cli import main
from tests.passviz.report_page import stored_html, stored_texts

needs_dot = pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's dot is not installed")


@needs_dot
def test_html_report_is_one_file_with_no_outside_references(
    three_target_trace: Trace, tmp_path: Path
) -> None:
    assert three_target_trace.path
    out = tmp_path / "report.html"
    assert main(["html", three_target_trace.path, "-o", str(out)]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.html"]
    page = out.read_text()
    assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")
    assert not re.search(r"<link|<img|<iframe|@import|src=|url\(", page, re.I)
    # Its scripts are its own two, inline: the stored texts (base64) and the code drawing diffs.
    assert re.findall(r"<script[^>]*>", page) == [
        "<script type='application/octet-stream' id='passviz-texts'>",
        "<script>",
    ]
    assert all(href.startswith("#") for href in re.findall(r"href=['\"]([^'\"]*)", page))
    assert "http://" not in page and "https://" not in page
    for anchor in re.findall(r"href=['\"]#([^'\"]*)", page):
        assert f"id='{anchor}'" in page or f'id="{anchor}"' in page, anchor
    assert "class='grid'" in page  # the pipelines, one table per kernel
    for run in three_target_trace.runs:
        assert f"{run.kernel} @ {run.target}" in page
        for record in run.passes:
            if record.changed or record.failed:
                assert f"id='run{run.run_id}-p{record.index}'" in page
    failed = next(p for r in three_target_trace.runs for p in r.passes if p.failed)
    assert failed.error and failed.error.split("'")[0] in page


def test_dot_command_writes_each_format(three_target_trace: Trace, tmp_path: Path, capsys) -> None:
    assert three_target_trace.path
    out = tmp_path / "cuda.dot"
    code = main(
        ["dot", three_target_trace.path, "-o", str(out), "-t", "cuda:sm_90", "-t", "ascend", "--fold"]
    )
    assert code == 0
    source = out.read_text()
    assert "cluster_lane0" in source and "cluster_lane1" in source and "cluster_lane2" not in source
    assert "hip:gfx942" not in source


def test_target_aliases_select_like_record(three_target_trace: Trace, tmp_path: Path, capsys) -> None:
    assert three_target_trace.path
    out = tmp_path / "alias.dot"
    assert main(["dot", three_target_trace.path, "-o", str(out), "-t", "sm_90"]) == 0  # "cuda" is sm_90a
    source = out.read_text()
    assert "cuda:sm_90" in source and "cluster_lane1" not in source


def test_missing_dot_program_says_to_install_graphviz(
    three_target_trace: Trace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    assert three_target_trace.path
    monkeypatch.setenv("PATH", str(tmp_path))
    code = main(["dot", three_target_trace.path, "-o", str(tmp_path / "p.svg")])
    err = capsys.readouterr().err.strip()
    assert code == ExitCode.ENVIRONMENT  # a program missing from the machine, not a bad input
    assert len(err.splitlines()) == 1 and "install Graphviz" in err
    assert not (tmp_path / "p.svg").exists()


def test_errors_are_one_line_with_documented_exit_codes(
    three_target_trace: Trace, tmp_path: Path, capsys
) -> None:
    assert three_target_trace.path
    assert main(["dot", str(tmp_path / "missing.jsonl"), "-o", str(tmp_path / "x.svg")]) == ExitCode.INPUT
    assert (
        main(["dot", three_target_trace.path, "-o", str(tmp_path / "x.svg"), "-t", "metal"])
        == ExitCode.NOT_FOUND
    )
    assert main(["dot", three_target_trace.path, "-o", str(tmp_path / "x.pdf")]) == ExitCode.USAGE
    not_trace = tmp_path / "not.jsonl"
    not_trace.write_text("hello\n")
    assert main([str(not_trace)]) == ExitCode.TRACE_FORMAT
    errors = capsys.readouterr().err.strip().splitlines()
    assert len(errors) == 4 and all(line.startswith("passviz: error: ") for line in errors)
    assert main(["--help"]) == 0
    help_text = capsys.readouterr().out
    assert "exit codes:" in help_text and "passviz dot TRACE" in help_text and "Graphviz" in help_text


@needs_dot
def test_report_shows_a_failed_pass_s_input_and_links_drawings_to_diffs(
    three_target_trace: Trace, tmp_path: Path
) -> None:
    from passviz.report import report_html

    page = report_html(three_target_trace)
    ascend = next(r for r in three_target_trace.runs if r.status == "failed")
    failed = next(p for p in ascend.passes if p.failed)
    received = three_target_trace.ir_before(failed)
    start = page.index(f"id='run{ascend.run_id}-p{failed.index}'")
    section = page[start : page.index("</details></details>", start)]
    assert "the IR it received" in section
    # The IR itself is one of the texts stored once in the page, drawn when shown.
    number = int(re.findall(r"data-t='(\d+)'", section)[0])
    assert stored_texts(page)[number] == received.rstrip("\n")
    # The pipelines' cells link to the diffs (or errors): one per changed or failed pass.
    links = re.findall(r"<td class='[cf]'><a href='#(run\d+-p\d+)'>", page)
    wanted = {
        f"run{r.run_id}-p{p.index}"
        for r in three_target_trace.runs
        for p in r.passes
        if p.changed or p.failed
    }
    assert set(links) == wanted and all(f"id='{anchor}'" in page for anchor in links)
    # recorded without source maps: no line is mapped, and the page says how to get them
    assert "irtrace record --source-map" in page and "data-py=" not in page and "class='op-tile'" in page
    # Pass lists are kept compressed until seen: every pass of every run is in one of them.
    lists = [f for f in stored_html(page) if "<summary>pass list</summary>" in f]
    assert len(lists) == len(three_target_trace.runs)
    for run, listed in zip(three_target_trace.runs, lists, strict=True):
        assert all(p.name in listed for p in run.passes) and f"{run.kernel} @ {run.target}" not in listed


def test_browse_is_accepted_as_the_browsers_name(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    from irtrace.base.errors import ExitCode
    from passviz.cli import main as passviz_main

    missing = tmp_path / "missing.jsonl"
    assert passviz_main(["browse", str(missing)]) == ExitCode.INPUT
    assert "does not exist" in capsys.readouterr().err
