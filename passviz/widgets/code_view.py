"""A virtualised, syntax-highlighted view of IR text or of a diff.

Only the rows on screen are highlighted and rendered (Textual's line API), so an IR of tens of
thousands of lines scrolls as fast as a short one. Rows come from a sequence that may build them
on demand; see ``IrRows``, ``UnifiedRows`` and ``SideBySideRows``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, overload

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual import events
from textual.geometry import Size
from textual.message import Message
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

from passviz.highlight import highlighter

INSERT_BG = Style(bgcolor="#15391f")
DELETE_BG = Style(bgcolor="#45181d")
REINDENT_BG = Style(bgcolor="#3a3413")
MARK_BG = Style(bgcolor="#26364f")
"""Source lines that the IR lines on screen came from."""
INSERT_WORD_BG = Style(bgcolor="#2b7a3e")
DELETE_WORD_BG = Style(bgcolor="#8c2c36")
NOTE_STYLE = Style(color="#9a9a9a", italic=True)
GUTTER_STYLE = Style(color="#6c6c6c")
SEPARATOR_STYLE = Style(color="#4a4a4a")
SOURCE_STYLE = Style(color="#5f87af")
MARKERS = {"insert": "+", "delete": "-", "reindent": "~"}
BACKGROUNDS = {"insert": INSERT_BG, "delete": DELETE_BG, "reindent": REINDENT_BG}


@dataclass(frozen=True)
class Cell:
    """One column of one row: line numbers, text and how it differs."""

    kind: str
    """``text`` (plain IR), ``equal``, ``insert``, ``delete``, ``reindent``, ``blank`` or ``note``."""
    numbers: tuple[int | None, ...]
    text: str
    changed_spans: tuple[tuple[int, int], ...] = ()
    """Character ranges a word diff marks as changed within the line."""
    source_no: int | None = None
    """1-based line of the kernel source this IR line came from (when the source is shown)."""


Row = tuple[Cell, ...]
"""One cell, or two for side by side."""


class RowSource(Sequence[Row]):
    """Rows built only when looked at: ``CodeView`` asks for the visible ones alone."""

    columns = 1
    numbered = 1
    """How many line-number gutters a cell shows."""

    def __init__(self, items: Sequence[Any]) -> None:
        self.items = items

    def __len__(self) -> int:
        return len(self.items)

    @overload
    def __getitem__(self, index: int) -> Row: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[Row]: ...
    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        return self.row(index)

    def row(self, index: int) -> Row:
        raise NotImplementedError


class IrRows(RowSource):
    """An IR text as numbered rows; with ``source_lines``, each row names the source line it came from."""

    def __init__(self, text: str, source_lines: Sequence[int | None] | None = None) -> None:
        super().__init__(text.splitlines())
        self.source_lines = source_lines

    @property
    def mapped(self) -> bool:
        return self.source_lines is not None

    def row(self, index: int) -> Row:
        source = self.source_lines[index] if self.source_lines is not None else None
        return (Cell("text", (index + 1,), self.items[index], source_no=source),)


class UnifiedRows(RowSource):
    """passdiff's diff lines, with old and new line numbers (a re-indented line shows both)."""

    numbered = 2

    def row(self, index: int) -> Row:
        line = self.items[index]
        return (Cell(line.kind, (line.old_no, line.new_no), line.text),)


@dataclass(frozen=True)
class NoteItem:
    """A line of explanation among side-by-side rows: why the pair below has no word highlights."""

    text: str
    kind: str = "note"


class SideBySideRows(RowSource):
    """passdiff's side-by-side rows; replaced lines get a word diff when first shown.

    A pair of lines too long to compare word by word gets a note row above it, placed when the
    rows are made (a cheap check for lines of usual length) so the row count never changes.
    """

    columns = 2

    def __init__(self, rows: Sequence[Any]) -> None:
        from irtrace.diff.textdiff import word_diff_skipped

        items: list[Any] = []
        for row in rows:
            if row.kind == "replace" and row.old_text is not None and row.new_text is not None:
                note = word_diff_skipped(row.old_text, row.new_text)
                if note is not None:
                    items.append(NoteItem(note))
            items.append(row)
        super().__init__(items)
        self._built: dict[int, Row] = {}

    def row(self, index: int) -> Row:
        built = self._built.get(index)
        if built is None:
            built = self._built[index] = self._build(self.items[index])
        return built

    @staticmethod
    def _build(row: Any) -> Row:
        if isinstance(row, NoteItem):
            return (Cell("note", (), row.text),)
        old_kind, new_kind = {
            "equal": ("equal", "equal"),
            "replace": ("delete", "insert"),
            "delete": ("delete", "blank"),
            "insert": ("blank", "insert"),
            "reindent": ("reindent", "reindent"),
        }[row.kind]
        if row.old_text is None:
            old_kind = "blank"
        if row.new_text is None:
            new_kind = "blank"
        old_spans: list[tuple[int, int]] = []
        new_spans: list[tuple[int, int]] = []
        if row.kind == "replace" and row.old_text is not None and row.new_text is not None:
            from irtrace.diff.textdiff import diff_words

            old_at = new_at = 0
            words = diff_words(row.old_text, row.new_text)
            # A skipped word diff has a note row above; the lines are shown without highlights.
            for kind, fragment in () if words.skipped else words.pieces:
                size = len(fragment)
                if kind in ("equal", "delete", "replace"):
                    if kind != "equal":
                        old_spans.append((old_at, old_at + size))
                    old_at += size
                if kind in ("equal", "insert", "replace"):
                    if kind != "equal":
                        new_spans.append((new_at, new_at + size))
                    new_at += size
        return (
            Cell(old_kind, (row.old_no,), row.old_text or "", tuple(old_spans)),
            Cell(new_kind, (row.new_no,), row.new_text or "", tuple(new_spans)),
        )


class NoteRows(RowSource):
    """A few lines of explanation in place of IR (no diff, still computing)."""

    numbered = 0

    def __init__(self, *lines: str) -> None:
        super().__init__(lines)

    def row(self, index: int) -> Row:
        return (Cell("note", (), self.items[index]),)


class CodeView(ScrollView, can_focus=True):
    """Shows rows of IR or diff; highlights and renders only what is on screen."""

    DEFAULT_CSS = """
    CodeView { background: $surface; }
    """

    language: reactive[str] = reactive("python")
    """Pygments lexer name for the text."""

    @dataclass
    class Scrolled(Message):
        """The view scrolled vertically (the source pane follows)."""

        view: CodeView

    @dataclass
    class Clicked(Message):
        """A row was clicked (the source pane picks that line)."""

        view: CodeView
        row: int
        """0-based row"""

    def on_click(self, event: events.Click) -> None:
        row = round(self.scroll_offset.y) + event.y
        if 0 <= row < len(self._rows):
            self.post_message(self.Clicked(self, row))

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._rows: Sequence[Row] = NoteRows()
        self._max_text = 0
        self._digits = 1
        self.marked: frozenset[int] = frozenset()
        """0-based rows drawn with a highlighted background."""

    # ------------------------------------------------------------------ content

    def show(self, rows: Sequence[Row], language: str = "python", *, keep_scroll: bool = False) -> None:
        """Replace the content; ``keep_scroll`` keeps the position (same pass on another target)."""
        self._rows = rows
        self.marked = frozenset()
        self.language = language
        texts = _row_texts(rows)
        self._max_text = max((len(t) for t in texts), default=0)
        largest = max((n for row in _sample_numbers(rows) for n in row if n), default=len(rows))
        self._digits = len(str(max(largest, len(rows), 1)))
        self._update_virtual_size()
        if not keep_scroll:
            self.scroll_to(0, 0, animate=False, immediate=True)
        self.refresh()

    def mark(self, rows: frozenset[int], scroll_to: int | None = None) -> None:
        """Highlight ``rows`` and bring ``scroll_to`` near the top."""
        self.marked = rows
        if scroll_to is not None:
            self.scroll_to(y=max(0, scroll_to - 2), animate=False, immediate=True)
        self.refresh()

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        super().watch_scroll_y(old_value, new_value)
        if round(old_value) != round(new_value):
            self.post_message(self.Scrolled(self))

    @property
    def visible_rows(self) -> range:
        """Indexes of the rows on screen."""
        top = round(self.scroll_offset.y)
        return range(top, min(len(self._rows), top + max(1, self.scrollable_content_region.height)))

    @property
    def rows(self) -> Sequence[Row]:
        return self._rows

    @property
    def row_count(self) -> int:
        return len(self._rows)

    @property
    def kind(self) -> str:
        return type(self._rows).__name__

    @property
    def document_text(self) -> str:
        """The content as plain text (IR as is; diffs with +/- markers; side by side with ' | ')."""
        rows = self._rows
        if isinstance(rows, IrRows):
            return "\n".join(rows.items)
        out = []
        for row in rows:
            out.append(" | ".join(MARKERS.get(cell.kind, " ") + cell.text for cell in row))
        return "\n".join(out)

    # ------------------------------------------------------------------ rendering

    def _gutter_width(self) -> int:
        numbered = getattr(self._rows, "numbered", 1)
        mapped = SOURCE_GUTTER if getattr(self._rows, "mapped", False) else 0
        return numbered * (self._digits + 1) + 2 + mapped if numbered else 1

    def _update_virtual_size(self) -> None:
        columns = getattr(self._rows, "columns", 1)
        gutter = self._gutter_width()
        if columns == 1:
            width = gutter + self._max_text
        else:
            half = max(1, (self.scrollable_content_region.width - 1) // 2)
            width = self.scrollable_content_region.width + max(0, gutter + self._max_text - half)
        self.virtual_size = Size(width, len(self._rows))

    def on_resize(self) -> None:
        self._update_virtual_size()

    def render_line(self, y: int) -> Strip:
        scroll_x, scroll_y = self.scroll_offset
        index = scroll_y + y
        width = self.scrollable_content_region.width
        base = self.rich_style
        if index >= len(self._rows) or width <= 0:
            return Strip.blank(width, base)
        row = self._rows[index]
        if len(row) == 1:
            segments = self._render_cell(row[0], width, scroll_x)
            if index in self.marked:
                segments = list(Segment.apply_style(segments, MARK_BG))
        else:
            half = (width - 1) // 2
            segments = [
                *self._render_cell(row[0], half, scroll_x),
                Segment("│", SEPARATOR_STYLE),
                *self._render_cell(row[1], width - 1 - half, scroll_x),
            ]
        return Strip(Segment.apply_style(segments, base), width)

    def _render_cell(self, cell: Cell, width: int, scroll_x: int) -> list[Segment]:
        if width <= 0:
            return []
        if cell.kind == "note":
            text = Text(cell.text, style=NOTE_STYLE, end="", no_wrap=True)
            return Segment.adjust_line_length(list(text.render(self.app.console)), width)
        digits = self._digits
        gutter = " ".join(f"{'' if n is None else n:>{digits}}" for n in cell.numbers)
        marker = MARKERS.get(cell.kind, " ")
        gutter = f"{gutter} {marker} " if cell.numbers else f"{marker}"
        source = ""
        if getattr(self._rows, "mapped", False):
            source = f"{'' if cell.source_no is None else f'L{cell.source_no}':>{SOURCE_GUTTER - 1}} "
        background = BACKGROUNDS.get(cell.kind)
        content_width = max(0, width - len(gutter) - len(source))
        if cell.kind == "blank":
            content = Text("", end="")
        else:
            content = highlighter(self.language).highlight(cell.text)
            if cell.changed_spans:
                content = content.copy()
                strong = DELETE_WORD_BG if cell.kind == "delete" else INSERT_WORD_BG
                for start, end in cell.changed_spans:
                    content.stylize(strong, start, end)
        visible = (
            content[scroll_x : scroll_x + content_width]
            if scroll_x or len(content) > content_width
            else content
        )
        segments = [
            Segment(gutter[:width], GUTTER_STYLE),
            *([Segment(source, SOURCE_STYLE)] if source else []),
            *visible.render(self.app.console),
        ]
        segments = Segment.adjust_line_length(segments, width)
        if background is not None:
            segments = list(Segment.apply_style(segments, background))
        return segments


SOURCE_GUTTER = 6
"""Width of the ``L31`` column that names an IR line's source line."""


def _row_texts(rows: Sequence[Row]) -> list[str]:
    if isinstance(rows, IrRows):
        return list(rows.items)
    if isinstance(rows, UnifiedRows):
        return [line.text for line in rows.items]
    if isinstance(rows, SideBySideRows):
        return [
            r.text if isinstance(r, NoteItem) else max(r.old_text or "", r.new_text or "", key=len)
            for r in rows.items
        ]
    return [cell.text for row in rows for cell in row]


def _sample_numbers(rows: Sequence[Row]) -> list[tuple[int | None, ...]]:
    """Line numbers of the last rows: the widest ones, without building every row."""
    if not len(rows):
        return []
    return [cell.numbers for row in rows[max(0, len(rows) - 3) :] for cell in row]
