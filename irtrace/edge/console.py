"""The rich console every command line prints with: trace text on it cannot drive the terminal.

Imported only by the command lines, inside their functions (the core never imports rich).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable
from typing import Any

from rich.console import Console, ConsoleOptions, RenderableType
from rich.segment import Segment
from rich.text import Text

from irtrace.base.safe_text import terminal_safe


class SafeConsole(Console):
    """A rich ``Console`` that shows control characters as escapes (``terminal_safe``).

    Strings are made safe before rich lays them out (so tables keep their widths); every segment
    of text is checked again on its way out, which covers ``Text`` objects built by callers. The
    style codes rich adds itself are not text segments and pass. A reader that went away
    (``| head``) ends the command quietly: ``BrokenPipeError`` goes to the CLI edge, which exits 0,
    instead of rich's ``SystemExit(1)``.
    """

    def render_str(self, text: str, *args: Any, **kwargs: Any) -> Text:
        return super().render_str(terminal_safe(text), *args, **kwargs)

    def render(self, renderable: RenderableType, options: ConsoleOptions | None = None) -> Iterable[Segment]:
        for segment in super().render(renderable, options):
            if segment.control is None and segment.text:
                safe = terminal_safe(segment.text)
                if safe != segment.text:
                    segment = Segment(safe, segment.style)
            yield segment

    def on_broken_pipe(self) -> None:
        self.quiet = True
        raise BrokenPipeError


def safe_console(*, stderr: bool = False, **options: Any) -> SafeConsole:
    """The console for stdout (or stderr): colours only on a terminal without ``NO_COLOR``; piped
    output is for files and tools, so it is plain and not squeezed to an 80-column guess."""
    stream = sys.stderr if stderr else sys.stdout
    plain = bool(os.environ.get("NO_COLOR")) or not stream.isatty()
    settings: dict[str, Any] = {
        "no_color": plain,
        "highlight": False,
        "soft_wrap": plain,
        "emoji": False,
        "width": None if stream.isatty() else 200,
    }
    settings.update(options)
    return SafeConsole(stderr=stderr, **settings)
