"""The server's copy of TileLang's API index: where it comes from, and how names resolve.

The index is read from the installed tilelang's source files (``tilelang_lsp.api.source_index``),
never by importing it, by a child process (``tilelang_lsp.api.reading``: started at launch for the
server's own environment, adopted when the client's options name it), or taken from the cache an
earlier session wrote for the same installation (``tilelang_lsp.api.cache``).
Modules arrive one by one, ``tilelang.language`` first, so ``T.`` completes while the rest is read;
a request waits for the module it needs (``lookup``), never answers from half an index.
"""

from __future__ import annotations

import asyncio
import logging
import time

from tilelang_lsp.api.installed import Installation, find_installation
from tilelang_lsp.api.reading import reading_for
from tilelang_lsp.protocol import ApiEntry, ApiIndex, ApiModule

log = logging.getLogger(__name__)

WAIT_S = 30.0
"""The longest a request waits for the index (reading it takes about a second)."""

Resolved = ApiEntry | str
"""An API entry, or the name of an indexed module (``tilelang.language``)."""


class ApiCatalog:
    """TileLang's public names by module, as they arrive."""

    def __init__(self) -> None:
        self.index: ApiIndex | None = None
        """The whole index, once every module is in."""
        self.origin: str | None = None
        """``cache`` or ``source``: where the index came from."""
        self.installation: Installation | None = None
        self.modules: dict[str, dict[str, ApiEntry]] = {}
        self.task: asyncio.Task[None] | None = None
        self.done = asyncio.Event()
        """Set once loading ended (with an index or without: no tilelang here)."""
        self._arrived = asyncio.Event()
        """Set (and replaced) each time a module arrives."""

    @property
    def ready(self) -> bool:
        return self.index is not None

    # --- names -------------------------------------------------------------------------------

    def members(self, module: str) -> dict[str, ApiEntry]:
        return self.modules.get(module, {})

    def module_entry(self, module: str) -> ApiEntry | None:
        """The entry that describes the module ``module`` (its file), from its parent's names."""
        for members in self.modules.values():
            for entry in members.values():
                if entry.kind == "module" and entry.module == module:
                    return entry
        return None

    def resolve(self, path: list[str]) -> Resolved | None:
        """What a dotted name (``["tilelang", "language", "gemm"]``) names, if TileLang's API."""
        for split in range(len(path), 0, -1):
            start = ".".join(path[:split])
            if start in self.modules:
                break
        else:
            return None
        current: Resolved = start
        for part in path[split:]:
            if not isinstance(current, str):
                return None  # an attribute of a function or a class: not indexed
            entry = self.modules[current].get(part)
            if entry is None:
                return None
            current = entry.module if entry.kind == "module" and entry.module in self.modules else entry
        return current

    async def lookup(self, path: list[str]) -> Resolved | None:
        """``resolve``, waiting while the modules that could answer are still being read."""
        deadline = time.monotonic() + WAIT_S
        while True:
            found = self.resolve(path)
            if found is not None or self.done.is_set() or self.task is None:
                return found
            arrived = self._arrived
            waits = [asyncio.ensure_future(arrived.wait()), asyncio.ensure_future(self.done.wait())]
            left = deadline - time.monotonic()
            if left <= 0:
                return found
            _, pending = await asyncio.wait(waits, timeout=left, return_when=asyncio.FIRST_COMPLETED)
            for waiter in pending:
                waiter.cancel()

    # --- loading ---------------------------------------------------------------------------

    def start(self, python: str | None) -> None:
        """Find the tilelang ``python`` would import and read its API (or its cache), in the
        background; ``python`` is the worker's interpreter, ``None`` for the server's own."""
        if self.task is None:
            self.task = asyncio.ensure_future(self._load(python))

    async def _load(self, python: str | None) -> None:
        try:
            self.installation = await find_installation(python)
            if self.installation is None:
                log.warning("no tilelang found for %s: no completion of its API", python or "this server")
                return
            reading = reading_for(self.installation)
            loop = asyncio.get_running_loop()
            finished = asyncio.Event()
            reading.listen(
                lambda module: loop.call_soon_threadsafe(self._add, module),
                lambda: loop.call_soon_threadsafe(finished.set),
            )
            await finished.wait()
            self.index, self.origin = reading.index, reading.origin
        finally:
            self.done.set()

    def _add(self, module: ApiModule) -> None:
        source = self.modules.get(module.same_as) if module.same_as else None
        self.modules[module.name] = source if source is not None else {e.name: e for e in module.entries}
        arrived, self._arrived = self._arrived, asyncio.Event()
        arrived.set()
