"""The API index on disk, one file per installed TileLang: found by the installation (folder,
version, the time of ``tilelang/__init__.py``) and valid while none of the files read to make it
changed. Written whole and never through a link; a file that fails any check is ignored."""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import stat
from pathlib import Path

import msgspec

from tilelang_lsp.protocol import ApiIndex

log = logging.getLogger(__name__)

CACHE_FORMAT = 2
"""Bumped when the index changes shape or meaning (2: read from source files, not imported)."""
MAX_CACHE_BYTES = 64 * 2**20
"""A cache file bigger than this is not read (tilelang 0.1.15's index is about 1 MB)."""


class FileStamp(msgspec.Struct, frozen=True):
    """A source file read to make the index, as it was then."""

    path: str
    mtime_ns: int
    size: int


class CachedIndex(msgspec.Struct, frozen=True, kw_only=True):
    format: int
    folder: str
    version: str
    stamps: tuple[FileStamp, ...]
    index: ApiIndex


def cache_folder() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "tilelang-lsp" / "api"


def cache_path(folder: str, version: str) -> Path | None:
    """The cache file for the tilelang in ``folder``; ``None`` when it has no ``__init__.py``."""
    try:
        init = os.stat(os.path.join(folder, "__init__.py"))
    except OSError:
        return None
    stamps = [str(CACHE_FORMAT), os.path.realpath(folder), version, str(init.st_mtime_ns), str(init.st_size)]
    key = hashlib.sha256("\0".join(stamps).encode()).hexdigest()[:24]
    return cache_folder() / f"{key}.json"


def stamp(path: Path) -> FileStamp | None:
    try:
        found = os.stat(path)
    except OSError:
        return None
    return FileStamp(path=str(path), mtime_ns=found.st_mtime_ns, size=found.st_size)


def load_cache(folder: str, version: str) -> ApiIndex | None:
    """The cached index of this installation, if a sound one is on disk (not a link, not too big,
    the same folder and version, every file it was read from unchanged)."""
    path = cache_path(folder, version)
    if path is None:
        return None
    try:
        descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return None  # none yet, or a link
    try:
        with os.fdopen(descriptor, "rb") as file:
            info = os.fstat(file.fileno())
            if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_CACHE_BYTES:
                return None
            cached = msgspec.json.decode(file.read(MAX_CACHE_BYTES + 1), type=CachedIndex)
    except (OSError, msgspec.DecodeError) as error:
        log.warning("ignoring the API index cache %s: %s", path, error)
        return None
    if (cached.format, cached.folder, cached.version) != (CACHE_FORMAT, folder, version):
        return None
    if not cached.stamps or any(stamp(Path(s.path)) != s for s in cached.stamps):
        return None  # a file changed since (an edited checkout): read the source again
    return cached.index


def save_cache(folder: str, version: str, index: ApiIndex, files: set[Path]) -> Path | None:
    """Write the index (``.partial``, then renamed over the old one); a failure only costs the
    next cold start. Refuses to write through a link in the cache's own folders."""
    path = cache_path(folder, version)
    if path is None:
        return None
    stamps = [s for s in (stamp(f) for f in sorted(files)) if s is not None]
    data = msgspec.json.encode(
        CachedIndex(format=CACHE_FORMAT, folder=folder, version=version, stamps=tuple(stamps), index=index)
    )
    partial = path.with_name(f"{path.name}.{os.getpid()}.partial")
    try:
        _make_folder(path.parent)
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
        descriptor = os.open(partial, flags, 0o600)
        with os.fdopen(descriptor, "wb") as file:
            file.write(data)
        os.replace(partial, path)  # replaces a link at ``path`` itself, never what it points to
    except OSError as error:
        log.warning("cannot write the API index cache %s: %s", path, error)
        with contextlib.suppress(OSError):
            partial.unlink()
        return None
    return path


def _make_folder(folder: Path) -> None:
    """``tilelang-lsp/api`` under the cache home, private, and not a link to somewhere else."""
    for part in (folder.parent, folder):
        with contextlib.suppress(FileExistsError):
            part.mkdir(mode=0o700, parents=True)
        if part.is_symlink() or not part.is_dir():
            raise OSError(f"{part} is a link or not a folder")
