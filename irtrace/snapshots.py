"""Exact IR snapshots of a module that later passes may change in place.

TileLang's pipelines change ``IRModule`` objects in place (``mod->Update``/``Add`` mutate the
node whatever its reference count), so a module printed after the next pass has run can show
that pass's changes, and two modules whose structures hash alike can print differently (the
structural hash ignores variable names). Neither identity nor a structural hash can stand in
for the printed text.

What cannot change in place are the functions and attributes a module holds: their mutations
copy on write while a reference is held. So a snapshot holds those references (a
``ModuleState``), which costs microseconds on the pipeline's thread, and the module is rebuilt
from them and printed on a printer thread. Its text is exactly ``str(mod)`` at the moment the
snapshot was taken; ``tests/irtrace/test_exact_passes.py`` checks this against a synchronous
print on every bundled example and target. A state whose references are all the same objects as
the previous state's prints the same, so it reuses that snapshot without printing.
"""

from __future__ import annotations

import os
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from irtrace.trace import TraceWriter, text_sha256

PRINT_WORKERS = max(1, min(4, (os.cpu_count() or 2) - 1))
"""Threads printing IR; the pipeline keeps one core."""
_DEVICE_KERNEL_LAUNCH = 2  # tvm.ir.CallingConv.DEVICE_KERNEL_LAUNCH


class ModuleState:
    """What a module's printed text depends on, held by reference: functions, attributes, infos."""

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
        """A module equal to the one this state was taken from, at the time it was taken."""
        import tvm

        return tvm.IRModule(dict(self.functions), attrs=self.attrs, global_infos=self.global_infos)


def _same(a: Any, b: Any) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return bool(a.same_as(b))


def module_scope(mod: Any) -> str:
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
    """One module state; the printer fills in its text's SHA-256 and its scope."""

    __slots__ = ("scope", "sha", "state")

    def __init__(self, state: ModuleState | None) -> None:
        self.state = state
        self.sha: str | None = None
        self.scope = "module"


def render(state: ModuleState) -> tuple[str, str, str]:
    """The printed text of the state's module, its SHA-256 and its scope (on a printer thread)."""
    mod = state.rebuild()
    text = mod.script()
    return text, text_sha256(text), module_scope(mod)


class SnapshotPrinter:
    """Prints snapshots and writes pass records to the trace, in submission order.

    With ``threaded``, modules are printed by a small pool of threads (TVM's printer runs in C++
    with the GIL released, so printing overlaps with the pipeline) and written in order by one
    more thread. Records always reach the file after the texts they refer to; ``drain`` waits
    for everything submitted.
    """

    def __init__(self, writer: TraceWriter, *, threaded: bool, capture_ir: bool = True) -> None:
        self.writer = writer
        self.capture_ir = capture_ir
        self._pool = (
            ThreadPoolExecutor(PRINT_WORKERS, thread_name_prefix="irtrace-print") if threaded else None
        )
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
        """Take ``mod``'s state now; it is printed and stored later, off the pipeline's thread."""
        if not self.capture_ir:
            return Snapshot(None)
        return self.print_state(ModuleState(mod))

    def print_state(self, state: ModuleState) -> Snapshot:
        """Queue ``state`` for printing and return its snapshot (its SHA-256 set once printed)."""
        snap = Snapshot(state)
        rendering: Future[tuple[str, str, str]] | None = (
            self._pool.submit(render, state) if self._pool is not None else None
        )

        def store() -> None:
            text, sha, scope = rendering.result() if rendering is not None else render(state)
            self.writer.add_text(text, sha)
            snap.sha, snap.scope, snap.state = sha, scope, None  # let the module go once stored

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
        """Wait until every submitted job is done; re-raise a failure of the printer threads."""
        if self._queue is not None and self._thread is not None:
            self._queue.put(None)
            self._thread.join()
            self._queue, self._thread = None, None
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None
        if self._error is not None:
            raise self._error
