"""An index of SHA-256 digests whose memory does not grow with the corpus.

A corpus trace holds one IR text per distinct module; reading it run by run (``trace_stream``) and
merging shards (``TraceWriter`` without kept texts) each need "where is the text with this digest"
or "was it written already" for every text of the corpus. Held in a dict, that is about 130 bytes
a text: 10,000 kernels on 19 targets hold tens of millions of texts, gigabytes. ``DigestIndex``
keeps the newest ``in_memory`` entries in a dict and moves them, a batch at a time, into an SQLite
table in a private temporary file (SQLite deletes it when the index is closed or collected), whose
page cache is bounded. A trace of the size people read interactively never reaches the file.

SQLite is the standard library's; a connection is not carried across ``fork`` (nothing that
forks reads a streamed trace), and every access takes the index's lock, so threads may share it.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator

try:
    import sqlite3
except ImportError:  # a Python built without it: the index stays in memory, as before
    sqlite3 = None  # type: ignore[assignment]

IN_MEMORY = 16_384
"""Entries kept in the dict before they move to the file: about 2 MB (a run holds tens of texts)."""
CACHE_KIB = 16 * 1024
"""SQLite's page cache for the file, in KiB."""
_LOW_BITS = 62
"""A value is stored as two SQLite integers (64-bit, signed): a text's place in a file of over
8 MB (``offset << 40 | length``) does not fit in one."""
_LOW_MASK = (1 << _LOW_BITS) - 1


class DigestIndex:
    """Digest (bytes) -> int, in memory up to ``in_memory`` entries, the rest in a temporary file."""

    def __init__(self, in_memory: int | None = None) -> None:
        self._limit = max(1, IN_MEMORY if in_memory is None else in_memory)
        if sqlite3 is None:  # no file to move to: everything stays in the dict
            self._limit = sys.maxsize
        self._recent: dict[bytes, int] = {}
        self._file: sqlite3.Connection | None = None
        self._lock = threading.Lock()

    @property
    def spilled(self) -> bool:
        """Whether some entries live in the file (the corpus outgrew the dict)."""
        return self._file is not None

    def __setitem__(self, key: bytes, value: int) -> None:
        with self._lock:
            self._recent[key] = value
            if len(self._recent) >= self._limit:
                self._spill()

    def add(self, key: bytes) -> None:
        """Note ``key`` as present (the index as a set)."""
        self[key] = 0

    def get(self, key: bytes) -> int | None:
        with self._lock:
            value = self._recent.get(key)
            if value is not None or self._file is None:
                return value
            row = self._file.execute("SELECT high, low FROM digests WHERE digest = ?", (key,)).fetchone()
            return None if row is None else int(row[0]) << _LOW_BITS | int(row[1])

    def __contains__(self, key: object) -> bool:
        return isinstance(key, bytes) and self.get(key) is not None

    def __iter__(self) -> Iterator[bytes]:
        with self._lock:
            recent = list(self._recent)
            stored = [] if self._file is None else self._file.execute("SELECT digest FROM digests")
            on_disk = [bytes(row[0]) for row in stored if bytes(row[0]) not in self._recent]
        yield from on_disk
        yield from recent

    def __len__(self) -> int:
        with self._lock:
            if self._file is None:
                return len(self._recent)
            (stored,) = self._file.execute("SELECT count(*) FROM digests").fetchone()
            again = sum(
                self._file.execute("SELECT 1 FROM digests WHERE digest = ?", (key,)).fetchone() is not None
                for key in self._recent
            )
            return int(stored) + len(self._recent) - again

    def close(self) -> None:
        """Drop every entry and delete the file, if there is one."""
        with self._lock:
            self._recent.clear()
            if self._file is not None:
                self._file.close()
                self._file = None

    def _spill(self) -> None:
        try:
            if self._file is None:
                self._file = _open_file()
            # Sorted, the batch goes into the B-tree page by page instead of at random places.
            batch = [
                (key, value >> _LOW_BITS, value & _LOW_MASK) for key, value in sorted(self._recent.items())
            ]
            self._file.execute("BEGIN")
            try:
                self._file.executemany("INSERT OR REPLACE INTO digests VALUES (?, ?, ?)", batch)
                self._file.execute("COMMIT")
            except sqlite3.Error:
                self._file.execute("ROLLBACK")
                raise
        except sqlite3.Error:
            # No room for the file (a full or read-only temporary folder): what is in it stays, the
            # rest stays in memory, as before there was a file.
            self._limit = sys.maxsize
            return
        self._recent.clear()


def _open_file() -> sqlite3.Connection:
    # "" is SQLite's private temporary database: a file of its own, deleted on close.
    connection = sqlite3.connect("", check_same_thread=False, isolation_level=None)
    connection.execute(f"PRAGMA cache_size = -{CACHE_KIB}")
    connection.execute("PRAGMA journal_mode = OFF")
    connection.execute("PRAGMA synchronous = OFF")
    connection.execute(
        "CREATE TABLE digests (digest BLOB PRIMARY KEY, high INTEGER NOT NULL, low INTEGER NOT NULL)"
        " WITHOUT ROWID"
    )
    return connection
