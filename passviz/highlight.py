"""Syntax highlighting one line at a time, so a view pays only for the lines on screen.

On top of Pygments' colours, tile operators, synchronization and lowered hardware intrinsics get
their own (``passviz.semantics``), as in TileLang's Pass Visualizer.
"""

from __future__ import annotations

from functools import lru_cache

from pygments.lexer import Lexer
from pygments.lexers import get_lexer_by_name
from pygments.token import _TokenType
from rich.style import Style
from rich.syntax import PygmentsSyntaxTheme
from rich.text import Text

from passviz.semantics import CATEGORIES, semantic_spans

THEME = "monokai"
SEMANTIC_STYLES = {category.name: Style(color=category.colour, bold=True) for category in CATEGORIES}


class LineHighlighter:
    """Highlights single lines with Pygments, without a background so diff colours show through.

    Highlighting line by line loses multi-line strings, which TVMScript and kernel sources hardly
    use; in exchange a 50,000-line IR costs only its visible lines.
    """

    def __init__(self, language: str) -> None:
        self.language = language
        self._lexer: Lexer = get_lexer_by_name(language, stripnl=False, ensurenl=False)
        self._theme = PygmentsSyntaxTheme(THEME)
        self._styles: dict[_TokenType, Style] = {}
        self._cache: dict[str, Text] = {}

    def _style(self, token: _TokenType) -> Style:
        style = self._styles.get(token)
        if style is None:
            full = self._theme.get_style_for_token(token)
            style = Style(color=full.color, bold=full.bold, italic=full.italic)
            self._styles[token] = style
        return style

    def highlight(self, line: str) -> Text:
        cached = self._cache.get(line)
        if cached is not None:
            return cached
        text = Text(no_wrap=True, end="")
        for token, value in self._lexer.get_tokens(line):
            text.append(value.replace("\n", ""), self._style(token))
        for start, end, category in semantic_spans(line):
            text.stylize(SEMANTIC_STYLES[category], start, end)
        if len(self._cache) > 20_000:
            self._cache.clear()
        self._cache[line] = text
        return text


@lru_cache(maxsize=8)
def highlighter(language: str) -> LineHighlighter:
    """One shared highlighter per language."""
    return LineHighlighter(language)
