"""Exact IR snapshots of modules that later passes change in place.

What a pass did is what ``str(mod)`` shows right after it, and only a print of the objects the
module held then says so:
- TileLang's pipelines change ``IRModule`` objects in place (``mod->Update`` mutates the node
  whatever its reference count), so a snapshot holds the module's functions, attributes and infos
  (a ``ModuleState``, taken in microseconds on the pipeline's thread), never the module;
- the functions themselves are copied on write, except where a pass edits shared nodes in place:
  ``tl.LowerTileOp`` renames the kernel's thread variable (``tx`` becomes ``thread_binding`` in
  every function that holds it). Those passes are listed in ``MUTATES_IN_PLACE``;
- two modules whose structures hash alike can print differently (the structural hash ignores
  variable names), so a text is never guessed from a hash.
So the pipeline's thread only takes the state; a module holding the very same objects as the
last one printed (or functions made of the very same body, parameters, buffers and attributes)
reuses its text, and a module of new objects is first compared with the one before it: a third
of them print alike (``prints_alike``), and those are not printed. A pool of threads prints
(TVM's printer runs in C++ without the GIL) and one writer thread hashes and stores the texts in
order. Before a pass of ``MUTATES_IN_PLACE`` runs, the pipeline waits until every state taken so
far is printed (``SnapshotPrinter.barrier``); while it waits there, and at the end, it prints
queued states itself. Python run on the print and writer threads costs the pipeline's thread its
GIL, so they run as little as they can (docs/performance.md, "Tracing cost").
``tests/irtrace/test_exact_passes.py`` checks every record against an independent synchronous
print on every bundled example and target, with prints held back until each barrier (the latest
moment this design allows).
"""

from __future__ import annotations

import collections
import os
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future  # (not its ThreadPoolExecutor, which adds an exit hook on import)
from typing import Any

from irtrace.lowering.quick_ffi import (
    array_items,
    attr,
    attrs_items,
    function_attrs,
    handle,
    map_items,
    module,
    structurally_equal,
)
from irtrace.lowering.spans import ModuleSpans, module_spans
from irtrace.trace.schema import Scope
from irtrace.trace.writer import TraceWriter

_DEVICE_KERNEL_LAUNCH = 2  # tvm.ir.CallingConv.DEVICE_KERNEL_LAUNCH

MUTATES_IN_PLACE = frozenset({"tl.LowerTileOp"})
"""Passes (TVM names) that edit nodes earlier modules share, so every earlier module must be
printed before they run, and a module after them is printed even when it holds the same objects."""


class ModuleState:
    """The objects a module's printed text is made of, held by reference.

    The module's function map is held itself, not its items: TVM's maps are copied on write
    while anyone else holds them, so an update of the module (``mod->Update``) leaves the held
    map as it was. Holding it takes one call into TVM, not three per function, and a module
    whose map is the very same object holds the very same functions (no item compared).
    """

    __slots__ = ("_functions", "attrs", "function_map", "global_infos")

    def __init__(self, mod: Any) -> None:
        self.function_map: Any = mod.functions
        self.attrs: Any = mod.attrs
        self.global_infos: Any = mod.global_infos
        self._functions: tuple[tuple[Any, Any], ...] | None = None

    @property
    def functions(self) -> tuple[tuple[Any, Any], ...]:
        """The (global variable, function) pairs, read from the held map once."""
        if self._functions is None:
            self._functions = tuple(map_items(self.function_map))
        return self._functions

    def same_as(self, other: ModuleState) -> bool:
        """Whether both hold the very same objects (and so print the same)."""
        if not (_same(self.attrs, other.attrs) and _same(self.global_infos, other.global_infos)):
            return False
        if self.function_map.same_as(other.function_map):
            return True
        functions, other_functions = self.functions, other.functions
        if len(functions) != len(other_functions):
            return False
        return all(
            gvar.same_as(other_gvar) and _same_function(func, other_func)
            for (gvar, func), (other_gvar, other_func) in zip(functions, other_functions, strict=True)
        )

    def rebuild(self) -> Any:
        """A module of the same objects, safe from in-place updates of the original module
        (one call into TVM: its constructor takes the held map and attributes as they are)."""
        return module(self.function_map, self.attrs, self.global_infos)


def _same(a: Any, b: Any) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return bool(a.same_as(b))


def _same_function(func: Any, other: Any) -> bool:
    """Whether two functions print the same because they are made of the very same objects.

    Half of the passes that return a new PrimFunc object keep its body, parameters and buffers
    (a mutator that changed nothing, an attribute set to the value it had): such a copy prints
    like the original, and needs no print of its own. Anything not the same object is a change.
    """
    if func.same_as(other):
        return True
    from tvm import tirx

    if not (isinstance(func, tirx.PrimFunc) and isinstance(other, tirx.PrimFunc)):
        return False
    if not func.body.same_as(other.body):
        return False
    # a copied function shares its containers: identity first, item by item only when they differ
    params, other_params = func.params, other.params
    if not params.same_as(other_params):
        items, other_items = array_items(params), array_items(other_params)
        if len(items) != len(other_items) or not all(
            a.same_as(b) for a, b in zip(items, other_items, strict=True)
        ):
            return False
    buffer_map, other_map = func.buffer_map, other.buffer_map
    if not buffer_map.same_as(other_map):
        buffers, other_buffers = map_items(buffer_map), map_items(other_map)
        if len(buffers) != len(other_buffers) or not all(
            var.same_as(other_var) and buffer.same_as(other_buffer)
            for (var, buffer), (other_var, other_buffer) in zip(buffers, other_buffers, strict=True)
        ):
            return False
    if not structurally_equal(func.ret_type, other.ret_type):  # (TVM's Type.same_as recurses)
        return False  # a type: structural equality misses no name
    return _same_attrs(function_attrs(func), function_attrs(other))


def _same_attrs(attrs: Any, other: Any) -> bool:
    if attrs is None or other is None:
        return attrs is None and other is None
    if attrs.same_as(other):
        return True
    items, other_items = dict(attrs_items(attrs)), dict(attrs_items(other))
    if items.keys() != other_items.keys():
        return False
    for key, value in items.items():
        other_value = other_items[key]
        same = value.same_as(other_value) if hasattr(value, "same_as") else value == other_value
        if not same:
            return False
    return True


def prints_alike(state: ModuleState, previous: ModuleState) -> bool:
    """Whether ``state`` prints exactly as ``previous`` does, told without printing either.

    A third of the modules a pipeline yields are new objects that print as the module before
    them (a simplifier that rebuilt an unchanged body). Two checks together tell them apart from
    a real change, in C++ and in a twentieth of a print's time:
    - ``RecursiveEq`` compares every reflected field along the two trees, names and spans
      included, which structural equality ignores; but it would call two distinct variables of one
      name equal to one variable used twice, and objects without reflected fields equal;
    - structural equality (free variables not mapped) requires the same binding of variables and
      buffers to their uses, and compares what has no reflected fields by identity or content.
    What the printer shows is the fields (names included), which object each name stands for,
    and (for maps) keys sorted by name or by identity: both checks passing leaves nothing it
    could show differently. ``tests/irtrace/test_exact_passes.py`` checks every record of every
    bundled example on every target against an independent print."""
    # tvm-ffi's field-by-field comparison; it lets go of the GIL while it runs
    recursive_eq = handle("ffi.RecursiveEq", keep_gil=False)
    if recursive_eq is None:  # releases without it: every module is printed
        return False
    from tvm import ir

    before, after = previous.rebuild(), state.rebuild()
    try:
        return bool(recursive_eq(before, after)) and bool(ir.structural_equal(before, after))
    except Exception:  # a type either cannot compare: print it
        return False


def functions_scope(functions: tuple[tuple[Any, Any], ...]) -> Scope:
    """``device`` or ``host`` once a module of these functions holds one side of the host/device
    split, else ``module``."""
    conventions = []
    for _, func in functions:
        attrs = function_attrs(func)
        conv = attr(attrs, "calling_conv") if attrs is not None else None
        conventions.append(None if conv is None else int(conv))
    if conventions and all(conv == _DEVICE_KERNEL_LAUNCH for conv in conventions):
        return "device"
    if conventions and all(conv is not None and conv != _DEVICE_KERNEL_LAUNCH for conv in conventions):
        return "host"
    return "module"


class Snapshot:
    """One printed module; the writer thread fills in its text's SHA-256 (and, when source maps
    are asked for, its statements' spans on the printed lines)."""

    __slots__ = ("mapped", "mapped_nested", "scope", "sha", "spans")

    def __init__(self, scope: Scope = "module") -> None:
        self.sha: str | None = None
        self.scope = scope
        self.spans: ModuleSpans | None = None
        self.mapped = False
        """its source map was written (a snapshot serving several passes is mapped once)"""
        self.mapped_nested = False
        """the map written was a nested pass's, which carries no line over: the outer pass that
        ends with the same module maps it again, with the lines carried"""


WRITER_PERIOD_S = 0.02
"""How long jobs may wait for the writer thread: if a pass hangs, every record up to its start is
in the file this long after it began."""

WRITER_IDLE_ROUNDS = 250
"""Rounds with nothing to write (5 s) after which the writer sleeps until a job wakes it."""

_processes_sharing_cores = 1
"""How many recording processes run side by side (``--jobs``): they share the cores."""


def share_cores(processes: int) -> None:
    """Say that ``processes`` recording processes (this one among them) share the machine's cores."""
    global _processes_sharing_cores
    _processes_sharing_cores = max(1, processes)


def print_workers() -> int:
    """Threads that print modules: TVM's printer runs in C++ without the GIL, so prints of
    successive modules overlap on a machine with cores to spare (one is the pipeline's, and
    ``--jobs`` workers divide the cores among them)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 2
    return max(1, min(3, cores // _processes_sharing_cores - 1))


_Printed = tuple[Scope, str | None, ModuleSpans | None]
"""A module's scope, its text (``None``: the text of the module printed before it) and (when
asked for) its statements' spans on the text's lines."""


def _print_state(state: ModuleState) -> tuple[Scope, str]:
    # a fresh printer configuration each time: printing edits the one it is given
    return functions_scope(state.functions), state.rebuild().script()


def _run(state: ModuleState, spans: bool, printed: Future[_Printed], previous: ModuleState | None) -> None:
    try:
        if previous is not None and prints_alike(state, previous):
            printed.set_result((functions_scope(state.functions), None, None))
            return
        scope, text = _print_state(state)
        # the spans are read right after the text, on the same thread, from the same objects
        printed.set_result((scope, text, module_spans(state.rebuild(), text) if spans else None))
    except BaseException as error:  # handed to whoever waits for the text
        printed.set_exception(error)


_PrintJob = tuple[ModuleState, bool, "Future[_Printed]", ModuleState | None]


class _PrintPool:
    """Threads printing module states in the order given; a thread that would otherwise wait for
    them (the pipeline's, at a barrier or at the end) prints the next ones itself (``help``)."""

    def __init__(self, workers: int) -> None:
        self._jobs: queue.SimpleQueue[_PrintJob | None] = queue.SimpleQueue()
        self._threads = [
            threading.Thread(target=self._work, name=f"irtrace-print-{n}", daemon=True)
            for n in range(workers)
        ]
        for thread in self._threads:
            thread.start()

    def submit(
        self, state: ModuleState, spans: bool = False, previous: ModuleState | None = None
    ) -> Future[_Printed]:
        """Print ``state``; with ``previous`` (the state submitted just before it), first check
        whether it prints as that one (``prints_alike``): then its text is ``None``."""
        printed: Future[_Printed] = Future()
        self._jobs.put((state, spans, printed, previous))
        return printed

    def _work(self) -> None:
        while (job := self._jobs.get()) is not None:
            _run(*job)

    def help(self) -> None:
        """Print on this thread until no print is waiting for a thread."""
        while True:
            try:
                job = self._jobs.get_nowait()
            except queue.Empty:
                return
            if job is None:  # (only shutdown puts these, from this same thread)
                return
            _run(*job)

    def shutdown(self) -> None:
        for _ in self._threads:
            self._jobs.put(None)
        for thread in self._threads:
            thread.join()


class SnapshotPrinter:
    """Takes module states on the caller's thread; prints them on a pool of threads and hashes
    and stores them in order on one writer thread.

    With ``threaded``, the pipeline pays only for taking states; records always reach the file
    after the texts they refer to. ``barrier`` waits until everything submitted is done; ``drain``
    also ends the threads. ``hold_until_barrier`` (for the exactness test) starts no print before
    the next barrier: the latest a print may happen, where a pass missing from
    ``MUTATES_IN_PLACE`` shows at once.
    """

    def __init__(
        self,
        writer: TraceWriter,
        *,
        threaded: bool,
        capture_ir: bool = True,
        hold_until_barrier: bool = False,
        source_map: bool = False,
    ) -> None:
        self.writer = writer
        self.capture_ir = capture_ir
        self.source_map = capture_ir and source_map
        """read each printed module's statement spans with its text (``irtrace.lowering.spans``)"""
        self._jobs: collections.deque[Callable[[], None]] | None = None
        """Jobs for the writer thread, in order. The pipeline's thread only appends; the writer
        takes them every ``WRITER_PERIOD_S`` (or at once, woken by a barrier or the end): a few
        wake-ups of that thread (and GIL hand-offs) a lowering instead of one a pass."""
        self._wake = threading.Event()
        self._sleeping = False
        """the writer waits for a wake-up, not for its next round: the next job wakes it"""
        self._closing = False
        self._thread: threading.Thread | None = None
        self._pool: _PrintPool | None = None
        self._error: BaseException | None = None
        self._held: list[Callable[[], None]] | None = [] if hold_until_barrier and threaded else None
        self._last_text: str | None = None
        self._last_sha = ""
        self._previous: ModuleState | None = None
        """the state printed (or compared) last, until a barrier: the next one may print as it did"""
        if threaded:
            self._jobs = collections.deque()
            self._thread = threading.Thread(target=self._work, name="irtrace-writer", daemon=True)
            self._thread.start()
            if capture_ir:
                self._pool = _PrintPool(print_workers())

    def _work(self) -> None:
        assert self._jobs is not None
        jobs = self._jobs
        idle_rounds = 0
        while True:
            if idle_rounds < WRITER_IDLE_ROUNDS:
                self._wake.wait(WRITER_PERIOD_S)
            else:  # nothing for a while (a long pass, or a printer never drained): sleep until a job comes
                self._sleeping = True
                if not jobs:
                    self._wake.wait()
                self._sleeping = False
            self._wake.clear()
            idle_rounds = 0 if jobs else idle_rounds + 1
            closing = self._closing  # read before counting jobs: every job of the end is in by then
            try:
                with self.writer.batched():  # what was taken reaches the file in one write
                    for _ in range(len(jobs)):  # those there now; later ones wait for the next round
                        try:
                            jobs.popleft()()
                        except BaseException as error:  # surfaced by drain()
                            self._error = self._error or error
            except BaseException as error:  # the batch's write failed
                self._error = self._error or error
            if closing:
                return

    def _start(self, step: Callable[[], None]) -> None:
        """Run ``step`` now, or at the next barrier while holding."""
        if self._held is not None:
            self._held.append(step)
        else:
            step()

    def _submit(self, job: Callable[[], None]) -> None:
        """Run ``job`` on the writer thread after everything submitted before it (now without
        one)."""
        if self._jobs is None:
            job()
            return
        self._start(lambda: self._hand(job))

    def _hand(self, job: Callable[[], None]) -> None:
        """Queue ``job`` for the writer thread; it takes it at its next round (or now, if asleep)."""
        assert self._jobs is not None
        self._jobs.append(job)
        if self._sleeping:
            self._wake.set()

    def _store(self, text: str) -> str:
        """The text's key, stored once; the previous text (often printed again) is not re-hashed."""
        if text != self._last_text:
            self._last_text, self._last_sha = text, self.writer.add_text(text)
        return self._last_sha

    def snapshot(self, mod: Any, state: ModuleState | None = None) -> Snapshot:
        """The snapshot of ``mod`` as it is now (nothing when IR capture is off): printed now
        without a writer thread, else ``state`` (taken now when not given) is printed by the pool."""
        if not self.capture_ir:
            return Snapshot()
        held = state or ModuleState(mod)
        # (a source map reads spans with each text: every module is printed)
        previous, self._previous = None if self.source_map else self._previous, held
        if self._jobs is None or self._pool is None:  # the module as it is now: print it as it is
            snap = Snapshot(functions_scope(held.functions))
            if previous is not None and prints_alike(held, previous):
                snap.sha = self._last_sha
                return snap
            text = str(mod.script())
            snap.sha = self._store(text)
            if self.source_map:
                snap.spans = module_spans(mod, text)
            return snap
        snap, pool, spans = Snapshot(), self._pool, self.source_map

        def start() -> None:
            printed = pool.submit(held, spans, previous)

            def store() -> None:  # in order: the text last stored is the previous state's
                snap.scope, text, snap.spans = printed.result()
                snap.sha = self._last_sha if text is None else self._store(text)

            self._hand(store)

        self._start(start)
        return snap

    def write(self, job: Callable[[], None]) -> None:
        """Run ``job`` (which writes a record) once everything submitted before it is stored."""
        self._submit(job)

    def add_source(self, source: str) -> None:
        def store() -> None:
            self.writer.add_text(source)

        self._submit(store)

    def _release(self) -> None:
        """Start what was held back for the barrier, in order."""
        if self._held:
            for step in self._held:
                step()
            self._held.clear()

    def _help(self) -> None:
        """Print what waits for a print thread, on this one, instead of only waiting."""
        if self._pool is not None:
            self._pool.help()

    def barrier(self) -> None:
        """Wait until every job submitted so far is done (before a pass edits shared nodes)."""
        self._previous = None  # the pass may edit its objects: no later module is compared with it
        if self._jobs is None:
            return
        self._release()
        self._help()
        done = threading.Event()
        self._jobs.append(done.set)
        self._wake.set()
        done.wait()

    def drain(self) -> None:
        """Wait until every submitted job is done; re-raise a failure of the writer thread."""
        if self._jobs is not None and self._thread is not None:
            self._release()
            self._held = None
            self._help()
            self._closing = True
            self._wake.set()
            self._thread.join()
            self._jobs, self._thread = None, None
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None
        if self._error is not None:
            raise self._error
