"""The server's copy of TileLang's API index: where it comes from, how names resolve, the disk cache.

The index is made by introspecting the installed tilelang (``tilelang_lsp.worker.api_index``); the
server only holds it. It arrives from the trusted worker once (an ``ApiIndex`` event), from a cache
file written by an earlier session for the same tilelang installation, or, in an untrusted
workspace with no cache, from a one-off ``python -P -m tilelang_lsp.worker.api_index`` run with the
server's own interpreter (it imports tilelang and nothing of the workspace).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import importlib.metadata
import logging
import os
import sys
import tempfile
from pathlib import Path

import msgspec

from tilelang_lsp.protocol import ApiEntry, ApiIndex

log = logging.getLogger(__name__)

CACHE_FORMAT = 1
"""Bumped when ``ApiIndex`` changes shape, so an old cache file is never read as a new one."""
JOB_TIMEOUT_S = 180.0
"""Importing tilelang on a loaded machine."""

Resolved = ApiEntry | str
"""An API entry, or the name of an indexed module (``tilelang.language``)."""


class ApiCatalog:
    """TileLang's public names by module, once an index is in."""

    def __init__(self) -> None:
        self.index: ApiIndex | None = None
        self.origin: str | None = None
        """``worker``, ``cache`` or ``job``: where the index came from."""
        self.modules: dict[str, dict[str, ApiEntry]] = {}
        self.job: asyncio.Task[None] | None = None

    @property
    def ready(self) -> bool:
        return self.index is not None

    def receive(self, index: ApiIndex, origin: str = "worker") -> None:
        """Take an index (the worker's replaces any other) and keep it on disk for the next start."""
        if self.origin == "worker" and origin != "worker":
            return
        modules: dict[str, dict[str, ApiEntry]] = {}
        for module in index.modules:
            source = modules.get(module.same_as) if module.same_as else None
            modules[module.name] = source if source is not None else {e.name: e for e in module.entries}
        self.index, self.origin, self.modules = index, origin, modules
        if origin != "cache":
            save_cache(index)

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

    # --- loading ---------------------------------------------------------------------------

    def load_cached(self) -> bool:
        """The cached index of the tilelang this server's environment has, if one was written."""
        if self.ready:
            return True
        folder = installed_tilelang()
        if folder is None:
            return False
        path = cache_path(folder)
        if path is None or not path.is_file():
            return False
        try:
            index = msgspec.json.decode(path.read_bytes(), type=ApiIndex)
        except (OSError, msgspec.DecodeError) as error:
            log.warning("ignoring the API index cache %s: %s", path, error)
            return False
        self.receive(index, "cache")
        return True

    def start_job(self) -> None:
        """Index the server's own tilelang in a short process (untrusted workspace, no cache)."""
        if self.ready or self.job is not None:
            return
        self.job = asyncio.ensure_future(self._run_job())

    async def _run_job(self) -> None:
        with tempfile.TemporaryDirectory(prefix="tilelang-lsp-api-") as folder:
            try:
                process = await asyncio.create_subprocess_exec(
                    sys.executable,
                    "-P",  # no working folder on sys.path: a workspace's own `tilelang/` never imports
                    "-m",
                    "tilelang_lsp.worker.api_index",
                    cwd=folder,
                    env=_job_environment(),
                    stdin=asyncio.subprocess.DEVNULL,
                    stdout=asyncio.subprocess.PIPE,
                    stderr=asyncio.subprocess.DEVNULL,
                    limit=64 * 2**20,
                )
            except OSError as error:
                log.warning("cannot index TileLang's API: %s", error)
                return
            try:
                output, _ = await asyncio.wait_for(process.communicate(), JOB_TIMEOUT_S)
            except (asyncio.TimeoutError, asyncio.CancelledError):
                with contextlib.suppress(ProcessLookupError):
                    process.kill()
                await process.wait()
                return
        try:
            index = msgspec.json.decode(output.strip() or b"null", type=ApiIndex)
        except msgspec.DecodeError as error:
            log.warning("the API index job answered badly (exit %s): %s", process.returncode, error)
            return
        self.receive(index, "job")


def _job_environment() -> dict[str, str]:
    """This process's environment, with this copy of tilelang_lsp first on the job's path."""
    import tilelang_lsp

    env = dict(os.environ)
    ours = str(Path(tilelang_lsp.__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (ours, env.get("PYTHONPATH", "")) if p)
    return env


def installed_tilelang() -> str | None:
    """The folder of the tilelang this process's environment has, read from its package metadata
    (importing it is the worker's business)."""
    try:
        folder = importlib.metadata.distribution("tilelang").locate_file("tilelang")
    except importlib.metadata.PackageNotFoundError:
        return None
    return str(folder) if Path(str(folder)).is_dir() else None


def cache_path(folder: str) -> Path | None:
    """The cache file of the index of the tilelang in ``folder``: named by the folder and the times
    of its package files, so an upgrade or an edited checkout gets a new one."""
    stamps = [os.path.realpath(folder), str(CACHE_FORMAT)]
    for name in ("__init__.py", "language/__init__.py"):
        try:
            stamps.append(str(os.stat(os.path.join(folder, name)).st_mtime_ns))
        except OSError:
            return None
    key = hashlib.sha256("\0".join(stamps).encode()).hexdigest()[:24]
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "tilelang-lsp" / "api" / f"{key}.json"


def save_cache(index: ApiIndex) -> None:
    """Write the index whole (``.partial``, then renamed); a failure only costs the next cold start."""
    path = cache_path(index.folder)
    if path is None:
        return
    partial = path.with_name(path.name + f".{os.getpid()}.partial")
    try:
        data = msgspec.json.encode(index)
        if path.is_file() and path.read_bytes() == data:
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        partial.write_bytes(data)
        os.replace(partial, path)
    except OSError as error:
        log.warning("cannot write the API index cache %s: %s", path, error)
        with contextlib.suppress(OSError):
            partial.unlink()
