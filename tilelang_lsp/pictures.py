"""Layout pictures for the hover's link: SVG files drawn in the server process from the
``BufferLayout`` the worker sends (``irtrace.edge.layout_pictures``, no TileLang), in a folder of
the server's own.

Files are named by a hash of the layout they draw, so hovering the same buffer again, or a buffer
with the same layout, reuses the file. The folder holds at most ``MAX_PICTURES`` files (the oldest
go first) and is removed when the server exits.
"""

from __future__ import annotations

import atexit
import hashlib
import os
import shutil
import tempfile
from pathlib import Path

import msgspec

from irtrace.base.errors import IrtraceError
from irtrace.edge.layout_pictures import layout_grid, layout_svg
from irtrace.trace.schema import BufferLayout

MAX_PICTURES = 200
"""Pictures kept per server; a hover that draws one more removes the oldest."""


class LayoutPictures:
    """The server's picture folder, made on first use."""

    def __init__(self, limit: int = MAX_PICTURES) -> None:
        self.limit = limit
        self.folder: Path | None = None

    def _folder(self) -> Path:
        if self.folder is None:
            self.folder = Path(tempfile.mkdtemp(prefix="tilelang-lsp-layouts-"))
            atexit.register(shutil.rmtree, self.folder, True)
        return self.folder

    def picture(self, layout: BufferLayout) -> Path | None:
        """The SVG of ``layout`` (its top-left 128 x 128 elements), drawn unless already there;
        ``None`` when the layout cannot be drawn (a symbolic shape) or the file cannot be written."""
        key = hashlib.sha256(msgspec.json.encode(layout)).hexdigest()[:32]
        try:
            folder = self._folder()
            path = folder / f"layout-{key}.svg"
            if path.is_file():
                os.utime(path)  # recently shown: kept longest
                return path
            svg = layout_svg(layout_grid(layout))
            partial = folder / f".{key}.{os.getpid()}.tmp"
            partial.write_text(svg, encoding="utf-8")
            partial.replace(path)
            self._prune(folder)
            return path
        except (IrtraceError, OSError):
            return None

    def _prune(self, folder: Path) -> None:
        pictures = sorted(folder.glob("layout-*.svg"), key=lambda p: p.stat().st_mtime_ns)
        for old in pictures[: max(0, len(pictures) - self.limit)]:
            old.unlink(missing_ok=True)
