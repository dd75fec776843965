"""Record a real TileLang lowering pass by pass, through TVM's pass-instrument hooks.

The recorder is a TileLang ``PassInstrumentationTool``: TileLang's own instrumentation session
attaches it to every ``PassContext`` of one compilation, and its ``StackedPassInstrument`` pairs
TVM's ``run_before_pass``/``run_after_pass`` callbacks. Nothing in TileLang's pipelines is edited.
Each callback takes an exact snapshot of the module (``irtrace.lowering.snapshots``). ``record_lowering``
is the one entry point that runs a lowering: what the trace calls the run (``RunHeader``) and how
it is lowered and recorded (``LoweringOptions``, with its ``CaptureOptions``) travel as two objects.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from typing import Any

from irtrace.base import interrupts
from irtrace.base.native_log import RunLog, capture_run_log, split_native_log
from irtrace.lowering import frontend_lines
from irtrace.lowering.carry_rules import CarrySource, Storage, carry_allocations, carry_spans
from irtrace.lowering.instrumentation import compile_session, stacked_pass_instrument
from irtrace.lowering.layouts import buffer_layout, layout_maps
from irtrace.lowering.pass_names import display_name
from irtrace.lowering.snapshots import MUTATES_IN_PLACE, ModuleState, Snapshot, SnapshotPrinter
from irtrace.lowering.tvm_targets import make_tvm_target
from irtrace.targets.backends import TargetSpec
from irtrace.trace.model import (
    PHASE_CHECK,
    PHASE_CODEGEN,
    PHASE_FINALIZE,
    PHASE_LOWER,
    STATUS_FAILED,
    STATUS_OK,
    KernelRun,
    PassRecord,
    host_facts,
    text_sha256,
)
from irtrace.trace.schema import Instance, LayoutRecord, Phase, SourceMapRecord
from irtrace.trace.writer import TraceWriter

_crash_safe = True


def crash_safe() -> bool:
    """Whether ``record`` and ``run`` print each module on the pipeline's thread and write each
    record before the next pass runs, so that a native crash keeps everything that finished
    (the default, in the process the user started). ``--jobs``/``--isolate`` workers print on a
    pool instead, and run a task that crashed again in this mode (``irtrace.lowering.executor``)."""
    return _crash_safe


def set_crash_safe(safe: bool) -> None:
    global _crash_safe
    _crash_safe = safe


class StopLowering(Exception):
    """Raised at codegen once a stop was asked for, to end the lowering early.

    Passes after the stop are skipped through TVM's ``should_run`` hook rather than by raising
    from a pass callback: an exception crossing TVM's C++ frames costs about a second the first
    time in a process (backtrace symbolization), which the language server would pay.
    """


def skip_after_stop(recorder: PassRecorder) -> Any:
    """A TVM pass instrument that skips every pass once ``recorder.stop_requested`` is set."""
    from tvm.ir.instrument import pass_instrument

    @pass_instrument
    class SkipAfterStop:
        def should_run(self, mod: Any, info: Any) -> bool:
            return not recorder.stop_requested

    return SkipAfterStop()


@dataclass
class _OpenPass:
    """A pass that has started and not yet finished."""

    index: int
    name: str
    raw_name: str
    phase: Phase
    pipeline: str | None
    depth: int
    parent: int | None
    started: float
    overhead_at_start: float
    ir_before: Snapshot
    """The module the pass received."""
    child_wall: float = 0.0


def _pass_record(frame: _OpenPass, **known: Any) -> PassRecord:
    """The record of ``frame``: what the pass was when it started, and what is ``known`` since."""
    return PassRecord(
        index=frame.index,
        name=frame.name,
        raw_name=frame.raw_name,
        phase=frame.phase,
        pipeline=frame.pipeline,
        depth=frame.depth,
        parent=frame.parent,
        ir_before=frame.ir_before.sha,
        **known,
    )


@dataclass
class RecordedLowering:
    """What one recording produced, for callers that keep going (CLI, language server)."""

    run: KernelRun
    kernel_source: str | None = None
    error: BaseException | None = None
    stopped_module: Any = None
    """The module after ``stop_after`` (or the last one seen), for callers that inspect it."""
    cancelled: bool = False
    """``should_stop`` ended the lowering early."""


@dataclass(frozen=True)
class RunHeader:
    """What the trace calls a run: the names and arguments written in its header."""

    kernel: str
    spec: str = ""
    args: Mapping[str, Any] | None = None
    """The run header's ``args`` (``{"args": [...], "kwargs": {...}}``); none when unknown."""
    kernel_file_text: str | None = None
    """The kernel's Python file as imported, stored in the trace for readers to show."""
    instance: Instance | None = None
    """Where a captured kernel came from (a kernel ``irtrace run`` lowers again for a ``-t``)."""


@dataclass(frozen=True)
class CaptureOptions:
    """How a lowering is recorded: which texts are taken, and on which thread they are printed."""

    ir: bool = True
    """Store each module's IR text; ``False`` records passes and times only (the language
    server's hints need no text)."""
    threaded: bool = True
    """Print modules on a pool of threads; ``False`` prints on the pipeline's thread and writes
    each record before the next pass runs (crash-safe)."""
    warnings: bool = False
    """Take what TileLang's C++ code logs while it lowers off file descriptor 2 and store its
    warnings on the run (other text is passed on to stderr afterwards)."""
    hold_prints: bool = False
    """Print each module as late as the design allows (for the exactness test)."""
    source_map: bool = False
    """Store, with each module's text, which of its lines come from which Python line (``srcmap``
    records; ``irtrace.lowering.spans``): off unless asked (``--source-map``), since placing the
    lines prints each module a second time."""


@dataclass(frozen=True)
class LoweringOptions:
    """One lowering as ``record_lowering`` runs it: for which target, with which pass configs, how
    far, and how it is recorded. Callers build it once and pass it whole."""

    target: TargetSpec
    tvm_target: Any = None
    """TileLang's target object for ``target`` when the caller has one (made from it otherwise)."""
    pass_configs: Mapping[str, Any] = field(default_factory=dict)
    """The ``PassContext``'s configs, as the run header records them."""
    stop_after: tuple[str, ...] = ()
    """End the pipeline after the first of these passes (display or raw name)."""
    should_stop: Callable[[], bool] | None = None
    """Asked after every pass; ``True`` cancels the lowering (``RecordedLowering.cancelled``)."""
    instruments: tuple[Any, ...] = ()
    """Further TVM pass instruments to run in the same lowering."""
    capture: CaptureOptions = CaptureOptions()


_CARRIES_KEPT = 4
"""how many modules' carries are kept: a pass takes the last module or one a few passes back"""


class PassRecorder:
    """Observer and TileLang instrumentation tool that writes pass records to a ``TraceWriter``.

    Every callback snapshots the module it sees; the ``SnapshotPrinter`` turns snapshots into
    stored texts and writes the records once their texts are stored.
    """

    pass_instrument_priority = 1000

    def __init__(
        self,
        writer: TraceWriter,
        run_id: int | None,
        capture: CaptureOptions | None = None,
        *,
        stop_after: Sequence[str] = (),
        should_stop: Callable[[], bool] | None = None,
    ) -> None:
        self.writer = writer
        self.run_id = run_id
        capture = capture or CaptureOptions()
        self.printer = SnapshotPrinter(
            writer,
            threaded=capture.threaded and capture.ir,
            capture_ir=capture.ir,
            hold_until_barrier=capture.hold_prints,
            source_map=capture.source_map,
        )
        self._carry: list[CarrySource] = []
        """the statements of the last module mapped that had a line (``carry_spans``)"""
        self._carries: dict[str, list[CarrySource]] = {}
        """the carry of the last modules mapped, by their text's hash (``_CARRIES_KEPT``)"""
        self._storage: Storage = {}
        """the spanned allocations of the modules mapped so far, by storage (``carry_allocations``)"""
        self.should_stop = should_stop
        self.cancelled = False
        self.stop_after = set(stop_after)
        self.t0 = time.perf_counter()
        self.overhead = 0.0
        self.next_index = 0
        self.open: list[_OpenPass] = []
        self.pipeline: str | None = None
        self.pipeline_seen = False
        self.last_module: Any = None
        self.last_state: ModuleState | None = None
        self.last_snapshot: Snapshot | None = None
        self.input_snapshot: Snapshot | None = None
        self.kernel_source: str | None = None
        self.stopped_module: Any = None
        self.stop_requested = False
        self.unfinished: list[tuple[_OpenPass, float]] = []
        self.layout_snapshot: Snapshot | None = None
        """The module snapshot whose layouts were read last (``None`` before the layout pass)."""
        self.layout_objects: list[tuple[Any, Any]] = []
        self.layouts_gone = False

    @property
    def input_sha(self) -> str | None:
        return self.input_snapshot.sha if self.input_snapshot is not None else None

    def drain(self) -> None:
        self.printer.drain()

    # --- snapshots -------------------------------------------------------------------------

    def _snapshot(self, mod: Any) -> Snapshot:
        """The snapshot of ``mod`` now; a module holding the same objects as last time reuses it."""
        self.last_module = mod
        if not self.printer.capture_ir:
            return self.printer.snapshot(mod)
        state = ModuleState(mod)
        if self.last_snapshot is not None and self.last_state is not None and state.same_as(self.last_state):
            return self.last_snapshot
        self.last_state, self.last_snapshot = state, self.printer.snapshot(mod, state)
        return self.last_snapshot

    def _before_in_place_edits(self, raw_name: str) -> None:
        """Before a pass that edits shared nodes in place: every module taken so far is printed
        first, and the module after it is printed even if it holds the same objects."""
        if raw_name in MUTATES_IN_PLACE:
            self.printer.barrier()
            self.last_state = self.last_snapshot = None

    def _write(
        self, frame: _OpenPass, ended: float, wall: float, after: Snapshot | None, **extra: Any
    ) -> None:
        """Queue the record of a finished (or failed) pass."""
        before = frame.ir_before

        def build() -> PassRecord:
            return _pass_record(
                frame,
                start_s=frame.started - self.t0,
                wall_s=wall,
                self_s=max(0.0, wall - frame.child_wall),
                changed=extra.pop("changed", after is not None and after.sha != before.sha),
                ir_after=extra.pop("ir_after_sha", None) or (after.sha if after is not None else None),
                scope=extra.pop("scope", None) or (after if after is not None else before).scope,
                **extra,
            )

        run_id = self._run_id()
        self.printer.write(lambda: self.writer.add_pass(run_id, build()))
        if after is not None and self.printer.source_map:
            self._note_spans(after, frame.index, nested=bool(self.open), received=before)

    def _note_spans(
        self,
        snapshot: Snapshot,
        after: int | None,
        nested: bool = False,
        received: Snapshot | None = None,
        ran: frozenset[tuple[str, int]] | None = None,
    ) -> None:
        """Queue the source map of a module the first time a pass (or the pipeline's input) has it:
        its spans were read with its text, so the record waits for the text like the pass's. The
        module of a pass nested in another (``tl.LetInline`` inside ``tl.LowerTileOp``) is a part
        of the pipeline's: it carries nothing and leaves the carry to the outer pass's module. A
        pass is matched against the module it ``received`` (two passes may each take the same
        module: ``tirx.Filter`` keeps the host part, then the device part)."""
        run_id = self._run_id()

        def write() -> None:  # in the order the modules were made: the carry follows them
            spans = snapshot.spans
            if snapshot.mapped and snapshot.sha in self._carries and not nested:
                self._carry = self._carries[snapshot.sha]
            again = snapshot.mapped_nested and not nested and snapshot.sha not in self._carries
            if (snapshot.mapped and not again) or spans is None or snapshot.sha is None:
                return
            if nested and snapshot.sha in self._carries:
                snapshot.mapped = True  # a text mapped with its carried lines already: that map holds
                return
            if received is not None and received.sha in self._carries:
                self._carry = self._carries[received.sha]
            snapshot.mapped, snapshot.mapped_nested = True, nested
            files = list(spans.files) if spans.lines is not None else []
            carried: list[tuple[int, int, int]] = []
            owned: list[tuple[int, int, int]] = []
            index = {name: number for number, name in enumerate(files)}
            if spans.lines is not None:
                found: list[tuple[int, str, int]] = []
                owned_here: list[tuple[int, str, int]] = list(spans.owned)
                remapped: list[tuple[int, str, int]] = []
                if not nested:
                    found, self._carry, in_scopes = carry_spans(
                        self._carry if after is not None else [], spans.facts, spans.context
                    )
                    owned_here.extend(in_scopes)
                    self._carry.extend(spans.owned_statements)
                    self._carries[snapshot.sha] = self._carry
                    while len(self._carries) > _CARRIES_KEPT:
                        del self._carries[next(iter(self._carries))]
                    remapped = carry_allocations(self._storage, spans.allocations)
                for ir_line, file, line in [*found, *spans.owned, *remapped]:
                    carried.append((ir_line, _file_number(files, index, file), line))
                # a statement owned by its block, and carried to it by no other rule
                in_blocks = set(owned_here)
                by_others = {entry for entry in [*found, *remapped] if entry not in in_blocks}
                owned = [(ir_line, index[file], line) for ir_line, file, line in in_blocks - by_others]
            elif not nested:
                self._carry = []  # an unplaced map proves nothing for the next pass
            ran_entries: list[tuple[int, int]] | None = None
            if ran is not None:
                ran_entries = [(_file_number(files, index, file), line) for file, line in sorted(ran)]
            self.writer.add_source_map(
                run_id,
                SourceMapRecord(
                    run=run_id,
                    after=after,
                    ir=snapshot.sha,
                    statements=spans.statements,
                    with_span=spans.with_span,
                    placed=spans.lines is not None,
                    files=files,
                    lines=list(spans.lines or ()),
                    carried=sorted(set(carried)),
                    owned=sorted(owned),
                    inner=list(spans.inner) if spans.lines is not None else [],
                    ran=ran_entries,
                ),
            )

        self.printer.write(write)

    # --- TileLang PassEventObserver ------------------------------------------------------------

    def enter_pass_context(self) -> None:
        pass

    def exit_pass_context(self) -> None:
        pass

    def callback_mismatch(self, actual: str, expected: str | None) -> None:
        pass

    def begin_run(self, mod: Any) -> int:
        """Start the run lazily; only capture mode, which learns the kernel from ``mod``, needs it."""
        raise RuntimeError("PassRecorder needs a run_id")

    def _current_run(self, mod: Any) -> int:
        if self.run_id is None:
            self.run_id = self.begin_run(mod)
        return self.run_id

    def _run_id(self) -> int:
        assert self.run_id is not None, "a pass finished before any started"
        return self.run_id

    def _open(self, mod: Any, name: str, raw_name: str, phase: Phase, pipeline: str | None) -> _OpenPass:
        ir_before = self._snapshot(mod)
        if self.input_snapshot is None:
            self.input_snapshot = ir_before
        frame = _OpenPass(
            index=self.next_index,
            name=name,
            raw_name=raw_name,
            phase=phase,
            pipeline=pipeline,
            depth=len(self.open),
            parent=self.open[-1].index if self.open else None,
            started=0.0,
            overhead_at_start=0.0,
            ir_before=ir_before,
        )
        self.next_index += 1
        self.open.append(frame)
        if frame.index == 0 and self.printer.source_map:
            self._note_spans(ir_before, None, ran=_frontend_ran(mod))
        return frame

    def _note_started(self, frame: _OpenPass) -> None:
        """Queue the pass's ``start`` record: if the process dies in the pass, the trace names it
        and holds the IR it received."""
        run_id, start_s, before = self._run_id(), time.perf_counter() - self.t0, frame.ir_before

        def build() -> PassRecord:
            return _pass_record(
                frame,
                start_s=start_s,
                wall_s=0.0,
                self_s=0.0,
                changed=False,
                ir_after=None,
                scope=before.scope,
            )

        self.printer.write(lambda: self.writer.start_pass(run_id, build()))

    def pass_started(self, mod: Any, event: Any) -> _OpenPass:
        began = time.perf_counter()
        self._current_run(mod)
        raw_name = str(event.name)
        name = display_name(raw_name)
        frame = self._open(mod, name, raw_name, *self._phase(event.phase))
        self._note_started(frame)
        self._before_in_place_edits(raw_name)
        now = time.perf_counter()
        self.overhead += now - began
        frame.started, frame.overhead_at_start = now, self.overhead
        return frame

    def pass_finished(self, mod: Any, event: Any, state: _OpenPass) -> None:
        ended = time.perf_counter()
        frame = self.open.pop() if self.open and self.open[-1] is state else state
        wall = max(0.0, ended - frame.started - (self.overhead - frame.overhead_at_start))
        if self.open:
            self.open[-1].child_wall += wall
        after = self._snapshot(mod)
        self._write(frame, ended, wall, after)
        if self.printer.capture_ir and not self.layouts_gone:
            self._note_layouts(mod, frame, after)
        if frame.name in self.stop_after or frame.raw_name in self.stop_after:
            # rebuilt from the snapshot's references: later code may still change ``mod`` in place
            self.stopped_module = self.last_state.rebuild() if self.last_state is not None else mod
            self.stop_requested = True
        elif self.should_stop is not None and self.should_stop():
            self.cancelled = self.stop_requested = True
        self.overhead += time.perf_counter() - ended

    def _note_layouts(self, mod: Any, frame: _OpenPass, after: Snapshot) -> None:
        """Record every buffer's layout after the layout pass, and again after each later pass
        that changed one, until a pass lowers them away. Only changed modules are read (on the
        writer thread, from the objects the module held), and a record is built only when a
        layout object differs from the last one recorded."""
        if self.layout_snapshot is None and not frame.raw_name.endswith("LayoutInference"):
            return
        if after is self.layout_snapshot:
            return
        self.layout_snapshot = after
        state, run_id = self.last_state, self._run_id()

        def read() -> None:
            found = list(layout_maps(state.rebuild() if state is not None else mod).values())
            if not found:  # none inferred, or lowered away: nothing later holds a layout map
                self.layouts_gone = True
                return
            if len(found) == len(self.layout_objects) and all(
                buffer.same_as(old_buffer) and layout.same_as(old_layout)
                for (buffer, layout), (old_buffer, old_layout) in zip(found, self.layout_objects, strict=True)
            ):
                return
            self.layout_objects = found
            layouts = [buffer_layout(buffer, layout) for buffer, layout in found]
            self.writer.add_layouts(run_id, LayoutRecord(run=run_id, after=frame.index, layouts=layouts))

        self.printer.write(read)

    def passes_incomplete(self, passes: Sequence[Any], error: BaseException | None) -> None:
        """Note passes that never finished; ``write_failed`` records them once the error is known."""
        now = time.perf_counter()
        for incomplete in passes:
            frame = incomplete.state
            if isinstance(frame, _OpenPass) and frame in self.open:
                self.open.remove(frame)
                self.unfinished.append((frame, now))

    def write_failed(self, error: BaseException | None) -> None:
        """Record unfinished passes as failed: the innermost carries the error, ancestors too."""
        pending = self.unfinished + [(frame, time.perf_counter()) for frame in self.open]
        self.unfinished, self.open = [], []
        message = None if isinstance(error, StopLowering) else describe_error(error)
        for frame, ended in sorted(pending, key=lambda item: item[0].index):
            wall = max(0.0, ended - frame.started)
            self._write(frame, ended, wall, None, status=STATUS_FAILED, error=message)

    # --- TileLang PassInstrumentationTool --------------------------------------------------

    def create_pass_instrument(self) -> Any:
        return stacked_pass_instrument(self)

    def stop_instruments(self) -> list[Any]:
        """The instrument that skips passes after a stop, when a stop can be asked for: with
        neither ``stop_after`` nor ``should_stop``, TVM has one Python callback less per pass."""
        if self.stop_after or self.should_stop is not None:
            return [skip_after_stop(self)]
        return []

    @contextmanager
    def pipeline_scope(self, base_phase: Phase) -> Iterator[None]:
        previous = self.pipeline
        self.pipeline = base_phase.removeprefix("pipeline_")
        self.pipeline_seen = True
        try:
            yield
        finally:
            self.pipeline = previous

    def run_codegen(self, event: Any, next_call: Callable[[], Any]) -> Any:
        """Record codegen as the last step; passes the backend runs inside it nest under it.

        A JIT compilation also generates the host wrapper (C or LLVM) after the device kernel:
        that is its own ``host codegen`` stage, and the run's source stays the device kernel's.
        """
        if self.stop_requested:
            raise StopLowering("stopped before codegen")
        began = time.perf_counter()
        self._current_run(event.mod)
        host = self.kernel_source is not None and _target_kind(event.target) in HOST_CODEGEN_KINDS
        frame = self._open(
            event.mod, HOST_CODEGEN_STAGE if host else "codegen", str(event.name), PHASE_CODEGEN, None
        )
        self._note_started(frame)
        now = time.perf_counter()
        self.overhead += now - began
        frame.started, frame.overhead_at_start = now, self.overhead
        error: BaseException | None = None
        result: Any = None
        try:
            result = next_call()
        except BaseException as raised:
            error = raised
            raise
        finally:
            ended = time.perf_counter()
            if frame in self.open:
                self.open.remove(frame)
            source = _inspect_source(result) if error is None else None
            if source is not None:
                if not host:
                    self.kernel_source = source
                self.printer.add_source(source)
            wall = max(0.0, ended - frame.started - (self.overhead - frame.overhead_at_start))
            self._write(
                frame,
                ended,
                wall,
                None,
                ir_after_sha=text_sha256(source) if source is not None else None,
                changed=source is not None,
                scope="host" if host else "device",
                status=STATUS_FAILED if error is not None else STATUS_OK,
                error=describe_error(error),
            )
            if source is not None and not host and self.printer.source_map:
                self._note_source_spans(event, source, frame.index)
            self.overhead += time.perf_counter() - ended
        return result

    def _note_source_spans(self, event: Any, source: str, after: int) -> None:
        """Queue the kernel source's map by TileLang's ``#line`` directives (``kernel_source_spans``), when
        its backend writes them; after the codegen's ``pass`` record, before the run's ``end``."""
        from irtrace.lowering.kernel_source_spans import kernel_source_spans

        self.printer.barrier()  # the maps of every pass written: the carry is the last module's
        carried: dict[int, set[tuple[str, int]]] = {}
        by_other_rules: set[tuple[int, tuple[str, int]]] = set()
        in_blocks: set[tuple[int, tuple[str, int]]] = set()
        for item in self._carry:
            if item.carried:
                carried.setdefault(item.stmt.__chandle__(), set()).add(item.span)
                (in_blocks if item.owned else by_other_rules).add((item.stmt.__chandle__(), item.span))
        try:
            spans = kernel_source_spans(
                event.mod,
                event.target,
                str(event.name),
                source,
                carried,
                self._storage,
                in_blocks - by_other_rules,
            )
        except Exception:  # a map is extra: TileLang's codegen failing on it must not fail the run
            return
        if spans is None:
            return
        run_id = self._run_id()
        files = list(spans.files) if spans.lines is not None else []
        index = {name: number for number, name in enumerate(files)}
        carried_lines = [
            (source_line, _file_number(files, index, file), line)
            for source_line, file, line in (spans.owned if spans.lines is not None else ())
        ]
        owned = [(source_line, index[file], line) for source_line, file, line in spans.in_blocks]
        record = SourceMapRecord(
            run=run_id,
            after=after,
            ir=text_sha256(source),
            statements=spans.statements,
            with_span=spans.with_span,
            placed=spans.lines is not None,
            files=files,
            lines=list(spans.lines or ()),
            carried=carried_lines,
            owned=owned if spans.lines is not None else [],
            by="line_directives",
        )

        def write() -> None:
            self.writer.add_source_map(run_id, record)

        self.printer.write(write)

    def finish(self, error: BaseException | None) -> None:
        pass

    def _phase(self, tilelang_phase: str | None) -> tuple[Phase, str | None]:
        if self.open and self.open[0].phase == PHASE_CODEGEN:
            return PHASE_CODEGEN, None
        if self.pipeline is not None:
            return PHASE_LOWER, self.pipeline
        if tilelang_phase and tilelang_phase.startswith("pipeline_"):
            return PHASE_LOWER, tilelang_phase.removeprefix("pipeline_")
        return (PHASE_FINALIZE if self.pipeline_seen else PHASE_CHECK), None


def _file_number(files: list[str], index: dict[str, int], name: str) -> int:
    """``name``'s index in a source map's ``files`` (``index`` its inverse), appended when new."""
    number = index.get(name)
    if number is None:
        number = index[name] = len(files)
        files.append(name)
    return number


def _frontend_ran(mod: Any) -> frozenset[tuple[str, int]] | None:
    """The lines TileLang's frontend ran to build the functions of ``mod`` (``frontend_lines``);
    ``None`` when it is not known for any of them."""
    found: set[tuple[str, int]] = set()
    known = False
    for func in getattr(mod, "functions", {}).values():
        lines = frontend_lines.ran_lines(func)
        if lines is not None:
            known = True
            found |= lines
    return frozenset(found) if known else None


HOST_CODEGEN_STAGE = "host codegen"
"""The stage of a compilation's host wrapper codegen (after the device kernel's ``codegen``)."""
HOST_CODEGEN_KINDS = ("c", "llvm")
"""Target kinds TileLang generates host wrappers for (``tilelang.backend.host_codegen``)."""


def _target_kind(target: Any) -> str:
    try:
        return str(target.kind.name)
    except Exception:
        return ""


def _inspect_source(result: Any) -> str | None:
    try:
        return str(result.inspect_source())
    except Exception:
        return None


def describe_error(error: BaseException | None) -> str | None:
    """The error as recorded: its type and its whole message."""
    if error is None:
        return None
    text = str(error).strip() or type(error).__name__
    return f"{type(error).__name__}: {text}" if not text.startswith(type(error).__name__) else text


def tilelang_version() -> str:
    import tilelang

    return str(getattr(tilelang, "__version__", "unknown"))


def record_lowering(
    func: Any, writer: TraceWriter, header: RunHeader, options: LoweringOptions
) -> RecordedLowering:
    """Lower ``func`` through TileLang's real pipeline as ``options`` say, recording every pass
    into ``writer`` as the run ``header`` names.

    A lowering error is recorded (failed pass, IR before it, the error) and returned, not
    raised; the run is written either way.
    """
    import tilelang
    import tvm

    target_object = options.tvm_target or make_tvm_target(options.target)
    configs = dict(options.pass_configs)
    run = begin_run_record(
        writer,
        options.target.name,
        header.kernel,
        header.spec,
        header.args,
        str(target_object),
        configs,
        kernel_file_text=header.kernel_file_text,
        instance=header.instance,
    )
    recorder = PassRecorder(
        writer, run.run_id, options.capture, stop_after=options.stop_after, should_stop=options.should_stop
    )
    failure: BaseException | None = None
    interrupted = False
    started = time.perf_counter()
    log = capture_run_log() if options.capture.warnings else nullcontext(RunLog())
    try:
        with (
            log as captured,
            compile_session(f"irtrace:{header.kernel}", [recorder]),
            tvm.transform.PassContext(
                opt_level=3,
                config=configs,
                instruments=[
                    recorder.create_pass_instrument(),
                    *options.instruments,
                    *recorder.stop_instruments(),
                ],
            ),
            target_object,
        ):
            tilelang.lower(func, target=target_object)
    except KeyboardInterrupt:
        interrupted = True
    except Exception as error:
        # After a stop, passes are skipped; whatever then raises (our StopLowering at codegen, or
        # pipeline code meeting an unlowered module) ends the lowering we asked to end.
        if not recorder.stop_requested:
            failure = error
    if interrupted or interrupts.received() is not None:
        # Ctrl-C in a pass comes back from TVM as a bare RuntimeError: not a lowering failure.
        # What finished is kept; the run gets no end, so it reads as cut short in that pass.
        recorder.drain()
        raise KeyboardInterrupt
    recorder.write_failed(failure)
    recorder.drain()
    total = time.perf_counter() - started
    warnings, other_text = split_native_log(captured.text)
    if other_text:
        sys.stderr.write(other_text)
        sys.stderr.flush()
    stopped = recorder.stop_requested
    finished_run = writer.end_run(
        run.run_id,
        status=STATUS_FAILED if failure is not None else STATUS_OK,
        error=describe_error(failure),
        total_s=total,
        input_ir=recorder.input_sha,
        source_sha256=None
        if stopped
        else (text_sha256(recorder.kernel_source) if recorder.kernel_source else None),
        warnings=warnings,
    )
    return RecordedLowering(
        run=finished_run,
        kernel_source=recorder.kernel_source,
        error=failure,
        stopped_module=recorder.stopped_module or recorder.last_module,
        cancelled=recorder.cancelled,
    )


def record_failure(
    writer: TraceWriter,
    target: TargetSpec,
    *,
    kernel: str,
    spec: str,
    args: Mapping[str, Any] | None,
    error: str,
    kernel_file_text: str | None = None,
) -> KernelRun:
    """Record a kernel that could not even be built for ``target`` (its factory raised)."""
    run = begin_run_record(writer, target.name, kernel, spec, args, "", {}, kernel_file_text=kernel_file_text)
    return writer.end_run(
        run.run_id, status=STATUS_FAILED, error=error, total_s=None, input_ir=None, source_sha256=None
    )


def begin_run_record(
    writer: TraceWriter,
    target: str,
    kernel: str,
    spec: str,
    args: Mapping[str, Any] | None,
    target_detail: str,
    configs: Mapping[str, Any],
    *,
    kernel_file_text: str | None = None,
    instance: Instance | None = None,
) -> KernelRun:
    """Start a run in ``writer`` with the header every run carries (version, host, configs), the
    kernel's file text when known (stored once per distinct text), and for a kernel captured
    from a running program its ``instance``."""
    file_sha = writer.add_text(kernel_file_text) if kernel_file_text else None
    return writer.begin_run(
        KernelRun(
            run_id=-1,
            kernel=kernel,
            spec=spec,
            args=dict(args or {"args": [], "kwargs": {}}),
            target=target,
            target_detail=target_detail,
            pass_configs={str(k): _jsonable(v) for k, v in configs.items()},
            tilelang_version=tilelang_version(),
            host=host_facts(),
            kernel_file_sha256=file_sha,
            instance=instance,
        )
    )


def _jsonable(value: Any) -> Any:
    """A pass config value as JSON: TVM's typed values (``T.bool(True)``, ``IntImm``, ``FloatImm``,
    ``StringImm``, arrays, maps) as the plain value they hold, so that a trace reads them back
    as the value a user wrote, whether TileLang or the user made the ``PassContext``."""
    if value is None or type(value) in (bool, int, float, str):
        return value
    if isinstance(value, str):  # TVM's String: keep an exact str, not the object
        return str.__new__(str, value)
    if isinstance(value, bool):
        return bool(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    immediate = _immediate_value(value)
    if immediate is not None:
        return immediate
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, Sequence) and not isinstance(value, (bytes, bytearray)):
        return [_jsonable(v) for v in value]
    return str(value)


def _immediate_value(value: Any) -> bool | int | float | str | None:
    """The Python value a TVM ``IntImm``/``FloatImm``/``StringImm`` holds, typed by its dtype;
    ``None`` for anything else."""
    held: Any = getattr(value, "value", None)
    dtype = str(getattr(value, "dtype", ""))
    if isinstance(held, str):
        return str.__new__(str, held)
    if type(held) not in (bool, int, float) or not dtype:
        return None
    if dtype == "bool":
        return bool(held)
    if dtype.startswith(("int", "uint")):
        return int(held)
    if "float" in dtype:
        return float(held)
    return None
