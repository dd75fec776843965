"""``irtrace matrix`` on a terminal: a table that fits the console's width without cutting a name.

Cells are short (``ok``, ``✗3``: failed, cause 3 in the legend below; ``…3``: cut short) so the
pass names live once in the legend. Kernels are rows and targets columns, grouped by vendor,
when that fits; otherwise the table is turned (targets as rows, grouped by vendor; kernels as
columns with their names broken at ``_``), since the target list is long and fixed while a
coverage run has few kernels.
"""

from __future__ import annotations

from rich.console import Console, Group, RenderableType
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from irtrace.ci.coverage import CUT_SHORT, OK, CoverageMatrix
from irtrace.targets.backends import TARGETS

NOT_RECORDED = "·"


def short_cell(matrix: CoverageMatrix, kernel: str, target: str) -> str:
    """``ok``, ``✗N`` (failed, cause N), ``…N`` (recording cut short) or ``·`` (not recorded)."""
    cell = matrix.cells.get((kernel, target))
    if cell is None:
        return NOT_RECORDED
    if cell.status == OK:
        return OK
    return f"{'…' if cell.status == CUT_SHORT else '✗'}{cell.cause}"


def _styled(text: str) -> str:
    if text == OK:
        return "[green]ok[/green]"
    if text == NOT_RECORDED:
        return f"[dim]{NOT_RECORDED}[/dim]"
    return f"[red]{escape(text)}[/red]"


def _vendor(target: str) -> str:
    spec = TARGETS.get(target)
    return spec.vendor if spec is not None else "other"


def _broken_name(name: str) -> str:
    """A kernel name as a column heading: broken after each ``_`` so long names stay narrow."""
    return name.replace("_", "_\n")


# Columns fold rather than end in "…" if the table is still too wide: a cut name is ambiguous.


def kernels_by_targets(matrix: CoverageMatrix) -> Table:
    """Kernels as rows, targets as columns in vendor order (the table people expect)."""
    table = Table(box=None, pad_edge=False, show_edge=False, collapse_padding=True)
    table.add_column("kernel", overflow="fold")
    for target in matrix.targets:
        table.add_column(escape(target), overflow="fold")
    for kernel in matrix.kernels:
        table.add_row(escape(kernel), *(_styled(short_cell(matrix, kernel, t)) for t in matrix.targets))
    return table


def targets_by_kernels(matrix: CoverageMatrix) -> Table:
    """Targets as rows grouped by vendor (a rule between vendors), kernels as columns."""
    table = Table(box=None, pad_edge=False, show_edge=False, collapse_padding=True)
    table.add_column("vendor", overflow="fold", style="bold")
    table.add_column("target", overflow="fold")
    for kernel in matrix.kernels:
        table.add_column(escape(_broken_name(kernel)), overflow="fold", vertical="bottom")
    for position, target in enumerate(matrix.targets):
        vendor = _vendor(target)
        first = position == 0 or _vendor(matrix.targets[position - 1]) != vendor
        last = position == len(matrix.targets) - 1 or _vendor(matrix.targets[position + 1]) != vendor
        cells = (_styled(short_cell(matrix, k, target)) for k in matrix.kernels)
        table.add_row(escape(vendor) if first else "", escape(target), *cells, end_section=last)
    return table


def _fits(console: Console, table: Table) -> bool:
    # measured without the console's width, which rich would clamp the measurement to
    unbounded = console.options.update_width(1_000_000)
    return console.measure(table, options=unbounded).maximum <= console.width


def matrix_renderable(matrix: CoverageMatrix, console: Console) -> RenderableType:
    """The table that fits ``console``'s width, then one legend line per root cause."""
    table = kernels_by_targets(matrix)
    if not _fits(console, table):
        table = targets_by_kernels(matrix)
    legend: list[RenderableType] = [
        Text("ok: lowered   ✗N: failed, cause N below   …N: cut short   ·: not recorded", style="dim")
    ]
    for cause in matrix.causes:
        where = cause.failed_pass or "building the kernel"
        legend.append(
            Text.from_markup(
                f"[red]({cause.number})[/red] {escape(where)}: {escape(cause.headline)} x{len(cause.cells)}"
            )
        )
    return Group(table, *legend)
