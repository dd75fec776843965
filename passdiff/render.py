"""Renderings of a ``DiffReport``: the rich terminal view, the unified diff and the HTML page.

The only module of passdiff that imports rich (lazily, inside ``render_terminal``). The terminal
view highlights changed words inside changed lines; on a non-terminal or with ``NO_COLOR`` the
same layout comes out as plain text.
"""

from __future__ import annotations

import html
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from passdiff.compare import RunComparison
from passdiff.summary import DiffReport, PassDiff, diff_names
from passdiff.textdiff import DELETE, EQUAL, INSERT, REPLACE, DiffLine, TextDiff, grouped_opcodes, word_diff

if TYPE_CHECKING:
    from rich.console import Console
    from rich.text import Text

DEFAULT_CONTEXT = 3


# ----------------------------------------------------------------------------- shared wording


def rules_line(report: DiffReport) -> str:
    """Which normalization rules were on, as every format states it."""
    enabled = report.rules.enabled()
    return "normalization: " + (", ".join(enabled) if enabled else "off (raw texts)")


def comparison_facts(comparison: RunComparison) -> list[str]:
    """The plain-language findings of a comparison, one per line."""
    if comparison.presence == "only_a":
        return [f"only in the first trace: {comparison.kernel} on {comparison.target_a}"]
    if comparison.presence == "only_b":
        return [f"only in the second trace: {comparison.kernel} on {comparison.target_b}"]
    facts = []
    first = comparison.first_difference
    if first is None:
        facts.append("no pass present in both runs differs in its output")
    else:
        cause = (
            " (it already received different IR: the cause lies before it)"
            if comparison.input_differs
            else " (same input IR: this pass makes the difference)"
        )
        facts.append(f"first differing pass: {first.label}{cause}")
    if comparison.input_diff is not None and not comparison.input_diff.is_empty:
        facts.append(
            f"the input modules differ (+{comparison.input_diff.added} -{comparison.input_diff.removed})"
        )
    for title, names in (
        ("removed passes (only in a)", comparison.removed_passes),
        ("added passes (only in b)", comparison.added_passes),
        ("reordered passes", comparison.moved_passes),
    ):
        if names:
            facts.append(f"{title}: {', '.join(names)}")
    source = comparison.source_diff
    if source is not None:
        facts.append(
            "kernel sources: identical"
            if source.is_empty
            else f"kernel sources: +{source.added} -{source.removed}"
        )
    facts.extend(comparison.notes)
    return facts


# ----------------------------------------------------------------------------- unified


def render_unified(report: DiffReport, context: int = DEFAULT_CONTEXT) -> str:
    """All the report's diffs as one unified diff, with ``#`` comment lines patch skips over."""
    out: list[str] = []
    for item in report.pass_diffs:
        base = f"{item.kernel}/{item.target}"
        out.append(
            item.diff.unified(f"a/{base}/before-{item.from_pass}", f"b/{base}/after-{item.to_pass}", context)
        )
    for comparison in report.comparisons:
        if comparison.diff is not None and comparison.first_difference is not None:
            names = diff_names(comparison, comparison.first_difference.label)
            out.append(comparison.diff.unified(*names, context))
        if comparison.source_diff is not None:
            out.append(comparison.source_diff.unified(*diff_names(comparison, "source"), context))
    return "".join(out)


# ----------------------------------------------------------------------------- terminal


def render_terminal(report: DiffReport, console: Console, context: int = DEFAULT_CONTEXT) -> None:
    """Print the report: headers, findings, and each diff with word-level highlights."""
    from rich.text import Text

    console.print(Text(rules_line(report), style="dim"))
    for item in report.pass_diffs:
        span = item.from_pass if item.from_pass == item.to_pass else f"{item.from_pass} .. {item.to_pass}"
        header = Text.assemble(
            (f"{item.kernel} on {item.target}: ", "bold"), (span, "bold cyan"), "  ", *_counts(item.diff)
        )
        console.print(header)
        _print_diff(console, item.diff, context, "the pass did not change the IR")
    for comparison in report.comparisons:
        console.print(Text(comparison.title, style="bold"))
        for fact in comparison_facts(comparison):
            console.print(Text("  " + fact))
        if comparison.diff is not None and comparison.first_difference is not None:
            console.print(
                Text.assemble(("output of ", "bold"), (comparison.first_difference.label, "bold cyan"), "  ")
                + Text.assemble(*_counts(comparison.diff))
            )
            _print_diff(console, comparison.diff, context, "")
        if comparison.source_diff is not None and not comparison.source_diff.is_empty:
            console.print(Text.assemble(("kernel source", "bold"), "  ", *_counts(comparison.source_diff)))
            _print_diff(console, comparison.source_diff, context, "")
        console.print()


def _counts(diff: TextDiff) -> tuple[tuple[str, str], str, tuple[str, str]]:
    return ((f"+{diff.added}", "green"), " ", (f"-{diff.removed}", "red"))


def _print_diff(console: Console, diff: TextDiff, context: int, empty_message: str) -> None:
    if diff.is_empty:
        if empty_message:
            console.print(empty_message)
        return
    for text in terminal_lines(diff, context):
        console.print(text, crop=False, overflow="ignore", no_wrap=True, soft_wrap=True)


def terminal_lines(diff: TextDiff, context: int = DEFAULT_CONTEXT) -> Iterator[Text]:
    """The diff as rich ``Text`` lines: gutter with line numbers, sign, and highlighted words."""
    from rich.text import Text

    width = len(str(max(diff.before.count("\n"), diff.after.count("\n")) + 1))
    for number, hunk in enumerate(_hunks(diff, context)):
        if number:
            yield Text("⋯", style="dim")
        for kind, line, pieces in hunk:
            old = str(line.old_no) if line.old_no is not None else ""
            new = str(line.new_no) if line.new_no is not None else ""
            gutter = Text(f"{old:>{width}} {new:>{width}} │", style="dim")
            sign = {EQUAL: " ", DELETE: "-", INSERT: "+"}[kind]
            style = {EQUAL: "", DELETE: "red", INSERT: "green"}[kind]
            body = Text(f"{sign} ", style=style)
            if pieces is None:
                body.append(line.text, style=style)
            else:
                for piece_kind, fragment in pieces:
                    if piece_kind == EQUAL:
                        body.append(fragment, style=style)
                    else:
                        body.append(
                            fragment,
                            style="bold white on dark_red" if kind == DELETE else "bold black on green",
                        )
            yield gutter + body


HunkLine = tuple[str, DiffLine, list[tuple[str, str]] | None]


def _hunks(diff: TextDiff, context: int) -> Iterator[list[HunkLine]]:
    """Hunks of lines with word pieces for paired changed lines (deleted k-th faces inserted k-th)."""
    by_old = {line.old_no: line for line in diff.lines if line.kind != INSERT}
    by_new = {line.new_no: line for line in diff.lines if line.kind == INSERT}
    for group in grouped_opcodes(diff.opcodes(), context):
        hunk: list[HunkLine] = []
        for tag, i1, i2, j1, j2 in group:
            if tag == EQUAL:
                hunk.extend((EQUAL, by_old[i + 1], None) for i in range(i1, i2))
                continue
            olds = [by_old[i + 1] for i in range(i1, i2)]
            news = [by_new[j + 1] for j in range(j1, j2)]
            paired = min(len(olds), len(news)) if tag == REPLACE else 0
            pieces = [word_diff(olds[k].text, news[k].text) for k in range(paired)]
            for k, line in enumerate(olds):
                hunk.append((DELETE, line, [p for p in pieces[k] if p[0] != INSERT] if k < paired else None))
            for k, line in enumerate(news):
                hunk.append((INSERT, line, [p for p in pieces[k] if p[0] != DELETE] if k < paired else None))
        yield hunk


# ----------------------------------------------------------------------------- HTML

_CSS = """
body { font-family: system-ui, sans-serif; margin: 1.5em; color: #1f2328; }
h1 { font-size: 1.3em; } h2 { font-size: 1.1em; margin-top: 2em; } h3 { font-size: 1em; }
.rules, .facts { color: #57606a; }
table.diff { border-collapse: collapse; width: 100%; table-layout: fixed;
  font-family: ui-monospace, SFMono-Regular, Menlo, monospace; font-size: 12px; }
table.diff td { vertical-align: top; white-space: pre-wrap; word-break: break-all; padding: 0 6px; }
table.diff td.no { width: 3.5em; text-align: right; color: #8c959f; user-select: none; }
tr.gap td { background: #f6f8fa; color: #8c959f; text-align: center; }
td.delete, td.replace-old { background: #ffebe9; } td.insert, td.replace-new { background: #e6ffec; }
del { background: #ff818266; text-decoration: none; } ins { background: #abf2bc; text-decoration: none; }
.count-add { color: #1a7f37; } .count-del { color: #cf222e; }
"""


def render_html(report: DiffReport, context: int | None = DEFAULT_CONTEXT) -> str:
    """One self-contained HTML page (inline CSS, no scripts) with side-by-side diffs."""
    title = {
        "pass": "passdiff: what passes did",
        "runs": "passdiff: run to run",
        "targets": "passdiff: target to target",
    }
    parts = [
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">',
        f"<title>{_e(title.get(report.mode, 'passdiff'))}</title><style>{_CSS}</style></head><body>",
        f"<h1>{_e(title.get(report.mode, 'passdiff'))}</h1>",
    ]
    if report.sources:
        parts.append(f'<p class="facts">traces: {_e(", ".join(report.sources))}</p>')
    parts.append(f'<p class="rules">{_e(rules_line(report))}</p>')
    for item in report.pass_diffs:
        parts.append(_html_pass(item, context))
    for comparison in report.comparisons:
        parts.append(f'<h2>{_e(comparison.title)}</h2><ul class="facts">')
        parts.extend(f"<li>{_e(fact)}</li>" for fact in comparison_facts(comparison))
        parts.append("</ul>")
        if comparison.diff is not None and comparison.first_difference is not None:
            parts.append(
                f"<h3>output of {_e(comparison.first_difference.label)} {_html_counts(comparison.diff)}</h3>"
            )
            parts.append(html_table(comparison.diff, context))
        if comparison.source_diff is not None and not comparison.source_diff.is_empty:
            parts.append(f"<h3>kernel source {_html_counts(comparison.source_diff)}</h3>")
            parts.append(html_table(comparison.source_diff, context))
    parts.append("</body></html>\n")
    return "\n".join(parts)


def _html_pass(item: PassDiff, context: int | None) -> str:
    span = item.from_pass if item.from_pass == item.to_pass else f"{item.from_pass} .. {item.to_pass}"
    body = (
        html_table(item.diff, context) if not item.diff.is_empty else "<p>the pass did not change the IR</p>"
    )
    return f"<h2>{_e(item.kernel)} on {_e(item.target)}: {_e(span)} {_html_counts(item.diff)}</h2>{body}"


def _html_counts(diff: TextDiff) -> str:
    return f'<span class="count-add">+{diff.added}</span> <span class="count-del">-{diff.removed}</span>'


def html_table(diff: TextDiff, context: int | None = DEFAULT_CONTEXT) -> str:
    """A side-by-side table of ``diff`` with changed words marked by ``<del>``/``<ins>``."""
    rows = ['<table class="diff">']
    previous_old = previous_new = 0
    for row in diff.side_by_side(context):
        if context is not None and (
            (row.old_no is not None and row.old_no > previous_old + 1)
            or (row.new_no is not None and row.new_no > previous_new + 1)
        ):
            rows.append('<tr class="gap"><td colspan="4">⋯</td></tr>')
        previous_old = row.old_no or previous_old
        previous_new = row.new_no or previous_new
        old_text, new_text = _e(row.old_text), _e(row.new_text)
        if row.kind == REPLACE:
            pieces = word_diff(row.old_text, row.new_text)
            old_text = "".join(
                _e(f) if k == EQUAL else f"<del>{_e(f)}</del>" for k, f in pieces if k != INSERT
            )
            new_text = "".join(
                _e(f) if k == EQUAL else f"<ins>{_e(f)}</ins>" for k, f in pieces if k != DELETE
            )
        old_class = {REPLACE: "replace-old", DELETE: "delete"}.get(row.kind, "")
        new_class = {REPLACE: "replace-new", INSERT: "insert"}.get(row.kind, "")
        rows.append(
            f'<tr><td class="no">{row.old_no or ""}</td><td class="{old_class}">{old_text}</td>'
            f'<td class="no">{row.new_no or ""}</td><td class="{new_class}">{new_text}</td></tr>'
        )
    rows.append("</table>")
    return "\n".join(rows)


def _e(text: Any) -> str:
    return html.escape(str(text), quote=True)
