"""The language server's source-line maps (``tilelang_lsp.line_ir``) per document version, and the
texts of every pass its hover links to, in a folder of the server's own (named by a hash of the
text, at most ``MAX_FILES`` kept, removed when the server exits).
"""

from __future__ import annotations

import asyncio
import atexit
import hashlib
import os
import re
import shutil
import tempfile
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from tilelang_lsp.document import Document
from tilelang_lsp.protocol import CompiledKernel, SourceLines

Answer = TypeVar("Answer", SourceLines | str, CompiledKernel | str)

MAX_FILES = 200
"""Texts of every pass kept per server; one more removes the oldest."""


@dataclass
class LineMapCache:
    """Per document, the ``SourceLines`` of one version per kernel (a task while it is lowered)."""

    tasks: dict[str, tuple[int, dict[str, asyncio.Task[Any]]]] = field(default_factory=dict)
    """Per document: its version and a task per key (a kernel's lowering, or its SASS compile)."""
    folder: Path | None = None

    def forget(self, uri: str) -> None:
        """The document changed or closed: stop its lowerings (the worker stops after its pass)."""
        _, kernels = self.tasks.pop(uri, (0, {}))
        for task in kernels.values():
            task.cancel()

    def task(
        self, doc: Document, kernel: str, lower: Callable[[], Coroutine[Any, Any, Answer]]
    ) -> asyncio.Task[Answer]:
        """The lowering of ``kernel`` for this version of ``doc``, started with ``lower`` if new."""
        version, kernels = self.tasks.get(doc.uri, (doc.version, {}))
        if version != doc.version:
            self.forget(doc.uri)
            kernels = {}
        if kernel not in kernels:
            kernels[kernel] = asyncio.create_task(lower())
        self.tasks[doc.uri] = (doc.version, kernels)
        return kernels[kernel]

    def write(self, name: str, text: str) -> Path | None:
        """``text`` in a file of the server's own folder (named by its hash); ``None`` on failure."""
        key = hashlib.sha256(text.encode()).hexdigest()[:24]
        try:
            if self.folder is None:
                self.folder = Path(tempfile.mkdtemp(prefix="tilelang-lsp-lines-"))
                atexit.register(shutil.rmtree, self.folder, True)
            safe = re.sub(r"[^\w.-]", "_", name)[:80]
            path = self.folder / f"{safe}-{key}.txt"
            if not path.is_file():
                partial = self.folder / f".{key}.{os.getpid()}.tmp"
                partial.write_text(text, encoding="utf-8")
                partial.replace(path)
            os.utime(path)
            kept = sorted(self.folder.glob("*.txt"), key=lambda p: p.stat().st_mtime_ns)
            for old in kept[: max(0, len(kept) - MAX_FILES)]:
                old.unlink(missing_ok=True)
            return path
        except OSError:
            return None
