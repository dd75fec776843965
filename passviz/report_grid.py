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
from dataclasses import dataclass

from msgspec.structs import replace

from irtrace.trace.model import STATUS_OK, KernelRun, PassRecord
from irtrace.trace.summary import NEW_STAGE
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


@dataclass(frozen=True)
class GridRow:
    """One row of the table: the pass each lane ran at one point of the pipeline."""

    label: str
    """``name#N`` (bare when the name is unique) in the first lane that ran the pass."""
    records: tuple[PassRecord | None, ...]
    """Per lane, the pass on this row, or ``None`` where the lane ran none here."""
    depth: int
    """Nesting depth in the aligned tree."""


@dataclass(frozen=True)
class GridRows:
    rows: list[GridRow]
    approximate: bool
    """Some lane was paired greedily (``irtrace.diff.align.Alignment.approximate``)."""


def aligned_rows(runs: Sequence[KernelRun]) -> GridRows:
    """The lanes' passes on rows by place in the pipeline, with passdiff's tree alignment.

    Lanes are added one at a time: the rows so far, seen as a pipeline (each row's first pass,
    nested as the rows are), are aligned with the next lane by ``irtrace.diff.align_passes``; its
    shared and moved passes join their row, the others get new rows where the alignment puts
    them. With two lanes the rows are exactly ``align_passes(first, second)``.
    """
    from irtrace.diff import align_passes

    if not runs:
        return GridRows([], False)
    lanes = len(runs)
    first = runs[0]
    cells: list[list[PassRecord | None]] = [[record] + [None] * (lanes - 1) for record in first.passes]
    depths = [record.depth for record in first.passes]
    pipeline, row_of = first, {record.index: k for k, record in enumerate(first.passes)}
    approximate = False
    for lane in range(1, lanes):
        alignment = align_passes(pipeline, runs[lane])
        approximate = approximate or alignment.approximate
        next_cells: list[list[PassRecord | None]] = []
        next_depths: list[int] = []
        for pair in alignment:
            empty: list[PassRecord | None] = [None] * lanes
            row = cells[row_of[pair.a.index]] if pair.a is not None else empty
            row[lane] = pair.b
            next_cells.append(row)
            next_depths.append(pair.depth)
        cells, depths = next_cells, next_depths
        if lane + 1 < lanes:
            pipeline = _rows_as_run(first, cells, depths)
            row_of = {k: k for k in range(len(cells))}
    labels = [_labels(run) for run in runs]
    rows = []
    for row, depth in zip(cells, depths, strict=True):
        lane, record = next((k, r) for k, r in enumerate(row) if r is not None)
        rows.append(GridRow(labels[lane][record.index], tuple(row), depth))
    return GridRows(rows, approximate)


def _labels(run: KernelRun) -> dict[int, str]:
    return {entry.record.index: entry.label for entry in pass_entries(run)}


def _rows_as_run(first: KernelRun, cells: list[list[PassRecord | None]], depths: list[int]) -> KernelRun:
    """The rows so far as one pipeline: row k is pass k, its first lane's record, nested by depth."""
    parents: list[int] = []
    passes = []
    for k, (row, depth) in enumerate(zip(cells, depths, strict=True)):
        record = next(r for r in row if r is not None)
        del parents[depth:]
        parent = parents[-1] if parents else None
        passes.append(replace(record, index=k, parent=parent, depth=len(parents)))
        parents.append(k)
    return replace(first, passes=tuple(passes), status=STATUS_OK, error=None)


def pipeline_grid(
    runs: Sequence[KernelRun],
    counts: Callable[[KernelRun], LineCounts],
    link: Callable[[KernelRun, PassRecord], str],
) -> str:
    """The table for the runs of one kernel."""
    aligned = aligned_rows(runs)
    all_counts = [counts(run) for run in runs]

    def cell(lane: int, record: PassRecord | None) -> str:
        if record is None:
            return "<td></td>"
        run = runs[lane]
        if record.failed:
            return f"<td class='f'><a href='#{_e(link(run, record))}'>failed</a></td>"
        if record.changed:
            found = all_counts[lane].get(record.index)
            text = NEW_STAGE if found is None else f"+{found[0]} -{found[1]}"  # a new stage has no count
            return f"<td class='c'><a href='#{_e(link(run, record))}'>{text}</a></td>"
        return "<td class='u'></td>"

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

    for grid_row in aligned.rows:
        label = grid_row.label
        if not any(r is not None and (r.failed or r.changed) for r in grid_row.records):
            folded.append(label)
            continue
        fold()
        row = "".join(cell(lane, record) for lane, record in enumerate(grid_row.records))
        indent = f" style='padding-left:{6 + 12 * grid_row.depth}px'" if grid_row.depth else ""
        body.append(f"<tr><th class='p'{indent} title='{_e(label)}'>{_e(label)}</th>{row}</tr>")
    fold()
    if not aligned.rows:
        body.append("<tr><th class='p'>no pass ran</th>" + "<td></td>" * len(runs) + "</tr>")
    note = (
        "<p class='note'>These lanes differ in so many passes that their rows were paired greedily by "
        "name; some passes both ran may sit on rows of their own.</p>"
        if aligned.approximate
        else ""
    )
    return (
        f"{note}<div class='grid'><table><thead><tr><th class='p'>pass</th>{head}</tr></thead>"
        f"<tbody>{''.join(body)}</tbody></table></div>"
    )
