"""Diffs stay bounded on hostile texts: very long changed lines and tens of thousands of re-indented
lines (issue 19), built from real IR of the recorded GEMM.

Each test is the attack: before the guard, the 88 KB line took 79 s in the word diff and the
20,000 re-indented lines 27 s in the re-indent pairing. No test times anything (bench/diff_speed.py
does); each checks the output against an oracle computed another way (difflib's line diff, GNU
``diff -w``) and that a skipped word diff says so in the terminal, the HTML page and the browser.
"""

from __future__ import annotations

import difflib
import html
import re
import subprocess
from pathlib import Path

import pytest
from rich.text import Text
from textual.app import App, ComposeResult

from irtrace.diff import NormalizeRules, diff_texts
from irtrace.diff.textdiff import WORD_PAIR_BUDGET, WORD_PAIR_LIMIT, diff_words, split_lines, word_diff
from irtrace.trace.model import Trace
from passdiff.render import html_table, terminal_lines
from passviz.widgets.code_view import CodeView, SideBySideRows

RAW = NormalizeRules.none()
SKIPPED = "word-level diff skipped: line of "


@pytest.fixture(scope="module")
def ir_lines(gemm_trace: Trace) -> list[str]:
    """Lines of real IR: the GEMM after layout inference on cuda:sm_90."""
    run = gemm_trace.find_run("matmul", "cuda:sm_90")
    return split_lines(gemm_trace.ir_after(run.find_pass("tl.LayoutInference")))


def _long_line(ir_lines: list[str], size: int) -> str:
    """One line of ``size`` characters made of real IR statements (a generated call with huge
    argument lists reads like this)."""
    statements = " ".join(line.strip() for line in ir_lines)
    return (statements * (size // len(statements) + 1))[:size]


def _bump_numbers(line: str) -> str:
    """Every integer in ``line`` plus one: changes spread over the whole line."""
    return re.sub(r"\b\d+\b", lambda m: str(int(m[0]) + 1), line)


def _with_line(ir_lines: list[str], line: str) -> str:
    """The real IR with ``line`` in the middle."""
    half = len(ir_lines) // 2
    return "\n".join([*ir_lines[:half], line, *ir_lines[half:]]) + "\n"


def _size_kb(*lines: str) -> str:
    return f"{max(len(line.encode()) for line in lines) / 1000:.0f} KB"


def _plain(texts: list[Text]) -> list[str]:
    return [text.plain for text in texts]


def _highlighted(texts: list[Text]) -> list[str]:
    return [
        text.plain[span.start : span.end]
        for text in texts
        for span in text.spans
        if "bold" in str(span.style)
    ]


def _line_oracle(before: str, after: str) -> list[tuple[str, int, int, int, int]]:
    """difflib's own line diff of the two texts (small: the long line is one element)."""
    matcher = difflib.SequenceMatcher(None, split_lines(before), split_lines(after), autojunk=False)
    return matcher.get_opcodes()


def test_an_88_kb_line_changed_throughout_is_shown_whole_with_a_note(ir_lines: list[str]) -> None:
    old_line = _long_line(ir_lines, 88_000)
    new_line = _bump_numbers(old_line)
    before, after = _with_line(ir_lines, old_line), _with_line(ir_lines, new_line)
    diff = diff_texts(before, after, RAW)
    assert diff.opcodes() == _line_oracle(before, after)
    assert (diff.added, diff.removed) == (1, 1)

    note = f"{SKIPPED}{_size_kb(old_line, new_line)}"
    words = diff_words(old_line, new_line)
    assert words.skipped is not None and words.skipped.startswith(note)
    assert word_diff(old_line, new_line) == [("delete", old_line), ("insert", new_line)]

    # Terminal: the note right above the pair, both lines whole and without word highlights.
    shown = list(terminal_lines(diff))
    plain = _plain(shown)
    at = next(k for k, text in enumerate(plain) if note in text)
    assert plain[at + 1].endswith("- " + old_line) and plain[at + 2].endswith("+ " + new_line)
    assert _highlighted(shown) == []

    # HTML: a note row, then the lines as they are (escaped) with no <del>/<ins> marks.
    page = html_table(diff)
    assert f'<tr class="note"><td colspan="4">{note}' in page
    assert "<del>" not in page and "<ins>" not in page
    assert html.escape(old_line) in page and html.escape(new_line) in page


def test_an_88_kb_line_with_one_change_keeps_its_word_diff(ir_lines: list[str]) -> None:
    old_line = _long_line(ir_lines, 88_000)
    middle = len(old_line) // 2
    start = old_line.index(" ", middle) + 1  # a token that starts after a space near the middle
    end = re.compile(r"\W").search(old_line, start)
    assert end is not None and end.start() > start
    token = old_line[start : end.start()]
    new_line = old_line[:start] + "edited_" + token + old_line[end.start() :]
    diff = diff_texts(_with_line(ir_lines, old_line), _with_line(ir_lines, new_line), RAW)

    pieces = word_diff(old_line, new_line)
    assert [p for p in pieces if p[0] != "equal"] == [("delete", token), ("insert", "edited_" + token)]
    assert "".join(f for k, f in pieces if k != "insert") == old_line
    assert "".join(f for k, f in pieces if k != "delete") == new_line
    shown = list(terminal_lines(diff))
    assert not any(SKIPPED in text for text in _plain(shown))
    assert sorted(_highlighted(shown)) == sorted([token, "edited_" + token])


def test_a_660_kb_line_is_bounded_too(ir_lines: list[str]) -> None:
    old_line = _long_line(ir_lines, 660_000)
    new_line = _bump_numbers(old_line)
    words = diff_words(old_line, new_line)
    assert words.skipped is not None and words.skipped.startswith(f"{SKIPPED}{_size_kb(old_line, new_line)}")
    assert words.pieces == (("delete", old_line), ("insert", new_line))


class Viewer(App[None]):
    """The browser's code view alone."""

    def compose(self) -> ComposeResult:
        yield CodeView(id="code")


async def test_the_browser_shows_the_note_above_a_skipped_pair(ir_lines: list[str]) -> None:
    old_line = _long_line(ir_lines, 88_000)
    new_line = _bump_numbers(old_line)
    diff = diff_texts(_with_line(ir_lines, old_line), _with_line(ir_lines, new_line), RAW)
    rows = SideBySideRows(diff.side_by_side())
    assert len(rows) == len(diff.side_by_side()) + 1
    at = next(k for k, item in enumerate(rows.items) if item.kind == "replace")
    (note,) = rows[at - 1]
    assert note.kind == "note" and note.text.startswith(f"{SKIPPED}{_size_kb(old_line, new_line)}")
    old_cell, new_cell = rows[at]
    assert (old_cell.text, new_cell.text) == (old_line, new_line)
    assert old_cell.changed_spans == new_cell.changed_spans == ()

    app = Viewer()
    async with app.run_test(size=(120, 40)) as pilot:
        view = app.query_one(CodeView)
        view.show(rows)
        await pilot.pause()
        view.scroll_to(y=at - 1, animate=False, immediate=True)
        await pilot.pause()
        assert note.text in view.document_text
        assert at - 1 in view.visible_rows
        top = at - 1 - view.visible_rows.start
        drawn = ["".join(segment.text for segment in view.render_line(y)) for y in (top, top + 1)]
        assert drawn[0].strip().startswith(SKIPPED)
        assert old_line[:40] in drawn[1] and new_line[:40] in drawn[1]


def test_many_long_changed_lines_share_one_budget(ir_lines: list[str]) -> None:
    # Each pair is under the per-line limit; together they are far over the per-diff budget.
    olds = [_long_line(ir_lines[k:] + ir_lines[:k], 800) for k in range(60)]
    news = [_bump_numbers(line) for line in olds]
    before, after = "\n".join(olds) + "\n", "\n".join(news) + "\n"
    diff = diff_texts(before, after, RAW)
    assert diff.opcodes() == _line_oracle(before, after) == [("replace", 0, 60, 0, 60)]
    shown = _plain(list(terminal_lines(diff)))
    notes = [text for text in shown if "word-level diff skipped" in text]
    tokens = max(len(re.findall(r"\s+|\w+|[^\w\s]", line)) for line in olds + news)
    assert tokens * tokens <= WORD_PAIR_LIMIT and 60 * tokens * tokens > WORD_PAIR_BUDGET
    assert notes and all("this diff compared" in text for text in notes)
    assert 0 < len(notes) < 60  # the first pairs were compared word by word, the rest are whole
    assert _highlighted(list(terminal_lines(diff)))
    page = html_table(diff)
    assert page.count('<tr class="note">') == len(notes) and "<del>" in page


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_20000_reindented_lines_pair_as_diff_w_pairs_them(ir_lines: list[str], tmp_path: Path) -> None:
    old = [ir_lines[k % len(ir_lines)] for k in range(20_000)]
    new = ["  " + line for line in old]  # IR indents by 4: no re-indented line equals an old one
    before, after = "\n".join(old) + "\n", "\n".join(new) + "\n"
    # GNU diff -w, the oracle: nothing but whitespace differs.
    assert (
        subprocess.run(
            ["diff", "-w", _write(tmp_path / "a", before), _write(tmp_path / "b", after)]
        ).returncode
        == 0
    )
    diff = diff_texts(before, after, RAW)
    assert diff.reindented == diff.added == diff.removed == 20_000
    assert all(
        line.kind == "reindent" and line.old_no == line.new_no == k + 1 for k, line in enumerate(diff.lines)
    )
    shown = _plain(list(terminal_lines(diff)))
    assert sum(text.split("│", 1)[1].startswith("~ ") for text in shown) == 20_000


def test_reindented_lines_with_new_ones_match_diff_w(ir_lines: list[str], tmp_path: Path) -> None:
    # A pass that wraps the whole body in new blocks: every line re-indented, a few lines added.
    old = [ir_lines[k % len(ir_lines)] for k in range(20_000)]
    new = ["  " + line for line in old]
    for at in (15_000, 10_000, 5_000, 3):  # from the end, so earlier places stay put
        new.insert(at, f"  if bx == {at}:")
    before, after = "\n".join(old) + "\n", "\n".join(new) + "\n"
    oracle = subprocess.run(
        ["diff", "-w", _write(tmp_path / "a", before), _write(tmp_path / "b", after)],
        capture_output=True,
        text=True,
    ).stdout
    # Normal diff output: "Na M" adds new line M after old line N (one line each here).
    added_by_diff_w = sorted(int(m[1]) for m in re.finditer(r"^\d+a(\d+)$", oracle, re.MULTILINE))
    assert len(added_by_diff_w) == 4 and "d" not in re.sub(r"[<>].*", "", oracle)
    diff = diff_texts(before, after, RAW)
    assert sorted(line.new_no for line in diff.lines if line.kind == "insert") == added_by_diff_w  # type: ignore[type-var]
    assert all(line.kind in ("reindent", "insert") for line in diff.lines)
    assert diff.reindented == 20_000 and (diff.added, diff.removed) == (20_004, 20_000)
    pairs = [(line.old_no, line.new_no) for line in diff.lines if line.kind == "reindent"]
    assert [old_no for old_no, _ in pairs] == list(range(1, 20_001))
    for old_no, new_no in pairs:
        assert old[old_no - 1].lstrip() == new[new_no - 1].lstrip()  # type: ignore[index, operator]


def _diff_counts(tmp_path: Path, before: str, after: str, *options: str) -> tuple[int, int]:
    """Lines GNU diff adds and removes (the ``>`` and ``<`` lines of its normal output)."""
    out = subprocess.run(
        ["diff", *options, _write(tmp_path / "a", before), _write(tmp_path / "b", after)],
        capture_output=True,
        text=True,
    ).stdout.splitlines()
    return sum(line.startswith(">") for line in out), sum(line.startswith("<") for line in out)


@pytest.mark.parametrize("copies", [1, 2])
def test_thousands_of_copies_of_a_line_diff_as_gnu_diff_does(
    ir_lines: list[str], tmp_path: Path, copies: int
) -> None:
    # One or two real IR lines repeated 5,000 times: difflib's longest-match search visits every
    # pair of equal lines (25 million), which took 14 s before the guard.
    repeated = [line for line in ir_lines if line.strip()][5 : 5 + copies]
    old = [repeated[k % copies] for k in range(5_000)]
    new = ["x = 1", *old[1:2500], "z = 3", *old[2500:-1], "y = 2"]
    before, after = "\n".join(old) + "\n", "\n".join(new) + "\n"
    diff = diff_texts(before, after, RAW)
    assert (diff.added, diff.removed) == _diff_counts(tmp_path, before, after) == (3, 2)
    # Re-indented, with the first and last lines changed: diff -w sees those two lines only.
    new = ["  x = 1", *("  " + line for line in old[1:-1]), "  y = 2"]
    after = "\n".join(new) + "\n"
    diff = diff_texts(before, after, RAW)
    assert _diff_counts(tmp_path, before, after, "-w") == (2, 2)
    assert diff.reindented == 4_998 and (diff.added, diff.removed) == (5_000, 5_000)
