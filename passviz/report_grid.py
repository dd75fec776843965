"""The report's pipeline drawings: per kernel, one table with a column per lane (run) and a row per
pass, the same pass of every lane on one row.

Graphviz drawings of a coverage trace (150 lanes) took 7 of the report's seconds and 7 of its MB,
and ran off the page; this table is built in one pass over the runs, scrolls inside its own box
with the pass names kept in view, and folds rows where no lane changed the IR.
``passviz dot`` still draws the graph.
"""

from __future__ import annotations

import html
from collections.abc import Callable, Sequence

from irtrace.core.summary import NEW_STAGE
from irtrace.core.trace import KernelRun, PassRecord
from passviz.model import LineCounts, pass_entries

STYLE = """
.grid { overflow: auto; max-height: 80vh; border: 1px solid #eee; margin-bottom: 1em; }
.grid table { border-collapse: separate; border-spacing: 0; font-size: 12px; }
.grid th, .grid td { padding: 1px 6px; white-space: nowrap; border-bottom: 1px solid #f3f3f3; }
.grid thead th { position: sticky; top: 0; background: #fff; z-index: 2; border-bottom: 1px solid #ccc; }
.grid th.p { position: sticky; left: 0; background: #fff; z-index: 1; font-weight: normal;
  max-width: 28em; overflow: hidden; text-overflow: ellipsis; }
.grid thead th.p { z-index: 3; }
.grid td.c { background: #e6ffed; } .grid td.f { background: #fdecea; } .grid td.u { background: #f4f4f4; }
.grid td.c a, .grid td.f a { text-decoration: none; color: inherit; }
.grid tr.fold th, .grid tr.fold td { color: #888; font-style: italic; background: #fafafa; }
"""


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def aligned_rows(runs: Sequence[KernelRun]) -> list[str]:
    """Pass labels (``name#N`` when repeated) of all ``runs`` in one order that keeps each run's."""
    order: list[str] = []
    where: dict[str, int] = {}
    for run in runs:
        previous = -1
        for entry in pass_entries(run):
            label = entry.label
            if label in where:
                previous = max(previous, where[label])
                continue
            order.insert(previous + 1, label)
            previous += 1
            where = {name: k for k, name in enumerate(order)}
    return order


def pipeline_grid(
    runs: Sequence[KernelRun],
    counts: Callable[[KernelRun], LineCounts],
    link: Callable[[KernelRun, PassRecord], str],
) -> str:
    """The table for the runs of one kernel."""
    rows = aligned_rows(runs)
    cells: list[dict[str, str]] = []
    for run in runs:
        by_label: dict[str, str] = {}
        run_counts = counts(run)
        for entry in pass_entries(run):
            record = entry.record
            if record.failed:
                by_label[entry.label] = f"<td class='f'><a href='#{_e(link(run, record))}'>failed</a></td>"
            elif record.changed:
                found = run_counts.get(record.index)
                text = NEW_STAGE if found is None else f"+{found[0]} -{found[1]}"  # a new stage has no count
                by_label[entry.label] = f"<td class='c'><a href='#{_e(link(run, record))}'>{text}</a></td>"
            else:
                by_label[entry.label] = "<td class='u'></td>"
        cells.append(by_label)
    head = "".join(
        f"<th title='{_e(run.kernel)} @ {_e(run.target)}'>{_e(run.target)}"
        f"{' (failed)' if run.status == 'failed' else ''}</th>"
        for run in runs
    )
    body: list[str] = []
    folded: list[str] = []

    def fold() -> None:
        if folded:
            body.append(
                f"<tr class='fold'><th class='p'>{len(folded)} pass(es) changing nothing in any lane</th>"
                + "<td></td>" * len(runs)
                + "</tr>"
            )
            folded.clear()

    for label in rows:
        row = [lane.get(label, "<td></td>") for lane in cells]
        if all(cell in ("<td class='u'></td>", "<td></td>") for cell in row):
            folded.append(label)
            continue
        fold()
        body.append(f"<tr><th class='p' title='{_e(label)}'>{_e(label)}</th>{''.join(row)}</tr>")
    fold()
    if not rows:
        body.append("<tr><th class='p'>no pass ran</th>" + "<td></td>" * len(runs) + "</tr>")
    return (
        f"<div class='grid'><table><thead><tr><th class='p'>pass</th>{head}</tr></thead>"
        f"<tbody>{''.join(body)}</tbody></table></div>"
    )
