"""The HTML report in a real browser (Chromium through Playwright): nothing runs off the page at
1280 or 800 pixels, every section shows, and a diff opens with its changed words highlighted.

Skipped where Playwright or a Chromium is missing (set ``PASSVIZ_CHROMIUM`` to a browser to use).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from irtrace.core.trace import Trace
from passdiff import NormalizeRules, diff_texts
from passviz.report import pass_anchor, write_report

playwright_api = pytest.importorskip("playwright.sync_api", reason="Playwright is not installed")


def chromium_path() -> str | None:
    """A Chromium already on the machine (no browser is downloaded for the tests)."""
    named = os.environ.get("PASSVIZ_CHROMIUM")
    if named:
        return named
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        found = shutil.which(name)
        if found:
            return found
    return None


needs_chromium = pytest.mark.skipif(
    chromium_path() is None, reason="no Chromium found (install one or set PASSVIZ_CHROMIUM)"
)
needs_dot = pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's dot is not installed")

# Elements wider than the window, outside any box that scrolls or clips them: what runs off the page.
OVERFLOWING = """() => {
  const out = [];
  for (const e of document.querySelectorAll('body *')) {
    const r = e.getBoundingClientRect();
    if (r.width === 0 || r.right <= innerWidth + 1) continue;
    let p = e.parentElement, held = false;
    for (; p && p !== document.body; p = p.parentElement)
      if (getComputedStyle(p).overflowX !== 'visible') { held = true; break; }
    if (!held) out.push(`${e.tagName}.${e.className} right=${Math.round(r.right)}`);
  }
  return {page: document.documentElement.scrollWidth, window: innerWidth, elements: out.slice(0, 10)};
}"""


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    path = chromium_path()
    if path is None:
        pytest.skip("no Chromium found (install one or set PASSVIZ_CHROMIUM)")
    with playwright_api.sync_playwright() as driver:
        browser = driver.chromium.launch(executable_path=path, args=["--no-sandbox"])
        yield browser
        browser.close()


@pytest.fixture(scope="module")
def report(three_target_trace: Trace, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_report(three_target_trace, tmp_path_factory.mktemp("report") / "report.html")


def open_page(browser: Any, report: Path, width: int) -> Any:
    page = browser.new_page(viewport={"width": width, "height": 900})
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(report.as_uri())
    page.wait_for_selector("body[data-ready='1']", timeout=15_000)
    page.errors = errors
    return page


@needs_chromium
@needs_dot
@pytest.mark.parametrize("width", [1280, 800])
def test_nothing_runs_off_the_page_and_every_section_shows(
    browser: Any, report: Path, three_target_trace: Trace, width: int
) -> None:
    runs = three_target_trace.runs
    page = open_page(browser, report, width)
    for section in ("runs", "time", "drawings", "passes"):
        assert page.locator(f"#{section}").is_visible(), section
    # Every lane (run) has its column in its kernel's pipeline table, shown (in its own box, which
    # scrolls when the targets are many).
    heads = page.locator(".grid thead th:not(.p)")
    assert heads.count() == len(runs)
    for head in heads.all():
        head.scroll_into_view_if_needed()
        assert head.is_visible()
    # Open every diff that is open by default, drawn, then measure.
    for details in page.locator("details.diff[open]").all():
        details.scroll_into_view_if_needed()
    page.wait_for_function("[...document.querySelectorAll('details.diff[open]')].every(d => d.dataset.drawn)")
    found = page.evaluate(OVERFLOWING)
    assert found["page"] <= found["window"] and not found["elements"], found
    assert not page.errors


@needs_chromium
@needs_dot
def test_a_diff_shows_the_words_that_changed(browser: Any, report: Path, three_target_trace: Trace) -> None:
    """The oracle: passdiff's diff of the same two texts; the words the page marks are in lines
    it lists as removed or added."""
    run = three_target_trace.runs[0]
    record = next(
        p
        for p in run.passes
        if p.changed and p.phase != "machine" and not p.failed and 0 < _changed(three_target_trace, p) < 50
    )
    diff = diff_texts(
        three_target_trace.ir_before(record), three_target_trace.ir_after(record), NormalizeRules()
    )
    removed = {line.text for line in diff.lines if line.kind == "delete"}
    added = {line.text for line in diff.lines if line.kind == "insert"}
    for width, mode in ((1280, "side"), (800, "unified")):
        page = open_page(browser, report, width)
        anchor = pass_anchor(run, record)
        page.goto(report.as_uri() + "#" + anchor)
        details = page.locator(f"[id='{anchor}']")
        page.wait_for_function(f"document.getElementById('{anchor}').dataset.drawn === '{mode}'")
        marked = details.locator(".w").all_text_contents()
        cells = details.locator("td.del, tr.del td.t").all_text_contents()
        news = details.locator("td.ins, tr.ins td.t").all_text_contents()
        assert set(cells) <= removed and set(news) <= added, (cells, news)
        assert removed <= set(cells) and added <= set(news)
        if any(r.strip() != a.strip() for r in removed for a in added):
            assert marked and all(word.strip() for word in marked)


def _changed(trace: Trace, record: Any) -> int:
    diff = diff_texts(trace.ir_before(record), trace.ir_after(record), NormalizeRules())
    return diff.added + diff.removed
