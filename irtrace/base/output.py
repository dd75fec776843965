"""Writing output files without ever leaving a destroyed or half-written one in their place.

Every tool writes ``NAME.partial`` beside the output and renames it onto ``NAME`` once it is
complete, so an existing ``NAME`` stays as it was until then. The partial file is never opened
through a link: it is created new (``O_CREAT|O_EXCL|O_NOFOLLOW``), and a symlink, hard link or
pipe found at its name is removed (the name only), so a planted ``NAME.partial`` cannot make a
tool truncate the file it points to. The partial file is locked while
written: a second writer of the same output fails at once instead of interleaving its lines. A
symlink is written through (its target is replaced, the link stays); folders, pipes and devices
are refused (a FIFO would block the writer for good). File names made from a trace's text
(``file_name_parts``) are distinct and stay in the folder given.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import os
import re
import stat
from collections.abc import Iterable
from pathlib import Path
from typing import IO

from irtrace.base.errors import OutputError

PARTIAL_SUFFIX = ".partial"


def partial_path(path: str | os.PathLike[str]) -> Path:
    """Where ``path`` is written until it is complete (beside the file a symlink points to)."""
    target = output_target(path)
    return target.with_name(target.name + PARTIAL_SUFFIX)


def output_target(path: str | os.PathLike[str]) -> Path:
    """The file that writing ``path`` replaces: a symlink's target; a folder or device is refused."""
    given = Path(path)
    if str(given) in ("", "."):
        raise OutputError("the output needs a file name")
    target = Path(os.path.realpath(given))
    try:
        mode = target.stat().st_mode
    except FileNotFoundError:
        return target
    except OSError as error:
        raise OutputError(f"cannot write {str(given)!r}: {error.strerror or error}") from None
    if stat.S_ISDIR(mode):
        raise OutputError(f"{str(given)!r} is a folder; give a file name for the output")
    if not stat.S_ISREG(mode):
        raise OutputError(f"{str(given)!r} is not a regular file (a device or a pipe); give a file name")
    return target


def describe_os_error(error: OSError) -> str:
    return str(error.strerror or error)


class PartialFile:
    """``NAME.partial``, locked while written; ``commit`` renames it onto ``NAME``.

    ``stale`` says that a partial file was already there, left by a writer that was killed.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.target = output_target(self.path)
        self.partial = self.target.with_name(self.target.name + PARTIAL_SUFFIX)
        try:
            self.target.parent.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise OutputError(
                f"cannot make the folder {str(self.target.parent)!r} for {str(self.path)!r}: "
                f"{describe_os_error(error)}"
            ) from None
        self.stale = False
        self.handle: IO[bytes] = self._open_locked()

    def _open_locked(self) -> IO[bytes]:
        for _ in range(100):
            fd = self._open_partial()
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                raise OutputError(
                    f"another process is writing {str(self.path)!r} (it holds {str(self.partial)!r}); "
                    "wait for it to finish or give another output file"
                ) from None
            except OSError:
                pass  # a file system without locks: write unlocked rather than not at all
            # The holder we waited for may have renamed the file we opened onto the output.
            opened = os.fstat(fd)
            try:
                current = os.lstat(self.partial)
                same = (current.st_ino, current.st_dev) == (opened.st_ino, opened.st_dev)
            except FileNotFoundError:
                same = False
            if same:
                self.stale = opened.st_size > 0
                os.ftruncate(fd, 0)
                return os.fdopen(fd, "wb")
            os.close(fd)
        raise OutputError(f"cannot lock {str(self.partial)!r}: other writers keep replacing it")

    def _open_partial(self) -> int:
        """``NAME.partial`` opened as a regular file of one link, never through a link: created
        new (``O_CREAT|O_EXCL|O_NOFOLLOW``), or a partial file a killed writer left. Anything else
        there (a symlink a cloned repository planted, a hard link, a pipe) is removed, the name
        only: the file it points to is never opened."""
        flags = os.O_RDWR | os.O_CLOEXEC | os.O_NOFOLLOW
        for _ in range(100):
            try:
                return os.open(self.partial, flags | os.O_CREAT | os.O_EXCL, 0o644)
            except FileExistsError:
                pass
            except OSError as error:
                raise OutputError(f"cannot write {str(self.partial)!r}: {describe_os_error(error)}") from None
            try:
                fd = os.open(self.partial, flags | os.O_NONBLOCK)
            except FileNotFoundError:
                continue
            except OSError as error:
                if error.errno != errno.ELOOP:  # ELOOP: a symbolic link, which O_NOFOLLOW refused
                    raise OutputError(
                        f"cannot write {str(self.partial)!r}: {describe_os_error(error)}"
                    ) from None
                self._remove_planted()
                continue
            found = os.fstat(fd)
            if stat.S_ISREG(found.st_mode) and found.st_nlink == 1:
                os.set_blocking(fd, True)
                return fd
            os.close(fd)
            self._remove_planted()
        raise OutputError(f"cannot create {str(self.partial)!r}: something keeps replacing it")

    def _remove_planted(self) -> None:
        try:
            os.unlink(self.partial)
        except FileNotFoundError:
            pass
        except OSError as error:
            raise OutputError(
                f"{str(self.partial)!r} is in the way and cannot be removed: {describe_os_error(error)}"
            ) from None

    def commit(self) -> None:
        """Make the written file the output, in one rename."""
        try:
            self.handle.flush()
            os.fsync(self.handle.fileno())
            written, there = os.fstat(self.handle.fileno()), os.lstat(self.partial)
            if (written.st_ino, written.st_dev) != (there.st_ino, there.st_dev):
                raise OSError(f"{str(self.partial)!r} was replaced while it was written")
            os.replace(self.partial, self.target)
        except OSError as error:
            self.discard()
            raise OutputError(f"cannot write {str(self.path)!r}: {describe_os_error(error)}") from None
        self.handle.close()

    def discard(self) -> None:
        """Remove the partial file; the output stays as it was."""
        with contextlib.suppress(OSError):
            if os.lstat(self.partial).st_ino == os.fstat(self.handle.fileno()).st_ino:
                os.unlink(self.partial)
        with contextlib.suppress(OSError):
            self.handle.close()

    def keep(self) -> None:
        """Stop writing and leave the partial file for the user (an interrupted recording)."""
        with contextlib.suppress(OSError):
            self.handle.close()


def create_empty(path: str | os.PathLike[str]) -> None:
    """Make ``path`` a new, empty regular file, never through a link: whatever is at that name (a
    symlink planted beside an output, a stale file) is removed first, the name only."""
    for _ in range(100):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
        try:
            os.close(
                os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
            )
            return
        except FileExistsError:
            continue
    raise OutputError(f"cannot create {str(path)!r}: something keeps replacing it")


def write_atomically(path: str | os.PathLike[str], data: str | bytes | Iterable[str]) -> Path:
    """Write ``data`` to ``path`` through ``NAME.partial``; on failure nothing is left behind.

    ``data`` may be parts made as they are written (a page built run by run), so that the whole
    text is never held at once."""
    output = PartialFile(path)
    try:
        if isinstance(data, (str, bytes)):
            output.handle.write(data.encode("utf-8") if isinstance(data, str) else data)
        else:
            for part in data:
                output.handle.write(part.encode("utf-8"))
    except OSError as error:
        output.discard()
        raise OutputError(f"cannot write {str(path)!r}: {describe_os_error(error)}") from None
    except BaseException:
        output.discard()
        raise
    output.commit()
    return Path(path)


MAX_NAME_PART = 80
"""Longest file-name part made from a trace's text (file systems allow 255 bytes in all)."""


def file_name_parts(names: Iterable[str]) -> dict[str, str]:
    """A file-name part for each of ``names`` (text from a trace, such as kernel names).

    A part holds only letters, digits, ``_``, ``.`` and ``-``, never starts with a dot (no ``..``,
    no hidden file), is at most ``MAX_NAME_PART`` long, and differs from every other part even on
    a file system that ignores case: ``a/b`` and ``a-b`` would both be ``a-b``, so the second gets
    a short hash of its own name. The parts depend only on the names and their order.
    """
    parts: dict[str, str] = {}
    taken: set[str] = set()
    for name in dict.fromkeys(names):
        base = re.sub(r"[^A-Za-z0-9_.-]+", "-", name).lstrip(".-").rstrip("-")[:MAX_NAME_PART] or "kernel"
        part = base
        if part.casefold() in taken:
            part = f"{base}-{hashlib.sha256(name.encode('utf-8', 'surrogatepass')).hexdigest()[:10]}"
        number = 2
        while part.casefold() in taken:  # only a name built to look like another's hash gets here
            part, number = f"{base}-{number}", number + 1
        taken.add(part.casefold())
        parts[name] = part
    return parts
