"""One self-contained HTML report of a trace: runs, pass lists, a time chart, diffs and drawings.

The page is written part by part as it is built, each run's section dropped once written, and
renamed into place once complete (TileLang's own tool rewrites its HTML after every pass). It
refers to nothing outside itself: styles and its one script are inline, the drawings are inline
SVG, links only point inside the page, and the IR texts are stored once each, compressed, for
the script to draw diffs from (``report_diffs``).
"""

from __future__ import annotations

import html
import os
from collections.abc import Iterator, Sequence
from pathlib import Path

from irtrace.perf.latency import latency_cell, latency_text, lowest_occupancy
from irtrace.trace.model import KernelRun, PassRecord, Trace, headers_of
from irtrace.trace.summary import NEW_STAGE, is_new_stage, totals_by_pass
from passviz.model import LineCounts, format_ms, line_counts, pass_entries
from passviz.report_diffs import OPEN_LIMIT, DiffStore, TextStore, script_element, texts_element
from passviz.report_diffs import STYLE as REPORT_DIFF_STYLE
from passviz.report_grid import STYLE as GRID_STYLE
from passviz.report_source import STYLE as SOURCE_STYLE
from passviz.semantics import CATEGORIES, semantic_css

STYLE = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 1em auto; padding: 0 1em; max-width: 1600px;
  color: #222; }
td.err { max-width: 32em; overflow-wrap: anywhere; }
p, h1, h2, h3, summary { overflow-wrap: anywhere; } .scroll { overflow-x: auto; }
h1, h2, h3 { font-weight: 600; }
h2 { border-bottom: 1px solid #ddd; padding-bottom: .2em; margin-top: 2em; }
table { border-collapse: collapse; } td, th { padding: 2px 8px; text-align: left; vertical-align: top; }
th { border-bottom: 1px solid #ccc; } tr:hover td { background: #f6f6f6; }
.num { text-align: right; font-variant-numeric: tabular-nums; }
.bar { display: inline-block; height: 10px; background: #f28e2b; vertical-align: middle; }
.failed, .failed a { color: #c62828; font-weight: 600; } .unchanged { color: #888; }
.add { color: #2e7d32; } .del { color: #c62828; }
.error { background: #fdecea; padding: .5em; white-space: pre-wrap; overflow-wrap: anywhere; }
pre.diff { background: #fafafa; border: 1px solid #eee; padding: .5em; overflow-x: auto; font-size: 12px; }
pre.diff .i { background: #e6ffed; display: block; } pre.diff .d { background: #ffeef0; display: block; }
pre.diff .h { color: #6f42c1; display: block; }
details > summary { cursor: pointer; }
.drawing { overflow: auto; max-height: 90vh; border: 1px solid #eee; }
.drawing svg { max-width: none; height: auto; } .drawing a:hover text { text-decoration: underline; }
code { font-size: 12px; }
pre.ir { background: #fafafa; border: 1px solid #eee; padding: .5em; overflow-x: auto; font-size: 12px; }
.legend span { margin-right: 1.5em; }
"""


def report_html(trace: Trace, runs: Sequence[KernelRun] | None = None, *, title: str | None = None) -> str:
    """The whole page for ``runs`` (all runs of the trace by default), as one string."""
    return "\n".join(report_parts(trace, runs, title=title))


def report_parts(
    trace: Trace, runs: Sequence[KernelRun] | None = None, *, title: str | None = None
) -> Iterator[str]:
    """The page's parts, in order, each built when asked for (the page is their lines joined):
    a run's section is built, written and dropped before the next, so the runs of a streamed
    trace are read one at a time."""
    runs = trace.runs if runs is None else runs
    from passviz.report_layouts import layout_sections

    texts = TextStore()
    layout_links, layouts_html = layout_sections(runs, texts.lazy)
    diffs = DiffStore(trace, texts)
    name = Path(trace.path).name if trace.path else "trace"
    kernels = len({run.kernel for run in headers_of(runs)})
    yield from (
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{_e(title or f'passviz report: {name}')}</title>",
        f"<style>{STYLE}{REPORT_DIFF_STYLE}{GRID_STYLE}{SOURCE_STYLE}{semantic_css()}</style></head><body>",
        f"<h1>{_e(title or f'passviz report: {name}')}</h1>",
        f"<p>Recorded {_e(trace.created)}; {len(runs)} run(s) of {kernels} kernel(s).",
        " Sections: <a href='#runs'>runs</a> · <a href='#time'>time</a> · <a href='#drawings'>pipelines</a>"
        " · <a href='#layouts'>layouts</a> · <a href='#passes'>passes and diffs</a>.</p>",
        _legend(),
    )
    yield _runs_table(trace, runs)
    yield _time_chart(runs)
    yield _drawings(trace, runs, diffs)
    yield layouts_html
    yield '<h2 id="passes">Passes and diffs</h2>'
    for run in runs:
        yield _run_section(trace, run, layout_links, diffs)
    yield texts_element(texts)
    yield script_element()
    yield "</body></html>"


def _counts(trace: Trace, run: KernelRun, store: DiffStore) -> LineCounts:
    """The ``+/-`` the report shows for each pass of ``run``: the one place it counts lines, with
    the counting every tool uses. The store's diffs (one per pair of texts, over all runs) fill
    its cache first, so a pass is diffed once for both its count and its drawn diff."""
    for record in run.passes:
        if record.changed and not record.failed and not is_new_stage(record):
            store.diff(record.ir_before, record.ir_after or record.ir_before)
    return line_counts(trace, run, store.counts)


def write_report(
    trace: Trace, output: str | os.PathLike[str], runs: Sequence[KernelRun] | None = None
) -> Path:
    """Writes the page part by part as it is built (``report_parts``), through ``NAME.partial``
    renamed into place once complete: a symlink is written through, a folder or device is refused
    (``OutputError``), and a failed write leaves no partial file behind."""
    from irtrace.base.output import write_atomically

    parts = enumerate(report_parts(trace, runs))
    return write_atomically(output, (("\n" if number else "") + part for number, part in parts))


def _legend() -> str:
    """What the colours in the diffs and IR listings mean."""
    items = "".join(f"<span class='op-{c.name}'>{_e(c.title)}</span>" for c in CATEGORIES)
    return f"<p class='legend'>Colours in IR and diffs: {items}</p>"


def pass_anchor(run: KernelRun, record: PassRecord) -> str:
    """The id of a pass's diff (or error) in the report."""
    return f"{_run_anchor(run)}-p{record.index}"


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def _run_anchor(run: KernelRun) -> str:
    return _e(f"run{run.run_id}")


def _runs_table(trace: Trace, runs: Sequence[KernelRun]) -> str:
    machine = any(run.resources for run in runs)
    benched = any(run.bench is not None for run in runs)
    rows = []
    for run in runs:
        changed = sum(p.changed for p in run.passes)
        lowered = format_ms(run.total_s) if run.total_s is not None else "-"
        css = ' class="failed"' if run.status == "failed" else ""
        extra = ""
        if machine:
            extra += "".join(f"<td class='num'>{_e(cell)}</td>" for cell in _resource_cells(trace, run))
        if benched:
            extra += f"<td class='num'>{_e(latency_cell(run.bench))}</td>"
        rows.append(
            f"<tr{css}><td><a href='#{_run_anchor(run)}'>{_e(run.kernel)}</a></td><td>{_e(run.target)}</td>"
            f"<td>{_e(run.status)}</td><td class='num'>{len(run.passes)}</td><td class='num'>{changed}</td>"
            f"<td class='num'>{lowered}</td>{extra}<td class='err'>{_short_error(run)}</td></tr>"
        )
    heads = "<th>registers</th><th>spills</th><th>smem</th><th>occupancy</th>" if machine else ""
    heads += "<th>latency</th>" if benched else ""
    return (
        "<h2 id='runs'>Runs</h2><div class='scroll'>"
        "<table><tr><th>kernel</th><th>target</th><th>status</th><th>passes</th>"
        f"<th>changed</th><th>lowering</th>{heads}<th>error</th></tr>" + "".join(rows) + "</table></div>"
    )


def _short_error(run: KernelRun) -> str:
    """The error's first line, cut at 160 characters; the run's section has it whole."""
    if not run.error:
        return ""
    first = run.error.strip().splitlines()[0] if run.error.strip() else ""
    cut = first if len(first) <= 160 else first[:160] + "…"
    more = cut != run.error.strip()
    link = f" <a href='#{_run_anchor(run)}'>(whole error)</a>" if more else ""
    return _e(cut) + link


def _resource_cells(trace: Trace, run: KernelRun) -> list[str]:
    """Registers, spilled bytes, shared memory (static + dynamic): the largest over the run's kernels;
    occupancy: the lowest."""
    from irtrace.trace.resources import format_bytes

    if not run.resources:
        return ["-", "-", "-", "-"]
    lowest = lowest_occupancy(run.resources, trace.kernel_source(run))
    return [
        str(max(item.registers for item in run.resources)),
        f"{max(item.spills for item in run.resources)} B",
        format_bytes(max(item.smem for item in run.resources)),
        f"{lowest.fraction:.0%}" if lowest is not None else "-",
    ]


def _dynamic(size: int | None) -> str:
    from irtrace.trace.resources import format_bytes

    return "symbolic" if size is None else format_bytes(size)


def _latency_line(run: KernelRun) -> str:
    """The measured latency (``irtrace record --bench``): median, range of repetitions, GPU."""
    if run.bench is None:
        return ""
    css = " class='failed'" if run.bench.latency_ms is None else ""
    return f"<p{css}>Latency: {_e(latency_text(run.bench))}</p>"


def _resources_table(trace: Trace, run: KernelRun) -> str:
    """Per kernel function, what ptxas reports (``irtrace record --machine-code``), with threads per
    block and theoretical occupancy."""
    from irtrace.perf.occupancy import function_occupancy, launch_threads
    from irtrace.trace.resources import format_bytes

    if not run.resources:
        return ""
    source = trace.kernel_source(run)
    threads = launch_threads(source) if source else {}
    occupancies = function_occupancy(run.resources, source)
    rows = []
    for item in run.resources:
        found = occupancies.get(item.function)
        rows.append(
            f"<tr><td>{_e(item.function)}</td><td>{_e(item.arch)}</td><td class='num'>{item.registers}</td>"
            f"<td class='num'>{item.spill_stores} B / {item.spill_loads} B</td>"
            f"<td class='num'>{_e(format_bytes(item.static_smem))}</td>"
            f"<td class='num'>{_e(_dynamic(item.dynamic_smem))}</td>"
            f"<td class='num'>{item.barriers}</td><td class='num'>{item.stack} B</td>"
            f"<td class='num'>{threads.get(item.function, '-')}</td>"
            f"<td>{_e(found.describe() if found is not None else '-')}</td></tr>"
        )
    return (
        "<div class='scroll'>"
        "<table><tr><th>kernel function</th><th>arch</th><th>registers</th><th>spill stores / loads</th>"
        "<th>static smem</th><th>dynamic smem</th><th>barriers</th><th>stack</th><th>threads</th>"
        "<th>occupancy</th></tr>" + "".join(rows) + "</table></div>"
    )


def _time_chart(runs: Sequence[KernelRun]) -> str:
    totals = totals_by_pass(runs)[:25]
    longest = max((t.total_s for t in totals), default=0.0) or 1.0
    rows = [
        f"<tr><td><code>{_e(t.name)}</code></td><td class='num'>{t.count}</td>"
        f"<td class='num'>{format_ms(t.total_s)}</td><td class='num'>{t.share:.1%}</td>"
        f"<td><span class='bar' style='width:{300 * t.total_s / longest:.0f}px'></span></td></tr>"
        for t in totals
    ]
    sums = [(r.kernel, r.target, sum(p.self_s for p in r.passes)) for r in runs]  # runs read once
    per_run = max((total for _, _, total in sums), default=0.0) or 1.0
    run_rows = [
        f"<tr><td>{_e(kernel)} @ {_e(target)}</td><td class='num'>"
        f"{format_ms(total)}</td><td><span class='bar' "
        f"style='width:{300 * total / per_run:.0f}px'></span></td></tr>"
        for kernel, target, total in sums
    ]
    return (
        "<h2 id='time'>Time</h2><h3>Pass time per run</h3><div class='scroll'><table>"
        + "".join(run_rows)
        + "</table></div><h3>Passes taking the most time, over all runs</h3>"
        "<div class='scroll'>"
        "<table><tr><th>pass</th><th>runs</th><th>self time</th><th>share</th><th></th></tr>"
        + "".join(rows)
        + "</table></div>"
    )


def _drawings(trace: Trace, runs: Sequence[KernelRun], store: DiffStore) -> str:
    from passviz.report_grid import pipeline_grid

    parts = [
        '<h2 id="drawings">Pipelines</h2>',
        "<p>Per kernel, a column per target and a row per pass, the same pass of every target on "
        "one row: green changed the IR (click for its diff), red failed, grey changed nothing; rows "
        "where no target changed anything are folded. <code>passviz dot TRACE -k KERNEL -o FILE.svg"
        "</code> draws it as a graph.</p>",
    ]
    by_kernel: dict[str, list[int]] = {}
    for header in headers_of(runs):
        by_kernel.setdefault(header.kernel, []).append(header.run_id)
    for kernel, run_ids in by_kernel.items():  # one kernel's runs (its targets) in memory at a time
        lanes = list(trace.runs_by_id(run_ids))
        grid = pipeline_grid(lanes, lambda run: _counts(trace, run, store), pass_anchor)
        parts.append(f"<h3>{_e(kernel)}</h3>{grid}")
    return "\n".join(parts)


def _run_section(
    trace: Trace,
    run: KernelRun,
    layout_links: dict[tuple[int, str], str],
    store: DiffStore,
) -> str:
    from passviz.report_layouts import run_layouts_table
    from passviz.report_source import SourceLines
    from passviz.source_map import kernel_source

    counts = _counts(trace, run, store)
    python_lines = SourceLines(trace, run, store.store_text)
    rows = []
    diffs = []
    for entry in pass_entries(run):
        record = entry.record
        added, removed = counts.get(record.index) or (0, 0)
        anchor = _e(pass_anchor(run, record))
        name = _e(entry.label)
        if record.changed or record.failed:
            name = f"<a href='#{anchor}'>{name}</a>"
        css = "failed" if record.failed else "" if record.changed else "unchanged"
        lines = (
            NEW_STAGE
            if is_new_stage(record) and not record.failed
            else f"<span class='add'>+{added}</span> <span class='del'>-{removed}</span>"
            if record.changed
            else ""
        )
        rows.append(
            f"<tr class='{css}'><td class='num'>{_e(record.index)}</td>"
            f"<td>{'&nbsp;&nbsp;' * record.depth}{name}</td>"
            f"<td>{_e(record.phase)}</td><td>{_e(record.scope)}</td>"
            f"<td class='num'>{format_ms(record.self_s)}</td>"
            f"<td><span class='bar' style='width:{120 * entry.share:.0f}px'></span></td><td>{lines}</td></tr>"
        )
        if is_new_stage(record) and not record.failed:
            lines = f"{trace.ir_after(record).count(chr(10))} lines"
            diffs.append(
                f"<p id='{anchor}'>{_e(entry.label)}: {_e(lines)} (<code>irtrace ir TRACE "
                f"-k {_e(run.kernel)} -t {_e(run.target)} -p {_e(record.name)}</code>)</p>"
            )
        elif record.failed:
            received = trace.ir_before(record)
            number = store.store_text(received)
            diffs.append(
                f"<details open id='{anchor}'><summary class='failed'>{_e(entry.label)}: failed</summary>"
                f"<div class='error'>{_e(record.error or '')}</div>"
                f"<details><summary>the IR it received ({len(received.splitlines())} lines)</summary>"
                f"<pre class='ir lazy' data-t='{number}'></pre></details></details>"
            )
        elif record.changed:
            old, new, blocks, changed = store.diff(record.ir_before, record.ir_after or record.ir_before)
            folded = changed > OPEN_LIMIT
            hint = f" <span class='hint'>({changed} changed lines: folded)</span>" if folded else ""
            diffs.append(
                f"<details class='diff'{'' if folded else ' open'} id='{anchor}' "
                f"data-a='{old}' data-b='{new}'{python_lines.diff_attributes(record)} "
                f"data-ops='{blocks}'><summary>{_e(entry.label)} {lines}{hint}</summary>"
                f"<div class='diffbody'></div></details>"
            )
    status = f" <span class='failed'>failed: {_e(run.error or '')}</span>" if run.status == "failed" else ""
    if not run.passes and run.status != "ok":
        status += " <span class='failed'>(before its first pass: no pass ran)</span>"
    return (
        f"<h3 id='{_run_anchor(run)}'>{_e(run.kernel)} @ {_e(run.target)}</h3>"
        f"<p><code>{_e(run.spec)}</code>{status}</p>"
        + _latency_line(run)
        + _resources_table(trace, run)
        + store.lazy(
            "<details><summary>pass list</summary><div class='scroll'>"
            "<table><tr><th>#</th><th>pass</th><th>phase</th>"
            "<th>scope</th><th>self time</th><th>share</th><th>lines</th></tr>"
            + "".join(rows)
            + "</table></div></details>"
        )
        + run_layouts_table(run, layout_links)
        + python_lines.section(
            lambda record: pass_anchor(run, record) if record.changed or record.failed else None,
            kernel_source(trace, run),
        )
        + "<p>Diffs of the passes that changed the IR:</p>"
        + "".join(diffs)
    )
