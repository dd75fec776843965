"""``passviz html`` writes the page part by part from a trace read run by run: the file must hold
exactly the page built in memory from the trace loaded whole, and be a well-formed page with one
section per run (read back with Python's HTML parser, not with our code)."""

from __future__ import annotations

from html.parser import HTMLParser
from pathlib import Path

from irtrace.trace.model import Trace
from irtrace.trace.reader import load_trace
from irtrace.trace.stream import RunFile, open_trace
from passviz.report import report_html, write_report


class _Sections(HTMLParser):
    """Ids of the run headings, and the tags left open at the end."""

    def __init__(self) -> None:
        super().__init__()
        self.run_ids: list[str] = []
        self.open: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs).get("id") or ""
        if tag == "h3" and found.startswith("run") and "-" not in found:
            self.run_ids.append(found)
        if tag in ("html", "body", "details", "table", "script"):
            self.open.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if tag in ("html", "body", "details", "table", "script"):
            assert self.open and self.open[-1] == tag, (tag, self.open[-3:])
            self.open.pop()


def test_the_page_written_run_by_run_is_the_page_built_whole(gemm_trace: Trace, tmp_path: Path) -> None:
    assert gemm_trace.path is not None
    streamed = open_trace(gemm_trace.path)
    assert isinstance(streamed.runs, RunFile)  # runs read from the file one at a time
    written = write_report(streamed, tmp_path / "report.html").read_bytes()
    whole = load_trace(gemm_trace.path)
    assert written == report_html(whole).encode("utf-8")
    sections = _Sections()
    sections.feed(written.decode("utf-8"))
    sections.close()
    assert sections.run_ids == [f"run{run.run_id}" for run in whole.runs]
    assert sections.open == []
