"""Reading one installation's API in a child process, from the cache or from the source files,
handing each module to whoever listens as soon as it is read (``tilelang.language`` first).

A process of its own, not a thread: parsing is CPU work under the GIL, and beside the server's
start-up (pygls' imports) it would only take turns with it; a child runs on another core. The
child is ``python -P -m tilelang_lsp.api.reading FOLDER VERSION`` with the server's interpreter
(nothing of the workspace on its path; it imports no tilelang), printing one ``ReadMessage`` line
per module and a last one with where the index came from. The server starts one for its own
environment's tilelang the moment it is launched (``prefetch``, from ``tilelang_lsp.cli``); the
catalog adopts it when the client's options name that environment, else starts another.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import msgspec

from tilelang_lsp.api.cache import MAX_CACHE_BYTES, load_cache, save_cache
from tilelang_lsp.api.installed import Installation, installation_here
from tilelang_lsp.api.source_index import MODULES, SourceTree, read_module, source_roots
from tilelang_lsp.protocol import ApiIndex, ApiModule

log = logging.getLogger(__name__)

ModuleListener = Callable[[ApiModule], object]
DoneListener = Callable[[], object]


class ReadMessage(msgspec.Struct, frozen=True, kw_only=True):
    """One line of the child: a module read, or (``module`` empty) the end."""

    module: ApiModule | None = None
    origin: str | None = None
    """At the end: ``cache`` or ``source``."""
    elapsed_s: float = 0.0


_decoder = msgspec.json.Decoder(ReadMessage)


class ApiReading:
    """The API of ``installation``, being read by a child process."""

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
            self._follow()
        except Exception:  # a bug here must not leave completion waiting for ever
            log.exception("reading TileLang's API failed")
        finally:
            with self._lock:
                self._finished = True
                for listener in self._on_done:
                    listener()

    def _follow(self) -> None:
        """Start the child and take its lines as they come."""
        import tilelang_lsp

        env = dict(os.environ)
        ours = str(Path(tilelang_lsp.__file__).resolve().parent.parent)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (ours, env.get("PYTHONPATH", "")) if p)
        command = [sys.executable, "-P", "-m", "tilelang_lsp.api.reading"]
        command += [self.installation.folder, self.installation.version]
        with subprocess.Popen(
            command,
            cwd=tempfile.gettempdir(),
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        ) as child:
            assert child.stdout is not None
            for line in iter(lambda: child.stdout.readline(MAX_CACHE_BYTES), b""):  # type: ignore[union-attr]
                try:
                    message = _decoder.decode(line)
                except msgspec.DecodeError as error:
                    log.warning("the API reader answered badly: %s", error)
                    child.kill()
                    return
                if message.module is not None:
                    self._publish(message.module)
                    continue
                self.index = ApiIndex(
                    tilelang_version=self.installation.version,
                    folder=self.installation.folder,
                    modules=tuple(self._modules),
                    elapsed_s=message.elapsed_s,
                )
                self.origin = message.origin
        if self.index is None:
            log.warning("the API reader ended with exit status %s", child.returncode)


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


def main(argv: list[str]) -> int:
    """The child: print the index of the tilelang in ``argv[0]`` (version ``argv[1]``), module by
    module, from the cache if it holds it, else from the source (then writing the cache)."""
    if len(argv) != 2 or not os.path.isfile(os.path.join(argv[0], "__init__.py")):
        print("usage: python -m tilelang_lsp.api.reading TILELANG_FOLDER VERSION", file=sys.stderr)
        return 2
    folder, version = argv
    out = sys.stdout.buffer

    def emit(message: ReadMessage) -> None:
        out.write(msgspec.json.encode(message) + b"\n")
        out.flush()

    cached = load_cache(folder, version)
    if cached is not None:
        for module in cached.modules:
            emit(ReadMessage(module=module))
        emit(ReadMessage(origin="cache", elapsed_s=cached.elapsed_s))
        return 0
    began = time.perf_counter()
    tree = SourceTree(source_roots(Path(folder)))
    found: list[ApiModule] = []
    for name in MODULES:
        read = read_module(tree, name, found)
        if read is not None:
            found.append(read)
            emit(ReadMessage(module=read))
    elapsed = time.perf_counter() - began
    index = ApiIndex(tilelang_version=version, folder=folder, modules=tuple(found), elapsed_s=elapsed)
    save_cache(folder, version, index, tree.files)
    emit(ReadMessage(origin="source", elapsed_s=elapsed))  # last: the cache is written too
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
