"""The trust rule: only files under the folders given with ``--root`` are run or read.

A path from a tool call is resolved (``..`` and symbolic links followed) before it is compared,
so neither can lead outside a root. Relative paths are taken from the first root.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path


class RootError(Exception):
    """A path outside the allowed roots, or one that is not there."""


class AllowedRoots:
    """The folders whose files the server may run (kernel files) or read (traces, policies)."""

    def __init__(self, folders: Sequence[str | Path]) -> None:
        self.folders = tuple(Path(folder).expanduser().resolve() for folder in folders)

    def describe(self) -> str:
        return ", ".join(str(folder) for folder in self.folders) or "none"

    def root_of(self, path: Path) -> Path:
        """The root a checked path lies under (the innermost, when roots nest)."""
        return max(
            (folder for folder in self.folders if path.is_relative_to(folder)), key=lambda f: len(f.parts)
        )

    def check(self, path: str, what: str) -> Path:
        """The resolved file ``path`` names; ``RootError`` when it is outside every root or missing."""
        if not self.folders:
            raise RootError(
                f"refused to open {path!r}: the server was started without --root, so it runs and "
                "reads no files; add --root DIR to its command line"
            )
        candidate = Path(path).expanduser()
        if not candidate.is_absolute():
            candidate = self.folders[0] / candidate
        resolved = candidate.resolve()
        if not any(resolved.is_relative_to(folder) for folder in self.folders):
            raise RootError(
                f"refused: {what} {str(resolved)!r} is outside the allowed roots ({self.describe()}); "
                "tilelang-mcp only runs and reads files under the folders given with --root"
            )
        if not resolved.is_file():
            raise RootError(f"{what} {str(resolved)!r} does not exist or is not a file")
        return resolved
