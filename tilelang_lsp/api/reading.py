"""Reading one installation's API in a thread, from the cache or from the source files, handing
each module to whoever listens as soon as it is read (``tilelang.language`` first).

The server starts one for its own environment's tilelang the moment it is launched (``prefetch``,
from ``tilelang_lsp.cli``), so the reading overlaps the server's own start-up; the catalog adopts
it when the client's options name that environment, else starts another.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path

from tilelang_lsp.api.cache import load_cache, save_cache
from tilelang_lsp.api.installed import Installation, installation_here
from tilelang_lsp.api.source_index import MODULES, SourceTree, read_module, source_roots
from tilelang_lsp.protocol import ApiIndex, ApiModule

log = logging.getLogger(__name__)

ModuleListener = Callable[[ApiModule], object]
DoneListener = Callable[[], object]


class ApiReading:
    """The API of ``installation``, being read in a daemon thread."""

    def __init__(self, installation: Installation) -> None:
        self.installation = installation
        self.index: ApiIndex | None = None
        """The whole index, once read (and written to the cache)."""
        self.origin: str | None = None
        """``cache`` or ``source``."""
        self._lock = threading.Lock()
        self._modules: list[ApiModule] = []
        self._finished = False
        self._on_module: list[ModuleListener] = []
        self._on_done: list[DoneListener] = []
        threading.Thread(target=self._run, name="tilelang-lsp-api", daemon=True).start()

    def listen(self, on_module: ModuleListener, on_done: DoneListener) -> None:
        """Call ``on_module`` for every module, those read so far first, and ``on_done`` at the
        end (from the reading thread: the callables must be thread-safe)."""
        with self._lock:
            for module in self._modules:
                on_module(module)
            if self._finished:
                on_done()
                return
            self._on_module.append(on_module)
            self._on_done.append(on_done)

    def _publish(self, module: ApiModule) -> None:
        with self._lock:
            self._modules.append(module)
            for listener in self._on_module:
                listener(module)

    def _run(self) -> None:
        try:
            self._read()
        except Exception:  # a bug here must not leave completion waiting for ever
            log.exception("reading TileLang's API failed")
        finally:
            with self._lock:
                self._finished = True
                for listener in self._on_done:
                    listener()

    def _read(self) -> None:
        folder, version = self.installation.folder, self.installation.version
        cached = load_cache(folder, version)
        if cached is not None:
            for cached_module in cached.modules:
                self._publish(cached_module)
            self.index, self.origin = cached, "cache"
            return
        began = time.perf_counter()
        tree = SourceTree(source_roots(Path(folder)))
        found: list[ApiModule] = []
        for name in MODULES:
            module = read_module(tree, name, found)
            if module is not None:
                found.append(module)
                self._publish(module)
        index = ApiIndex(
            tilelang_version=version,
            folder=folder,
            modules=tuple(found),
            elapsed_s=time.perf_counter() - began,
        )
        save_cache(folder, version, index, tree.files)
        self.index, self.origin = index, "source"  # last: ``index`` says the cache is written too


_prefetched: ApiReading | None = None


def prefetch() -> None:
    """Start reading the API of the tilelang this interpreter's environment has (no import)."""
    global _prefetched
    installation = installation_here()
    if installation is not None and _prefetched is None:
        _prefetched = ApiReading(installation)


def reading_for(installation: Installation) -> ApiReading:
    """The prefetched reading if it is of ``installation``, else a new one."""
    if _prefetched is not None and _prefetched.installation == installation:
        return _prefetched
    return ApiReading(installation)
