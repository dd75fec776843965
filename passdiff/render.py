"""Renderings of a ``DiffReport``: the rich terminal view, the unified diff and the HTML page.

The only module of passdiff that imports rich (lazily, inside ``render_terminal``). The terminal
view highlights changed words inside changed lines; on a non-terminal or with ``NO_COLOR`` the
same layout comes out as plain text.
"""

from __future__ import annotations

import html
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from irtrace.diff.compare import NOT_REACHED, PassAlignment, RunComparison
from irtrace.diff.origins import NO_MAPS_HINT, DiffOrigins
from irtrace.diff.summary import MODE_RUNS, MODE_TARGETS, DiffReport, PassDiff, diff_names, hunk_note
from irtrace.diff.textdiff import (
    DELETE,
    EQUAL,
    INSERT,
    REINDENT,
    REPLACE,
    DiffLine,
    SideBySideRow,
    TextDiff,
    WordBudget,
    block_lines,
    diff_words,
    grouped_opcodes,
    split_lines,
)
from irtrace.trace.summary import NEW_STAGE

if TYPE_CHECKING:
    from rich.console import Console
    from rich.text import Text

DEFAULT_CONTEXT = 3
NEW_STAGE_NOTE = (
    "its output is in another language than its input (TIR to kernel source, source to PTX, PTX to "
    "SASS), so the texts are not diffed and no lines are counted; irtrace ir -p NAME prints the output"
)
NOTE = "note"
"""A hunk line that is no line of either text: why a pair of lines is shown without word highlights."""


# ----------------------------------------------------------------------------- shared wording


def rules_line(report: DiffReport) -> str:
    """Which normalization rules were on, as every format states it."""
    enabled = report.rules.enabled()
    return "normalization: " + (", ".join(enabled) if enabled else "off (raw texts)")


def sides_line(report: DiffReport) -> str | None:
    """Which trace (or target) is run ``a`` and which is ``b``."""
    if report.mode == MODE_RUNS and len(report.sources) == 2:
        return f"a: {report.sources[0]}   b: {report.sources[1]}"
    if report.mode == MODE_TARGETS and report.comparisons:
        first = report.comparisons[0]
        return f"a: {first.target_a}   b: {first.target_b}"
    return None


def comparison_facts(comparison: RunComparison, mode: str = MODE_RUNS) -> list[str]:
    """The plain-language findings of a comparison, one per line. Passes one run lacks are
    "removed" and "added" between two traces (a is the old one), but between two targets they
    belong to that target's pipeline, and are named by it."""
    if comparison.presence == "only_a":
        return [f"only in the first trace: {comparison.kernel} on {comparison.target_a}"]
    if comparison.presence == "only_b":
        return [f"only in the second trace: {comparison.kernel} on {comparison.target_b}"]
    facts = []
    first = comparison.first_difference
    if first is None:
        facts.append("no pass differs in its output, and no pass only one run ran changed the IR")
    else:
        facts.append(f"first differing pass: {first.both_labels}{_cause(comparison, first)}")
    if comparison.input_diff is not None and not comparison.input_diff.is_empty:
        facts.append(
            f"the input modules differ (+{comparison.input_diff.added} -{comparison.input_diff.removed})"
        )
    if mode == MODE_TARGETS:
        only_a, only_b = f"passes only on {comparison.target_a}", f"passes only on {comparison.target_b}"
    else:
        only_a, only_b = "removed passes (only in a)", "added passes (only in b)"
    if comparison.host_wrapper is not None:
        side, names = comparison.host_wrapper
        target, other = (
            (comparison.target_a, comparison.target_b)
            if side == "a"
            else (comparison.target_b, comparison.target_a)
        )
        facts.append(
            f"run {side} ({target}) also compiled its program's host wrapper ({len(names)} passes after "
            f"codegen: {', '.join(names)}); {other} was lowered to its device kernel only"
        )
    for title, names in (
        (only_a, comparison.removed_passes),
        (only_b, comparison.added_passes),
        ("passes run at another point", comparison.moved_passes),
    ):
        if names:
            facts.append(f"{title}: {', '.join(names)}")
    if comparison.unreached_passes:
        b_stopped = any(row.status == NOT_REACHED and row.b is None for row in comparison.alignment)
        ran, stopped = ("a", "b") if b_stopped else ("b", "a")
        facts.append(
            f"{len(comparison.unreached_passes)} passes of run {ran} were never reached by run {stopped}, "
            f"which stopped before them (first: {comparison.unreached_passes[0]})"
        )
    source = comparison.source_diff
    if source is not None:
        facts.append(
            "kernel sources: identical"
            if source.is_empty
            else f"kernel sources: +{source.added} -{source.removed}"
        )
    for stage, diff in comparison.machine_diffs:
        facts.append(f"{stage}: identical" if diff.is_empty else f"{stage}: +{diff.added} -{diff.removed}")
    facts.extend(comparison.notes)
    return facts


def _cause(comparison: RunComparison, first: PassAlignment) -> str:
    """Why ``first`` is where the runs part, in words."""
    record = first.a or first.b
    if first.a is None or first.b is None:
        run = "a" if first.b is None else "b"
        other = "b" if run == "a" else "a"
        if record is not None and record.failed:
            return f" (only run {run} ran it, and it failed there)"
        against = comparison.compared_with_label
        where = f"run {other}'s IR after {against}" if against else f"run {other}'s input"
        return f" (only run {run} ran it, and it changed the IR; diffed against {where})"
    if first.a.status != first.b.status:
        failed = "a" if first.a.failed else "b"
        return f" (it failed in run {failed} only)"
    if comparison.input_differs:
        return " (it already received different IR: the cause lies before it)"
    return " (same input IR: this pass makes the difference)"


def origins_hint(report: DiffReport) -> str | None:
    """One line saying how to see each hunk's Python lines, when no IR diff shown has source maps."""
    shown = [item.origins for item in report.pass_diffs if not item.new_stage and not item.diff.is_empty]
    shown += [c.origins for c in report.comparisons if c.diff is not None and c.first_difference is not None]
    return NO_MAPS_HINT if shown and not any(origins.recorded for origins in shown) else None


def layout_section(comparison: RunComparison) -> list[str]:
    """A heading and one line per buffer whose inferred layout differs; nothing when none does
    (or when a run recorded no layouts only because the other is missing)."""
    layouts = comparison.layouts
    if layouts is None:
        return []
    lines = layouts.lines()
    if not lines:
        return []
    return ["layouts after layout inference", *lines]


# ----------------------------------------------------------------------------- unified


def render_unified(report: DiffReport, context: int = DEFAULT_CONTEXT) -> str:
    """All the report's diffs as one unified diff, with ``#`` comment lines patch skips over."""
    out: list[str] = []
    for item in report.pass_diffs:
        base = f"{item.kernel}/{item.target}"
        if item.new_stage:
            out.append(f"# {base}: {_span(item)}: {NEW_STAGE}: {NEW_STAGE_NOTE}\n")
            continue
        out.append(
            item.diff.unified(
                f"a/{base}/before-{item.from_pass}",
                f"b/{base}/after-{item.to_pass}",
                context,
                hunk_note(item.origins),
            )
        )
    for comparison in report.comparisons:
        if comparison.diff is not None and comparison.first_difference is not None:
            names = diff_names(comparison, comparison.first_difference.label)
            out.append(comparison.diff.unified(*names, context, hunk_note(comparison.origins)))
        if comparison.source_diff is not None:
            out.append(comparison.source_diff.unified(*diff_names(comparison, "source"), context))
        for stage, diff in comparison.machine_diffs:
            out.append(diff.unified(*diff_names(comparison, stage), context))
    return "".join(out)


# ----------------------------------------------------------------------------- terminal


def render_terminal(report: DiffReport, console: Console, context: int = DEFAULT_CONTEXT) -> None:
    """Print the report: headers, findings, and each diff with word-level highlights."""
    from rich.text import Text

    console.print(Text(rules_line(report), style="dim"))
    sides = sides_line(report)
    if sides is not None:
        console.print(Text(sides, style="dim"))
    hint = origins_hint(report)
    if hint is not None:
        console.print(Text(hint, style="dim"))
    for item in report.pass_diffs:
        counts = ((NEW_STAGE, "cyan"),) if item.new_stage else _counts(item.diff)
        header = Text.assemble(
            (f"{item.kernel} on {item.target}: ", "bold"), (_span(item), "bold cyan"), "  ", *counts
        )
        console.print(header)
        if item.new_stage:
            console.print(Text(NEW_STAGE_NOTE, style="dim"))
            continue
        if item.failed_pass is not None:
            console.print(Text(f"{item.failed_pass} failed; it produced no IR. Its error:", style="bold red"))
            console.print(Text(item.error or "(no message)", style="red"))
            if item.diff.is_empty:
                continue
            console.print(Text(f"what the span did before {item.failed_pass}:", style="bold"))
        _print_diff(console, item.diff, context, "the pass did not change the IR", item.origins)
    for comparison in report.comparisons:
        console.print(Text(comparison.title, style="bold"))
        for fact in comparison_facts(comparison, report.mode):
            console.print(Text("  " + fact))
        layout_lines = layout_section(comparison)
        if layout_lines:
            console.print(Text(layout_lines[0], style="bold"))
            for line in layout_lines[1:]:
                console.print(Text("  " + line), crop=False, overflow="ignore", no_wrap=True, soft_wrap=True)
        if comparison.diff is not None and comparison.first_difference is not None:
            console.print(
                Text.assemble(
                    ("IR after ", "bold"), (comparison.first_difference.both_labels, "bold cyan"), "  "
                )
                + Text.assemble(*_counts(comparison.diff))
            )
            _print_diff(console, comparison.diff, context, "", comparison.origins)
        if comparison.source_diff is not None and not comparison.source_diff.is_empty:
            console.print(Text.assemble(("kernel source", "bold"), "  ", *_counts(comparison.source_diff)))
            _print_diff(console, comparison.source_diff, context, "")
        for stage, diff in comparison.machine_diffs:
            if not diff.is_empty:
                console.print(Text.assemble((stage, "bold"), "  ", *_counts(diff)))
                _print_diff(console, diff, context, "")
        console.print()


def _span(item: PassDiff) -> str:
    return item.from_pass if item.from_pass == item.to_pass else f"{item.from_pass} .. {item.to_pass}"


def _counts(diff: TextDiff) -> tuple[tuple[str, str] | str, ...]:
    counts: tuple[tuple[str, str] | str, ...] = (
        (f"+{diff.added}", "green"),
        " ",
        (f"-{diff.removed}", "red"),
    )
    if diff.reindented:
        counts += ((f" ({diff.reindented} only re-indented)", "yellow"),)
    return counts


def _print_diff(
    console: Console, diff: TextDiff, context: int, empty_message: str, origins: DiffOrigins | None = None
) -> None:
    if diff.is_empty:
        if empty_message:
            console.print(empty_message)
        return
    for text in terminal_lines(diff, context, origins):
        console.print(text, crop=False, overflow="ignore", no_wrap=True, soft_wrap=True)


def terminal_lines(
    diff: TextDiff, context: int = DEFAULT_CONTEXT, origins: DiffOrigins | None = None
) -> Iterator[Text]:
    """The diff as rich ``Text`` lines: gutter with line numbers, sign, and highlighted words;
    with ``origins`` (source maps), each hunk starts with the Python lines it comes from."""
    from rich.text import Text

    width = len(str(max(diff.before.count("\n"), diff.after.count("\n")) + 1))
    groups = grouped_opcodes(diff.opcodes(), context) if origins is not None and origins.mapped else []
    for number, hunk in enumerate(_hunks(diff, context)):
        if number:
            yield Text("⋯", style="dim")
        if groups:
            for heading in hunk_lines(origins, groups[number], number + 1, len(groups)):  # type: ignore[arg-type]
                yield Text(heading, style="cyan")
        for kind, line, pieces in hunk:
            if kind == NOTE:
                yield Text(f"{'':>{width}} {'':>{width}} │ ", style="dim") + Text(
                    line.text, style="italic yellow"
                )
                continue
            old = str(line.old_no) if line.old_no is not None else ""
            new = str(line.new_no) if line.new_no is not None else ""
            gutter = Text(f"{old:>{width}} {new:>{width}} │", style="dim")
            sign = {EQUAL: " ", DELETE: "-", INSERT: "+", REINDENT: "~"}[kind]
            style = {EQUAL: "", DELETE: "red", INSERT: "green", REINDENT: "yellow"}[kind]
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


def no_kernel_line(number: int, total: int) -> str:
    """The heading of a hunk none of whose changed lines carries a kernel line: it names the hunk,
    so that under the pass header it does not read as a verdict on the whole diff."""
    return (
        f"python: none in hunk {number} of {total} "
        "(no changed line of this hunk carries a span of the kernel's file)"
    )


def hunk_lines(
    origins: DiffOrigins, group: list[tuple[str, int, int, int, int]], number: int = 1, total: int = 1
) -> list[str]:
    """What hunk ``number`` of ``total`` says in its heading: ``python gemm.py:36  T.gemm(...)``
    per Python line of its changed lines, or that none of them comes from a line of the kernel."""
    described = origins.described(origins.of_opcodes(group))
    if not described:
        return [no_kernel_line(number, total)]
    return [f"python {line}" for line in described]


def _hunks(diff: TextDiff, context: int) -> Iterator[list[HunkLine]]:
    """Hunks of lines with word pieces for paired changed lines (the k-th deleted line of a run of
    deletions faces the k-th inserted line after it); re-indented lines stand alone."""
    old_lines, new_lines = split_lines(diff.before), split_lines(diff.after)
    budget = WordBudget()
    for group in grouped_opcodes(diff.opcodes(), context):
        hunk: list[HunkLine] = []
        for tag, i1, i2, j1, j2 in group:
            if tag == EQUAL:
                hunk.extend(
                    (EQUAL, DiffLine(EQUAL, i + 1, j1 + i - i1 + 1, old_lines[i]), None)
                    for i in range(i1, i2)
                )
                continue
            lines = block_lines(old_lines, new_lines, i1, i2, j1, j2)
            position = 0
            while position < len(lines):
                if lines[position].kind == REINDENT:
                    hunk.append((REINDENT, lines[position], None))
                    position += 1
                    continue
                olds: list[DiffLine] = []
                news: list[DiffLine] = []
                while position < len(lines) and lines[position].kind == DELETE and not news:
                    olds.append(lines[position])
                    position += 1
                while position < len(lines) and lines[position].kind == INSERT:
                    news.append(lines[position])
                    position += 1
                paired = min(len(olds), len(news))
                words = [diff_words(olds[k].text, news[k].text, budget) for k in range(paired)]
                # A pair too long to compare word by word is shown as whole lines, after a note.
                hunk.extend(
                    (NOTE, DiffLine(NOTE, None, None, word.skipped), None) for word in words if word.skipped
                )
                pieces = [None if word.skipped else word.pieces for word in words]
                for k, line in enumerate(olds):
                    shown = pieces[k] if k < paired else None
                    hunk.append(
                        (DELETE, line, None if shown is None else [p for p in shown if p[0] != INSERT])
                    )
                for k, line in enumerate(news):
                    shown = pieces[k] if k < paired else None
                    hunk.append(
                        (INSERT, line, None if shown is None else [p for p in shown if p[0] != DELETE])
                    )
        yield hunk


# ----------------------------------------------------------------------------- HTML

_CSS = """
body { font-family: system-ui, sans-serif; margin: 1.5em; color: #1f2328; }
h1 { font-size: 1.3em; } h2 { font-size: 1.1em; margin-top: 2em; } h3 { font-size: 1em; }
.rules, .facts { color: #57606a; }
table.diff { border-collapse: collapse; width: 100%; table-layout: fixed;
  font-family: ui-monospace, SFMono-Regular, Menlo, monospace; font-size: 12px; }
table.diff td { vertical-align: top; white-space: pre-wrap; word-break: break-all; padding: 0 6px; }
table.diff col.no { width: 4.5em; } table.diff col.code { width: auto; }
table.diff td.no { text-align: right; color: #8c959f; user-select: none; }
tr.gap td { background: #f6f8fa; color: #8c959f; text-align: center; }
td.delete, td.replace-old { background: #ffebe9; } td.insert, td.replace-new { background: #e6ffec; }
td.reindent { background: #fff8c5; } td.reindent::before { content: "⇥ "; color: #9a6700; }
.failed { color: #cf222e; } pre.error { background: #ffebe9; padding: .5em; white-space: pre-wrap; }
del { background: #ff818266; text-decoration: none; } ins { background: #abf2bc; text-decoration: none; }
.count-add { color: #1a7f37; } .count-del { color: #cf222e; }
tr.note td { color: #9a6700; font-style: italic; white-space: normal; }
tr.py td { background: #ddf4ff; color: #0550ae; white-space: normal; }
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
    sides = sides_line(report)
    if sides is not None:
        parts.append(f'<p class="facts">{_e(sides)}</p>')
    elif report.sources:
        parts.append(f'<p class="facts">traces: {_e(", ".join(report.sources))}</p>')
    parts.append(f'<p class="rules">{_e(rules_line(report))}</p>')
    hint = origins_hint(report)
    if hint is not None:
        parts.append(f'<p class="rules">{_e(hint)}</p>')
    for item in report.pass_diffs:
        parts.append(_html_pass(item, context))
    for comparison in report.comparisons:
        parts.append(f'<h2>{_e(comparison.title)}</h2><ul class="facts">')
        parts.extend(f"<li>{_e(fact)}</li>" for fact in comparison_facts(comparison, report.mode))
        parts.append("</ul>")
        layout_lines = layout_section(comparison)
        if layout_lines:
            parts.append(f'<h3>{_e(layout_lines[0])}</h3><ul class="layouts">')
            parts.extend(f"<li>{_e(line)}</li>" for line in layout_lines[1:])
            parts.append("</ul>")
        if comparison.diff is not None and comparison.first_difference is not None:
            label = _e(comparison.first_difference.both_labels)
            parts.append(f"<h3>IR after {label} {_html_counts(comparison.diff)}</h3>")
            parts.append(html_table(comparison.diff, context, comparison.origins))
        if comparison.source_diff is not None and not comparison.source_diff.is_empty:
            parts.append(f"<h3>kernel source {_html_counts(comparison.source_diff)}</h3>")
            parts.append(html_table(comparison.source_diff, context))
        for stage, diff in comparison.machine_diffs:
            if not diff.is_empty:
                parts.append(f"<h3>{_e(stage)} {_html_counts(diff)}</h3>")
                parts.append(html_table(diff, context))
    parts.append("</body></html>\n")
    return "\n".join(parts)


def _html_pass(item: PassDiff, context: int | None) -> str:
    span = _span(item)
    if item.new_stage:
        heading = f"<h2>{_e(item.kernel)} on {_e(item.target)}: {_e(span)} {NEW_STAGE}</h2>"
        return f"{heading}<p>{_e(NEW_STAGE_NOTE)}</p>"
    body = (
        html_table(item.diff, context, item.origins)
        if not item.diff.is_empty
        else "<p>the pass did not change the IR</p>"
    )
    if item.failed_pass is not None:
        failure = (
            f'<p class="failed">{_e(item.failed_pass)} failed; it produced no IR. Its error:</p>'
            f'<pre class="error">{_e(item.error or "(no message)")}</pre>'
        )
        body = failure + ("" if item.diff.is_empty else body)
    return f"<h2>{_e(item.kernel)} on {_e(item.target)}: {_e(span)} {_html_counts(item.diff)}</h2>{body}"


def _html_counts(diff: TextDiff) -> str:
    reindented = (
        f' <span class="reindent">({diff.reindented} only re-indented)</span>' if diff.reindented else ""
    )
    added = f'<span class="count-add">+{diff.added}</span>'
    return f'{added} <span class="count-del">-{diff.removed}</span>{reindented}'


def html_table(
    diff: TextDiff, context: int | None = DEFAULT_CONTEXT, origins: DiffOrigins | None = None
) -> str:
    """A side-by-side table of ``diff`` with changed words marked by ``<del>``/``<ins>``; with
    ``origins`` (source maps), each stretch of rows starts with the Python lines it comes from
    (a ``tr.py`` row)."""
    # Column widths come from <col>: a first row spanning all columns (a gap) must not set them.
    rows = [
        '<table class="diff"><colgroup><col class="no"><col class="code"><col class="no"><col class="code">'
        "</colgroup>"
    ]
    previous_old = previous_new = 0
    budget = WordBudget()
    blocks: list[list[SideBySideRow]] = []
    for row in diff.side_by_side(context):
        if not blocks or (
            context is not None
            and (
                (row.old_no is not None and row.old_no > previous_old + 1)
                or (row.new_no is not None and row.new_no > previous_new + 1)
            )
        ):
            blocks.append([])
        blocks[-1].append(row)
        previous_old = row.old_no or previous_old
        previous_new = row.new_no or previous_new
    for number, block in enumerate(blocks):
        if number:
            rows.append('<tr class="gap"><td colspan="4">⋯</td></tr>')
        if origins is not None and origins.mapped:
            changed = [row for row in block if row.kind != EQUAL]
            hunk = origins.hunk(
                [row.old_no for row in changed if row.old_no is not None],
                [row.new_no for row in changed if row.new_no is not None],
            )
            described = origins.described(hunk)
            heading = (
                "python " + "; ".join(described) if described else no_kernel_line(number + 1, len(blocks))
            )
            rows.append(f'<tr class="py"><td colspan="4">{_e(heading)}</td></tr>')
        for row in block:
            old_text, new_text = _e(row.old_text), _e(row.new_text)
            words = diff_words(row.old_text, row.new_text, budget) if row.kind == REPLACE else None
            if words is not None and words.skipped:
                rows.append(f'<tr class="note"><td colspan="4">{_e(words.skipped)}</td></tr>')
            elif words is not None:
                pieces = words.pieces
                old_text = "".join(
                    _e(f) if k == EQUAL else f"<del>{_e(f)}</del>" for k, f in pieces if k != INSERT
                )
                new_text = "".join(
                    _e(f) if k == EQUAL else f"<ins>{_e(f)}</ins>" for k, f in pieces if k != DELETE
                )
            old_class = {REPLACE: "replace-old", DELETE: "delete", REINDENT: "reindent"}.get(row.kind, "")
            new_class = {REPLACE: "replace-new", INSERT: "insert", REINDENT: "reindent"}.get(row.kind, "")
            rows.append(
                f'<tr><td class="no">{row.old_no or ""}</td><td class="{old_class}">{old_text}</td>'
                f'<td class="no">{row.new_no or ""}</td><td class="{new_class}">{new_text}</td></tr>'
            )
    rows.append("</table>")
    return "\n".join(rows)


def _e(text: Any) -> str:
    return html.escape(str(text), quote=True)
