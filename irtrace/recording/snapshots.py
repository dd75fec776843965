"""Exact IR snapshots of modules that later passes change in place.

What a pass did is what ``str(mod)`` shows right after it, and only a print taken then says so:
- TileLang's pipelines change ``IRModule`` objects in place (``mod->Update`` mutates the node
  whatever its reference count), so a module printed later can show a later pass's changes;
- ``tl.LowerTileOp`` renames the kernel's thread variable in place (``tx`` becomes
  ``thread_binding`` in every module that holds it), so even a print of held functions taken
  off the pipeline's thread races with the pipeline;
- two modules whose structures hash alike can print differently (the structural hash ignores
  variable names).
So each new module is printed on the pipeline's thread, in the instrument callback. What is
skipped is only a print that cannot differ: a module holding the very same functions, attributes
and infos as the last one printed (a ``ModuleState``, taken in microseconds) reuses its text.
Hashing and writing happen on a writer thread. ``tests/irtrace/test_exact_passes.py`` checks every
record against an independent synchronous print on every bundled example and target.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import Any

from irtrace.core.schema import Scope
from irtrace.core.trace_writer import TraceWriter

_DEVICE_KERNEL_LAUNCH = 2  # tvm.ir.CallingConv.DEVICE_KERNEL_LAUNCH


class ModuleState:
    """The objects a module's printed text is made of, held by reference."""

    __slots__ = ("attrs", "functions", "global_infos")

    def __init__(self, mod: Any) -> None:
        self.functions: tuple[tuple[Any, Any], ...] = tuple(mod.functions.items())
        self.attrs: Any = mod.attrs
        self.global_infos: Any = mod.global_infos

    def same_as(self, other: ModuleState) -> bool:
        """Whether both hold the very same objects (and so print the same)."""
        if len(self.functions) != len(other.functions):
            return False
        for (gvar, func), (other_gvar, other_func) in zip(self.functions, other.functions, strict=True):
            if not (gvar.same_as(other_gvar) and func.same_as(other_func)):
                return False
        return _same(self.attrs, other.attrs) and _same(self.global_infos, other.global_infos)

    def rebuild(self) -> Any:
        """A module of the same objects, safe from in-place updates of the original module."""
        import tvm

        return tvm.IRModule(dict(self.functions), attrs=self.attrs, global_infos=self.global_infos)


def _same(a: Any, b: Any) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return bool(a.same_as(b))


def module_scope(mod: Any) -> Scope:
    """``device`` or ``host`` once the module holds one side of the host/device split, else ``module``."""
    conventions = []
    for _, func in mod.functions.items():
        attrs = getattr(func, "attrs", None)
        conv = attrs.get("calling_conv", None) if attrs is not None else None
        conventions.append(None if conv is None else int(conv))
    if conventions and all(conv == _DEVICE_KERNEL_LAUNCH for conv in conventions):
        return "device"
    if conventions and all(conv is not None and conv != _DEVICE_KERNEL_LAUNCH for conv in conventions):
        return "host"
    return "module"


class Snapshot:
    """One printed module; the writer thread fills in its text's SHA-256."""

    __slots__ = ("scope", "sha")

    def __init__(self, scope: Scope = "module") -> None:
        self.sha: str | None = None
        self.scope = scope


class SnapshotPrinter:
    """Prints modules on the caller's thread and stores texts and records in order.

    With ``threaded``, hashing and writing happen on one writer thread, so the pipeline pays only
    for printing. Records always reach the file after the texts they refer to; ``drain`` waits
    for everything submitted.
    """

    def __init__(self, writer: TraceWriter, *, threaded: bool, capture_ir: bool = True) -> None:
        self.writer = writer
        self.capture_ir = capture_ir
        self._queue: queue.SimpleQueue[Callable[[], None] | None] | None = None
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None
        if threaded:
            self._queue = queue.SimpleQueue()
            self._thread = threading.Thread(target=self._work, name="irtrace-writer", daemon=True)
            self._thread.start()

    def _work(self) -> None:
        assert self._queue is not None
        while (job := self._queue.get()) is not None:
            try:
                job()
            except BaseException as error:  # surfaced by drain()
                self._error = self._error or error

    def _submit(self, job: Callable[[], None]) -> None:
        if self._queue is None:
            job()
        else:
            self._queue.put(job)

    def snapshot(self, mod: Any) -> Snapshot:
        """Print ``mod`` now (nothing when IR capture is off); it is hashed and stored later."""
        if not self.capture_ir:
            return Snapshot()
        snap = Snapshot(module_scope(mod))
        text = mod.script()

        def store() -> None:
            snap.sha = self.writer.add_text(text)

        self._submit(store)
        return snap

    def write(self, job: Callable[[], None]) -> None:
        """Run ``job`` (which writes a record) once everything submitted before it is stored."""
        self._submit(job)

    def add_source(self, source: str) -> None:
        def store() -> None:
            self.writer.add_text(source)

        self._submit(store)

    def drain(self) -> None:
        """Wait until every submitted job is done; re-raise a failure of the writer thread."""
        if self._queue is not None and self._thread is not None:
            self._queue.put(None)
            self._thread.join()
            self._queue, self._thread = None, None
        if self._error is not None:
            raise self._error
