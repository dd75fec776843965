"""Pictures of recorded layouts: which thread holds each element of a fragment, which bank each
element of a shared-memory layout falls in. Read from a trace's ``BufferLayout`` only (never
TileLang), so passviz, the report and the language server draw the same picture.

A buffer is drawn as a 2-D grid of its elements: the last dimension across, every earlier
dimension flattened into rows, row-major (a ``[3, 128, 32]`` stage buffer is 384 rows of 32, the
way TileLang's own plotter shows it). Only the cells inside the crop are ever computed, so a
hostile trace's billion-element shape costs no more than the crop.
"""

from __future__ import annotations

import colorsys
import html
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

from irtrace.base.errors import ExitCode, IrtraceError, UsageError
from irtrace.base.safe_text import terminal_safe
from irtrace.facts.layout_eval import LayoutExpressionError, forward_index, forward_thread
from irtrace.trace.schema import BufferLayout

MAX_CELLS = 65_536
"""The most cells one picture computes (a 256 x 256 crop); a larger crop is refused."""
DEFAULT_SPAN = 128
"""Rows and columns drawn when no crop is given: a 128 x 128 fragment is drawn whole."""
MAX_REPLICAS_SHOWN = 64
"""Threads listed per replicated element; a larger replication is counted, not enumerated."""
BANKS = 32
BANK_BYTES = 4
LABELLED_SPAN = 64
"""Crops of at most this many rows and columns get labelled cells; larger ones an overview."""


class LayoutDrawingError(IrtraceError):
    """A layout that cannot be drawn: a symbolic shape, or expressions that do not evaluate."""

    exit_code = ExitCode.TRACE_FORMAT


@dataclass(frozen=True)
class LayoutCell:
    """One element of the grid."""

    row: int
    col: int
    coords: tuple[int, ...]
    """the element's coordinates in the buffer (the layout's input)"""
    threads: tuple[int, ...] = ()
    """fragment: the threads holding it, replica 0 first (at most ``MAX_REPLICAS_SHOWN``)"""
    local: int | None = None
    """fragment: its index in each holding thread's registers (output coordinates flattened)"""
    offset: int | None = None
    """shared layout: its linear element offset in the output (physical) shape"""
    bank: int | None = None
    """shared layout: the 4-byte bank its first byte falls in"""


@dataclass(frozen=True)
class LayoutGrid:
    """The cells of one crop of a layout, with what a legend needs to describe them."""

    layout: BufferLayout
    rows: int
    """rows of the whole 2-D view"""
    cols: int
    row_range: range
    col_range: range
    cells: tuple[LayoutCell, ...]
    """row-major over the crop"""
    replicas: int
    """fragment: threads per element (1 when not replicated)"""
    conflicts: dict[int, int]
    """shared layout: row -> ways of the worst bank conflict when 8 consecutive rows (the group
    the row is in) read the same 16-byte column, as ``ldmatrix`` does; only rows with a conflict"""

    @property
    def is_fragment(self) -> bool:
        return self.layout.kind == "fragment"

    @property
    def cropped(self) -> bool:
        return len(self.row_range) < self.rows or len(self.col_range) < self.cols


def _static(dims: Sequence[int | str], what: str, layout: BufferLayout) -> list[int]:
    values: list[int] = []
    for dim in dims:
        if not isinstance(dim, int) or isinstance(dim, bool):
            raise LayoutDrawingError(f"{_name(layout)} has a symbolic {what} {list(dims)!r}: nothing to draw")
        if dim < 0:
            raise LayoutDrawingError(f"{_name(layout)} has a negative {what} {list(dims)!r}")
        values.append(dim)
    return values


def _name(layout: BufferLayout) -> str:
    return terminal_safe(layout.buffer, newlines=False)


def grid_size(layout: BufferLayout) -> tuple[int, int]:
    """(rows, columns) of the 2-D view: the last dimension across, the others flattened into rows."""
    dims = _static(layout.input_shape, "shape", layout)
    if not dims:
        return 1, 1
    return math.prod(dims[:-1]), dims[-1]


def parse_span(text: str | None, size: int, what: str) -> range:
    """``A:B`` (or ``A`` for one, ``A:`` to the end) as a range clipped to ``size``; None: from 0."""
    if text is None:
        return range(min(size, DEFAULT_SPAN))
    match = re.fullmatch(r"\s*(\d*)\s*(:\s*(\d*))?\s*", text)
    if match is None or (not match.group(1) and not match.group(3) and match.group(2) is None):
        raise UsageError(f"--{what} {text!r}: expected START:STOP (for example 0:32)")
    start = int(match.group(1) or 0)
    stop = int(match.group(3)) if match.group(3) else (size if match.group(2) else start + 1)
    start, stop = min(start, size), min(stop, size)
    if stop <= start:
        raise UsageError(f"--{what} {text!r} selects nothing of the {size} {what} there are")
    return range(start, stop)


def element_bits(dtype: str) -> int:
    """Bits per element of a TileLang dtype (``float16`` 16, ``float8_e4m3`` 8, ``bool`` 8)."""
    match = re.search(r"(\d+)", dtype)
    if dtype.startswith("bool") or match is None:
        return 8
    lanes = re.search(r"x(\d+)$", dtype)
    return int(match.group(1)) * (int(lanes.group(1)) if lanes else 1)


def bank_of(offset: int, bits: int) -> int:
    """The bank of the element at linear ``offset``: 32 banks of 4 bytes."""
    return (offset * bits // (8 * BANK_BYTES)) % BANKS


def _ravel(index: Sequence[int], shape: Sequence[int]) -> int:
    flat = 0
    for value, dim in zip(index, shape, strict=False):
        flat = flat * dim + value
    return flat


def _coords(row: int, col: int, dims: Sequence[int]) -> tuple[int, ...]:
    if not dims:
        return ()
    leading: list[int] = []
    for dim in reversed(dims[:-1]):
        row, rest = divmod(row, dim) if dim else (row, 0)
        leading.append(rest)
    return (*reversed(leading), col)


def layout_grid(layout: BufferLayout, rows: range | None = None, cols: range | None = None) -> LayoutGrid:
    """The cells of ``layout`` in the crop (the first ``DEFAULT_SPAN`` rows and columns by default)."""
    total_rows, total_cols = grid_size(layout)
    row_range = rows if rows is not None else range(min(total_rows, DEFAULT_SPAN))
    col_range = cols if cols is not None else range(min(total_cols, DEFAULT_SPAN))
    row_range = range(max(row_range.start, 0), min(row_range.stop, total_rows))
    col_range = range(max(col_range.start, 0), min(col_range.stop, total_cols))
    if len(row_range) * len(col_range) > MAX_CELLS:
        raise UsageError(
            f"a crop of {len(row_range)} x {len(col_range)} cells is too large to draw "
            f"(at most {MAX_CELLS}); choose a smaller --rows/--cols"
        )
    dims = _static(layout.input_shape, "shape", layout)
    fragment = layout.kind == "fragment"
    replicas = 1
    if fragment:
        replicas = layout.replicate if isinstance(layout.replicate, int) and layout.replicate > 1 else 1
    out_dims = _static(layout.output_shape, "output shape", layout)
    bits = element_bits(layout.dtype)
    cells: list[LayoutCell] = []
    try:
        for row in row_range:
            for col in col_range:
                coords = _coords(row, col, dims)
                local = _ravel(forward_index(layout, coords, 0), out_dims)
                if fragment:
                    threads = tuple(
                        forward_thread(layout, coords, rep)
                        for rep in range(min(replicas, MAX_REPLICAS_SHOWN))
                    )
                    cells.append(LayoutCell(row, col, coords, threads=threads, local=local))
                else:
                    cells.append(LayoutCell(row, col, coords, offset=local, bank=bank_of(local, bits)))
    except (LayoutExpressionError, RecursionError) as error:
        raise LayoutDrawingError(f"{_name(layout)}: its layout cannot be evaluated: {error}") from None
    conflicts = {} if fragment else _conflicts(cells, row_range, col_range, bits)
    return LayoutGrid(layout, total_rows, total_cols, row_range, col_range, tuple(cells), replicas, conflicts)


def _conflicts(cells: Sequence[LayoutCell], rows: range, cols: range, bits: int) -> dict[int, int]:
    """Rows in a group of 8 whose 16-byte columns (8 rows x 16 B, an ``ldmatrix`` read) put
    several distinct 4-byte words in one bank: row -> the worst such count (the conflict's ways)."""
    per_chunk = max(1, 128 // max(bits, 1))
    width = len(cols)
    found: dict[int, int] = {}
    for group_start in range(rows.start - rows.start % 8, rows.stop, 8):
        group = [r for r in range(group_start, group_start + 8) if r in rows]
        worst = 1
        for chunk_start in range(cols.start - cols.start % per_chunk, cols.stop, per_chunk):
            words: dict[int, set[int]] = {}
            for r in group:
                base = (r - rows.start) * width
                for c in range(max(chunk_start, cols.start), min(chunk_start + per_chunk, cols.stop)):
                    offset = cells[base + c - cols.start].offset
                    if offset is not None:
                        word = offset * bits // (8 * BANK_BYTES)
                        words.setdefault(word % BANKS, set()).add(word)
            if words:
                worst = max(worst, max(len(held) for held in words.values()))
        if worst > 1:
            found.update((r, worst) for r in group)
    return found


# --- colours -------------------------------------------------------------------------------------


def _hex(hue: float, lightness: float, saturation: float) -> str:
    red, green, blue = colorsys.hls_to_rgb(hue % 1.0, lightness, saturation)
    return f"#{round(red * 255):02x}{round(green * 255):02x}{round(blue * 255):02x}"


def thread_colour(thread: int) -> str:
    """Neighbouring threads far apart in hue (golden-angle steps); warps alternate in lightness."""
    return _hex(thread * 0.381966, 0.80 if (thread // 32) % 2 == 0 else 0.68, 0.70)


def bank_colour(bank: int) -> str:
    """32 distinct hues, neighbouring banks far apart."""
    return _hex((bank * 11 % BANKS) / BANKS, 0.76, 0.72)


# --- text for titles and legends -----------------------------------------------------------------


def describe(grid: LayoutGrid) -> list[str]:
    """Title lines: the buffer, what the cells show, and the crop."""
    layout = grid.layout
    head = (
        f"{layout.buffer} · {layout.scope} {layout.dtype} {list(layout.input_shape)} · "
        f"{'Fragment' if grid.is_fragment else 'Layout'}: {layout.summary}"
    )
    lines = [head]
    if grid.is_fragment:
        offset = layout.thread_offset if isinstance(layout.thread_offset, int) else 0
        lines.append(
            f"cell: T thread (0 to {_count(layout.threads) - 1}; threadIdx.x = T + {offset}), "
            f"L local index"
            + (f"; each element held by {grid.replicas} threads" if grid.replicas > 1 else "")
        )
    else:
        lines.append(
            f"cell: B bank (32 banks of 4 bytes) of @ the element's offset in the output shape "
            f"{list(layout.output_shape)} ({element_bits(layout.dtype)}-bit elements)"
        )
    if len(layout.input_shape) > 2:
        lines.append(f"rank {len(layout.input_shape)}: the leading dimensions are flattened into rows")
    if grid.cropped:
        lines.append(
            f"rows {grid.row_range.start}-{grid.row_range.stop - 1} of {grid.rows}, "
            f"columns {grid.col_range.start}-{grid.col_range.stop - 1} of {grid.cols}"
        )
    return [terminal_safe(line, newlines=False) for line in lines]


def _count(value: int | None) -> int:
    return value if isinstance(value, int) and value > 0 else 0


def thread_label(cell: LayoutCell, replicas: int) -> str:
    """``T5``, or ``T0,32`` / ``T0,32,64+1`` for replicated elements."""
    if len(cell.threads) <= 1 and replicas <= 1:
        return f"T{cell.threads[0]}" if cell.threads else "T?"
    shown = ",".join(str(t) for t in cell.threads[:3])
    more = replicas - min(len(cell.threads), 3)
    return f"T{shown}" + (f"+{more}" if more > 0 else "")


# --- SVG ----------------------------------------------------------------------------------------

_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff\ufffe\uffff]")


_BOLD = ' font-weight="bold"'


def _x(text: object) -> str:
    """Text for an SVG attribute or element: escaped, and no character XML forbids."""
    return html.escape(_CONTROL.sub(lambda m: repr(m.group())[1:-1], str(text)), quote=True)


def layout_svg(grid: LayoutGrid, *, labelled: bool | None = None, ids: str = "") -> str:
    """The grid as standalone SVG. Each cell is a ``rect`` carrying ``data-row``, ``data-col`` and
    ``data-thread``/``data-local`` (fragments, with ``data-threads`` and ``data-replicas`` when
    replicated) or ``data-bank``/``data-offset`` (shared layouts). ``ids`` prefixes the one ``id``
    it defines, so several drawings can sit in one HTML page."""
    n_rows, n_cols = len(grid.row_range), len(grid.col_range)
    if labelled is None:
        labelled = n_rows <= LABELLED_SPAN and n_cols <= LABELLED_SPAN
    width, height = (40, 26) if labelled else (6, 6)
    if labelled and grid.replicas > 1:
        width = 64
    left, titles = 44, describe(grid)
    top = 18 * len(titles) + 24
    margin = 70 if grid.conflicts else 10
    legend_top = top + n_rows * height + 16
    legend = _legend_items(grid)
    per_line = max(1, (left + n_cols * width + margin) // 70)
    legend_rows = math.ceil(len(legend) / per_line) if legend else 0
    total_w = max(left + n_cols * width + margin, 520)
    total_h = legend_top + 22 * (legend_rows + 1) + 10
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{total_w}" height="{total_h}" '
        f'viewBox="0 0 {total_w} {total_h}" font-family="monospace" font-size="10" '
        f'data-buffer="{_x(grid.layout.buffer)}" data-kind="{_x(grid.layout.kind)}">',
        f'<defs><pattern id="{_x(ids)}rep" width="6" height="6" patternUnits="userSpaceOnUse" '
        'patternTransform="rotate(45)"><line x1="0" y1="0" x2="0" y2="6" stroke="#000" '
        'stroke-opacity="0.25" stroke-width="2"/></pattern></defs>',
        f"<title>{_x(titles[0])}</title>",
    ]
    out += [
        f'<text x="4" y="{16 + 18 * i}" font-size="{13 if i == 0 else 11}"{_BOLD if i == 0 else ""}>'
        f"{_x(line)}</text>"
        for i, line in enumerate(titles)
    ]
    step = 1 if labelled else 8
    for i, col in enumerate(grid.col_range):
        if col % step == 0 or i == 0:
            out.append(f'<text x="{left + i * width + 1}" y="{top - 4}" fill="#666">{col}</text>')
    for i, row in enumerate(grid.row_range):
        if row % step == 0 or i == 0:
            out.append(
                f'<text x="{left - 4}" y="{top + i * height + min(height, 14) - 3}" text-anchor="end" '
                f'fill="#666">{row}</text>'
            )
    out.append(f'<g stroke="#fff" stroke-width="{0.5 if labelled else 0.2}">')
    for index, cell in enumerate(grid.cells):
        x = left + (index % n_cols) * width
        y = top + (index // n_cols) * height
        out.append(_cell_svg(grid, cell, x, y, width, height, labelled, ids))
    out.append("</g>")
    for i, row in enumerate(grid.row_range):
        ways = grid.conflicts.get(row)
        if ways:
            y = top + i * height
            out.append(
                f'<text x="{left + n_cols * width + 4}" y="{y + min(height, 14) - 3}" fill="#c62828" '
                f'data-conflict-row="{row}" data-ways="{ways}">{ways}-way</text>'
            )
    out += _legend_svg(legend, legend_top, per_line)
    out.append("</svg>")
    return "\n".join(out)


def _cell_svg(
    grid: LayoutGrid, cell: LayoutCell, x: int, y: int, w: int, h: int, labelled: bool, ids: str
) -> str:
    attrs = f'data-row="{cell.row}" data-col="{cell.col}"'
    if len(cell.coords) != 2:
        attrs += f' data-coords="{",".join(map(str, cell.coords))}"'
    if grid.is_fragment:
        fill = thread_colour(cell.threads[0]) if cell.threads else "#eee"
        attrs += f' data-thread="{cell.threads[0] if cell.threads else ""}" data-local="{cell.local}"'
        if grid.replicas > 1:
            attrs += f' data-threads="{" ".join(map(str, cell.threads))}" data-replicas="{grid.replicas}"'
        lines = [thread_label(cell, grid.replicas), f"L{cell.local}"]
    else:
        fill = bank_colour(cell.bank or 0)
        attrs += f' data-bank="{cell.bank}" data-offset="{cell.offset}"'
        lines = [f"B{cell.bank}", f"@{cell.offset}"]
    parts = [f'<rect x="{x}" y="{y}" width="{w}" height="{h}" fill="{fill}" {attrs}/>']
    if grid.replicas > 1:
        parts.append(
            f'<rect x="{x}" y="{y}" width="{w}" height="{h}" fill="url(#{_x(ids)}rep)" stroke="none"/>'
        )
    if labelled:
        parts.append(
            f'<text x="{x + 2}" y="{y + 11}" stroke="none">{_x(lines[0])}'
            f'<tspan x="{x + 2}" dy="11">{_x(lines[1])}</tspan></text>'
        )
    return "".join(parts)


def _legend_items(grid: LayoutGrid) -> list[tuple[str, str]]:
    if grid.is_fragment:
        threads = sorted({cell.threads[0] for cell in grid.cells if cell.threads})
        shown = threads[:128]
        items = [(thread_colour(t), f"T{t}") for t in shown]
        if len(threads) > len(shown):
            items.append(("#fff", f"+{len(threads) - len(shown)} more"))
        return items
    return [(bank_colour(b), f"bank {b}") for b in range(BANKS)]


def _legend_svg(items: list[tuple[str, str]], top: int, per_line: int) -> list[str]:
    out = [f'<g data-legend="1"><text x="4" y="{top + 10}" fill="#666">legend</text>']
    for i, (fill, label) in enumerate(items):
        x = 4 + (i % per_line) * 70
        y = top + 22 * (i // per_line + 1)
        out.append(
            f'<rect x="{x}" y="{y}" width="14" height="14" fill="{fill}" stroke="#999" stroke-width="0.5"/>'
            f'<text x="{x + 18}" y="{y + 11}">{_x(label)}</text>'
        )
    out.append("</g>")
    return out
