"""The trace model and its file: what one lowering looked like after every pass.

A trace file is JSON Lines (``docs/trace-format.md``): a header, then per kernel and target a
``run`` record, a ``start`` and a ``pass`` record per pass and an ``end`` record, with each
distinct IR text stored once as an ``ir`` record keyed by its SHA-256, and a ``footer`` once the
file is complete. Lines are flushed as they are written, so a run killed midway (even by a
native crash) leaves a file readable up to the last completed pass that names the pass that was
running. Loading never executes code and checks every field it reads (``TraceFormatError``).
This module does not import tilelang.
"""

from __future__ import annotations

import codecs
import contextlib
import gzip
import hashlib
import json
import math
import os
import re
import stat
import zlib
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import IO, Any, cast

from irtrace.errors import InputError, NotInTraceError, OutputError, TraceFormatError
from irtrace.output import PartialFile, describe_os_error
from irtrace.resources import RESOURCE_COUNTS, BenchResult, KernelResources, resources_to_json
from irtrace.targets import canonical_target_name

SCHEMA_VERSION = 1
FORMAT_NAME = "irtrace"

STATUS_OK = "ok"
STATUS_FAILED = "failed"
STATUS_INCOMPLETE = "incomplete"
"""A run whose ``end`` record is missing: the recording process died midway."""
RUN_STATUSES = (STATUS_OK, STATUS_FAILED, STATUS_INCOMPLETE)

STOPPED_BY_TIMEOUT = "timeout"
"""The lowering process was killed after ``--timeout`` seconds."""
STOPPED_BY_CRASH = "crash"
"""The lowering process died (a native crash such as a segmentation fault)."""

PHASE_CHECK = "check"
"""Backend-independent semantic checks before the pipeline."""
PHASE_LOWER = "lower"
"""The backend's pass pipeline."""
PHASE_FINALIZE = "finalize"
"""Host/device split and device preparation after the pipeline."""
PHASE_CODEGEN = "codegen"
"""Kernel source generation; its snapshot is the kernel source."""
PHASE_MACHINE = "machine"
"""The kernel source compiled by nvcc (``irtrace record --machine-code``): stages ``ptx`` and ``sass``."""
PHASES = (PHASE_CHECK, PHASE_LOWER, PHASE_FINALIZE, PHASE_CODEGEN, PHASE_MACHINE)
SCOPES = ("module", "host", "device")
"""A pass's ``scope``: the whole module until the host/device split, then one side of it."""


def text_sha256(text: str) -> str:
    """The content key of an IR text or kernel source."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class PassRecord:
    """One pass invocation (or the final codegen step) of one run."""

    index: int
    """Position in the run, in the order passes started."""
    name: str
    """Display name; TVM's anonymous ``pass_fn`` passes are named from their Python function."""
    raw_name: str
    """The name TVM reported."""
    phase: str
    """One of ``check``, ``lower``, ``finalize``, ``codegen``, ``machine``."""
    pipeline: str | None
    """The backend pipeline it ran in (``cuda``, ``hip``, ``metal``, ``ascend``), if any."""
    depth: int
    """Nesting depth: 0 for a top-level pass."""
    parent: int | None
    """Index of the enclosing pass, for nested passes."""
    start_s: float
    """Seconds from the run's start to this pass's start."""
    wall_s: float
    """Inclusive wall time, without the recorder's own overhead."""
    self_s: float
    """Wall time minus that of nested passes."""
    changed: bool
    """Whether the printed IR after the pass differs from the IR it received."""
    ir_before: str | None
    """SHA-256 of the IR text the pass received."""
    ir_after: str | None
    """SHA-256 of the IR text after it; ``None`` when it failed. For codegen: the kernel source."""
    scope: str = "module"
    """``module`` before the host/device split, then ``host`` or ``device``."""
    status: str = STATUS_OK
    """``ok`` or ``failed``."""
    error: str | None = None
    """The error message of a failed pass."""

    @property
    def failed(self) -> bool:
        return self.status == STATUS_FAILED


@dataclass(frozen=True)
class KernelRun:
    """One kernel lowered for one target: its header facts and its passes."""

    run_id: int
    """Position of the run in its trace file."""
    kernel: str
    """Kernel name as users refer to it (``matmul``, ``gemm.py::matmul``)."""
    spec: str
    """The kernel spec as given (``examples/gemm.py::matmul(M=1024)``)."""
    args: Mapping[str, Any]
    """``{"args": [...], "kwargs": {...}}`` given to the factory, as JSON values."""
    target: str
    """Short target name (``cuda:sm_90``)."""
    target_detail: str
    """The full TVM target the pipeline ran with."""
    pass_configs: Mapping[str, Any]
    """Pass configs in effect (the jit decorator's and ``--pass-config`` ones)."""
    tilelang_version: str
    host: Mapping[str, str]
    """Machine facts: hostname, platform, python."""
    passes: tuple[PassRecord, ...] = ()
    status: str = STATUS_INCOMPLETE
    """``ok``, ``failed``, or ``incomplete`` when the recording was cut short."""
    error: str | None = None
    """Why the run failed (frontend, pass or codegen error)."""
    total_s: float | None = None
    """Wall time of the whole lowering, recorder overhead included."""
    input_ir: str | None = None
    """SHA-256 of the module handed to the pipeline."""
    source_sha256: str | None = None
    """SHA-256 of the final kernel source; ``None`` if codegen did not finish."""
    running: str | None = None
    """The pass that was running when the recording stopped (cut short, crashed or timed out)."""
    stopped_by: str | None = None
    """``timeout`` or ``crash`` when the lowering process was killed or died (``--isolate``)."""
    resources: tuple[KernelResources, ...] = ()
    """Per kernel function: registers, spills, shared memory (``--machine-code``, CUDA only)."""
    bench: BenchResult | None = None
    """The kernel's measured latency (``--bench``, on a GPU)."""

    @property
    def key(self) -> tuple[str, str]:
        return (self.kernel, self.target)

    @property
    def timed_out(self) -> bool:
        return self.stopped_by == STOPPED_BY_TIMEOUT

    def occurrence_names(self) -> list[str]:
        """``name#N`` labels, N counting earlier passes of the same name (1-based)."""
        return occurrence_labels(p.name for p in self.passes)

    def find_pass(self, query: str) -> PassRecord:
        """The pass named ``NAME`` (first occurrence) or ``NAME#N``; suffix matches allowed.

        ``LayoutInference`` finds ``tl.LayoutInference``. Raises ``NotInTraceError`` listing
        the passes when nothing matches.
        """
        name, _, number = query.partition("#")
        try:
            occurrence = int(number) if number else 1
        except ValueError:
            raise NotInTraceError(f"bad pass occurrence in {query!r}; write NAME#N with N >= 1") from None
        exact = [p for p in self.passes if p.name == name or p.raw_name == name]
        matches = exact or [p for p in self.passes if p.name.split(".")[-1] == name.split(".")[-1]]
        if len(matches) >= occurrence >= 1:
            return matches[occurrence - 1]
        names = ", ".join(dict.fromkeys(p.name for p in self.passes))
        raise NotInTraceError(
            f"pass {query!r} is not in {self.kernel} on {self.target}; "
            f"it ran {len(matches)} time(s). Passes in this run: {names}"
        )


def pass_label(name: str, occurrence: int) -> str:
    """``name#N``: the Nth pass called ``name`` in a run, as ``--pass`` and ``find_pass`` accept it."""
    return f"{name}#{occurrence}"


def occurrences(names: Iterable[str]) -> list[int]:
    """For each name, how many times it has occurred so far (1-based)."""
    seen: Counter[str] = Counter()
    numbers = []
    for name in names:
        seen[name] += 1
        numbers.append(seen[name])
    return numbers


def occurrence_labels(names: Iterable[str], *, bare_when_unique: bool = False) -> list[str]:
    """``name#N`` for each name in order; ``bare_when_unique`` leaves names that occur once bare."""
    names = list(names)
    counts = Counter(names)
    return [
        name if bare_when_unique and counts[name] == 1 else pass_label(name, number)
        for name, number in zip(names, occurrences(names), strict=True)
    ]


class LazyTexts(Mapping[str, str]):
    """IR texts of a loaded trace, decoded from their JSON line when first asked for.

    Most readers look at a few snapshots of a large trace; decoding every text up front would
    dominate the time to open it.
    """

    def __init__(self, raw_lines: dict[str, str], where: str) -> None:
        self._raw = raw_lines
        self._decoded: dict[str, str] = {}
        self._where = where

    def __getitem__(self, sha: str) -> str:
        text = self._decoded.get(sha)
        if text is None:
            line = self._raw[sha]
            try:
                decoded = json.loads(line, parse_constant=_reject_constant)["text"]
            except (ValueError, KeyError, TypeError, RecursionError):
                raise TraceFormatError(f"{self._where}: the IR record {sha[:12]} is corrupt") from None
            if not isinstance(decoded, str):
                raise TraceFormatError(f"{self._where}: the IR record {sha[:12]} holds no text")
            try:
                matches = text_sha256(decoded) == sha
            except UnicodeEncodeError:  # a lone surrogate escape: no UTF-8 text has that hash
                matches = False
            if not matches:
                raise TraceFormatError(
                    f"{self._where}: the IR text stored as {sha[:12]} does not match its SHA-256 "
                    "(the trace was edited or is corrupt)"
                )
            text = self._decoded[sha] = decoded
        return text

    def __iter__(self) -> Iterator[str]:
        return iter(self._raw)

    def __len__(self) -> int:
        return len(self._raw)

    def __contains__(self, sha: object) -> bool:
        return sha in self._raw

    def size(self, sha: str) -> int:
        """About the length of the text, without decoding it."""
        return len(self._raw.get(sha, ""))


@dataclass(frozen=True)
class Trace:
    """A loaded trace file: its runs and the IR texts they refer to."""

    runs: tuple[KernelRun, ...]
    texts: Mapping[str, str] = field(repr=False)
    """IR texts and kernel sources by SHA-256."""
    created: str = ""
    path: str | None = None
    truncated: bool = False
    """The file ended in a partial line or without a run's ``end``: a cut-short recording."""

    def verify(self) -> Trace:
        """Decode every stored text now, checking it against its SHA-256 (``TraceFormatError``).

        Loading decodes texts lazily; a reader that cannot report an error midway (the pass
        browser) or reads most texts anyway calls this first. Returns the trace.
        """
        for sha in self.texts:
            self.texts[sha]
        return self

    def text(self, sha: str | None) -> str:
        """The IR text stored under ``sha`` ('' for ``None``)."""
        if sha is None:
            return ""
        try:
            return self.texts[sha]
        except KeyError:
            raise TraceFormatError(f"trace refers to IR {sha[:12]} that it does not hold") from None

    def ir_after(self, record: PassRecord) -> str:
        """IR after the pass, or the IR it received when it failed."""
        return self.text(record.ir_after if record.ir_after is not None else record.ir_before)

    def ir_before(self, record: PassRecord) -> str:
        return self.text(record.ir_before)

    def text_size(self, sha: str | None) -> int:
        """About the length of a stored text, cheaply (for deciding what to compute lazily)."""
        if sha is None:
            return 0
        if isinstance(self.texts, LazyTexts):
            return self.texts.size(sha)
        return len(self.texts.get(sha, ""))

    def kernel_source(self, run: KernelRun) -> str | None:
        return self.texts.get(run.source_sha256) if run.source_sha256 else None

    def kernels(self) -> list[str]:
        return list(dict.fromkeys(run.kernel for run in self.runs))

    def targets(self) -> list[str]:
        return list(dict.fromkeys(run.target for run in self.runs))

    def select(self, kernel: str | None = None, target: str | None = None) -> list[KernelRun]:
        """Runs of ``kernel`` (full or short name) on ``target``; ``None`` matches any.

        ``target`` may be an alias, as on ``irtrace record -t`` (``cuda`` is ``cuda:sm_90``).
        ``NAME#N`` picks the Nth run of a kernel on each target, for traces that hold it more than
        once (``irtrace merge`` of two recordings). An empty selection raises ``NotInTraceError``
        listing what the trace holds.
        """
        if target is not None:
            target = canonical_target_name(target)
        wanted, occurrence = self._kernel_query(kernel)
        labels = self.run_labels()
        matches = [
            run
            for run in self.runs
            if (wanted is None or wanted in (run.kernel, run.kernel.split("::")[-1]))
            and (target is None or run.target == target)
            and (occurrence is None or labels[run.run_id].endswith(f"#{occurrence}"))
        ]
        if not matches:
            asked = " on ".join(x for x in (kernel, target) if x) or "a run"
            raise NotInTraceError(f"{asked} is not in the trace; it holds: {self._contents()}")
        return matches

    def _kernel_query(self, kernel: str | None) -> tuple[str | None, int | None]:
        """``(name, N)`` for ``NAME#N`` unless a kernel is called that whole text."""
        if kernel is None or "#" not in kernel:
            return kernel, None
        if any(kernel in (run.kernel, run.kernel.split("::")[-1]) for run in self.runs):
            return kernel, None
        name, _, number = kernel.rpartition("#")
        if not number.isdigit() or int(number) < 1:
            raise NotInTraceError(f"bad run number in {kernel!r}; write KERNEL#N with N >= 1")
        return name, int(number)

    def run_labels(self) -> dict[int, str]:
        """Run id -> ``kernel``, or ``kernel#N`` when the trace holds that kernel and target N times."""
        counts = Counter(run.key for run in self.runs)
        seen: Counter[tuple[str, str]] = Counter()
        labels = {}
        for run in self.runs:
            seen[run.key] += 1
            labels[run.run_id] = run.kernel if counts[run.key] == 1 else f"{run.kernel}#{seen[run.key]}"
        return labels

    def find_run(self, kernel: str | None = None, target: str | None = None) -> KernelRun:
        """The run for ``kernel`` and ``target``; either may be omitted when it is unambiguous.

        With both given and the pair recorded more than once, the last run is taken
        (``KERNEL#N`` picks another).
        """
        matches = self.select(kernel, target)
        if len(matches) == 1 or (kernel and target):
            return matches[-1]
        raise NotInTraceError(
            f"several runs match; name --kernel and --target. The trace holds: {self._contents()}"
        )

    def _contents(self) -> str:
        labels = self.run_labels()
        return "; ".join(f"{labels[run.run_id]} on {run.target}" for run in self.runs) or "no runs"

    def line_changes(self, record: PassRecord) -> tuple[int, int]:
        """Lines added and removed by the pass (0, 0 when unchanged)."""
        if not record.changed or record.ir_after is None:
            return (0, 0)
        return count_line_changes(self.text(record.ir_before), self.text(record.ir_after))


def count_line_changes(before: str, after: str) -> tuple[int, int]:
    """Added and removed lines, matching lines as a multiset (cheap; passdiff does real diffs)."""
    old = Counter(before.splitlines())
    new = Counter(after.splitlines())
    return (sum((new - old).values()), sum((old - new).values()))


def host_facts() -> dict[str, str]:
    """Where a trace was recorded."""
    import platform
    import socket

    return {
        "hostname": socket.gethostname(),
        "platform": platform.platform(),
        "python": platform.python_version(),
    }


# ----------------------------------------------------------------------------- writing


class TraceWriter:
    """Appends runs to a trace file (or only to memory when ``path`` is ``None``).

    Every line is flushed when written, so what is on disk is always readable up to its last
    line. With ``partial``, lines go to ``NAME.partial`` (locked against a second writer) and
    ``close`` renames it onto ``NAME``: an existing trace is replaced only by a complete one.
    ``close`` ends the file with a ``footer``; ``abandon`` stops without one. A write that fails
    raises ``OutputError``, and so does every later one.
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        created: str | None = None,
        partial: bool = False,
    ) -> None:
        from datetime import datetime, timezone

        self.path = Path(path) if path is not None else None
        self.created = created or datetime.now(timezone.utc).isoformat(timespec="seconds")
        self._texts: dict[str, str] = {}
        self._runs: dict[int, KernelRun] = {}
        self._next_run_id = 0
        self._output: PartialFile | None = None
        self._stream: IO[bytes] | None = None
        self._closed = False
        self._adopted_starts: dict[int, dict[int, str]] = {}
        self.failure: OutputError | None = None
        """The write error that stopped this writer, if any."""
        if self.path is not None:
            if partial:
                self._output = PartialFile(self.path)
                self._stream = self._compressed(self._output.handle)
            else:
                self._stream = self._open_direct(self.path)
        header = {
            "record": "header",
            "format": FORMAT_NAME,
            "schema": SCHEMA_VERSION,
            "created": self.created,
            "footer": True,
        }
        try:
            self._write(header)
        except OutputError:
            self.abandon(keep=False)  # no caller holds this writer yet: leave no empty NAME.partial
            raise

    @property
    def partial_path(self) -> Path | None:
        """``NAME.partial`` while a partial writer is open."""
        return self._output.partial if self._output is not None else None

    @property
    def replaced_stale_partial(self) -> bool:
        """A ``NAME.partial`` left by a killed writer was there and is being replaced."""
        return self._output is not None and self._output.stale

    def _compressed(self, handle: IO[bytes]) -> IO[bytes]:
        if self.path is not None and self.path.suffix == ".gz":
            return cast(IO[bytes], gzip.GzipFile(filename=self.path.name, fileobj=handle, mode="wb"))
        return handle

    def _open_direct(self, path: Path) -> IO[bytes]:
        try:
            if path.parent and not path.parent.exists():
                path.parent.mkdir(parents=True, exist_ok=True)
            return self._compressed(open(path, "wb"))  # closed by close()
        except OSError as error:
            raise OutputError(f"cannot write {str(path)!r}: {describe_os_error(error)}") from None

    def _write(self, record: Mapping[str, Any]) -> None:
        if self.failure is not None:
            raise self.failure
        if self._stream is None:
            return
        line = json.dumps(record, ensure_ascii=False, separators=(",", ":"), allow_nan=False) + "\n"
        try:
            self._stream.write(line.encode("utf-8"))
            self._stream.flush()
        except OSError as error:
            where = self.partial_path or self.path
            self.failure = OutputError(f"cannot write {str(where)!r}: {describe_os_error(error)}")
            raise self.failure from None

    def add_text(self, text: str, sha: str | None = None) -> str:
        """Store an IR text once; returns its key."""
        key = sha or text_sha256(text)
        if key not in self._texts:
            self._write({"record": "ir", "sha256": key, "text": text})
            self._texts[key] = text
        return key

    def begin_run(self, run: KernelRun) -> KernelRun:
        """Start a run; the returned copy carries its ``run_id``."""
        run = replace(
            run, run_id=self._next_run_id, passes=(), status=STATUS_INCOMPLETE, running=None, stopped_by=None
        )
        self._next_run_id += 1
        self._runs[run.run_id] = run
        header = {k: v for k, v in _run_to_json(run).items() if k not in _END_ONLY_RUN_FIELDS}
        self._write({"record": "run", **header})
        return run

    def start_pass(self, run_id: int, record: PassRecord) -> None:
        """Note that a pass began (``record`` as far as it is known then): if the process dies in
        it, the trace says which pass it was and holds the IR it received."""
        fields = asdict(record)
        self._write({"record": "start", "run": run_id, **{key: fields[key] for key in _START_FIELDS}})

    def add_pass(self, run_id: int, record: PassRecord) -> None:
        run = self._runs[run_id]
        self._runs[run_id] = replace(run, passes=(*run.passes, record))
        self._write({"record": "pass", "run": run_id, **asdict(record)})

    def end_run(
        self,
        run_id: int,
        *,
        status: str,
        error: str | None,
        total_s: float | None,
        input_ir: str | None,
        source_sha256: str | None,
        running: str | None = None,
        stopped_by: str | None = None,
    ) -> KernelRun:
        run = replace(
            self._runs[run_id],
            passes=tuple(sorted(self._runs[run_id].passes, key=lambda p: p.index)),
            status=status,
            error=error,
            total_s=total_s,
            input_ir=input_ir,
            source_sha256=source_sha256,
            running=running,
            stopped_by=stopped_by,
        )
        self._runs[run_id] = run
        end: dict[str, Any] = {
            "record": "end",
            "run": run_id,
            "status": status,
            "error": error,
            "total_s": total_s,
            "input_ir": input_ir,
            "source_sha256": source_sha256,
        }
        if running is not None:
            end["running"] = running
        if stopped_by is not None:
            end["stopped_by"] = stopped_by
        self._write(end)
        return run

    def add_machine_code(
        self, run_id: int, passes: Sequence[PassRecord], resources: Sequence[KernelResources]
    ) -> KernelRun:
        """Add a run's machine-code stages (phase ``machine``) and resources, after its ``end``.

        A separate record, so the compile can finish after later runs began; a failed stage
        makes an ``ok`` run ``failed`` with its error.
        """
        self._write(
            {
                "record": "machine",
                "run": run_id,
                "passes": [asdict(record) for record in passes],
                "resources": resources_to_json(resources),
            }
        )
        run = self._runs[run_id] = with_machine_code(self._runs[run_id], passes, resources)
        return run

    def add_bench(self, run_id: int, bench: BenchResult) -> KernelRun:
        """Add a run's measured latency (``irtrace record --bench``), after its ``end``."""
        self._write({"record": "bench", "run": run_id, **bench.to_json()})
        run = self._runs[run_id] = replace(self._runs[run_id], bench=bench)
        return run

    def add_run(self, run: KernelRun, texts: Mapping[str, str]) -> KernelRun:
        """Copy a run (and the texts it needs) from another trace."""
        for sha in _shas_of(run):
            self.add_text(texts[sha], sha)
        started = self.begin_run(run)
        machine = [record for record in run.passes if record.phase == PHASE_MACHINE]
        for record in run.passes:
            if record.phase != PHASE_MACHINE:
                self.add_pass(started.run_id, record)
        status, error = run.status, run.error
        if machine and status == STATUS_FAILED and any(r.failed for r in machine):
            status, error = STATUS_OK, None  # the lowering's own outcome; the stage fails it again
        ended = self.end_run(
            started.run_id,
            status=status,
            error=error,
            total_s=run.total_s,
            input_ir=run.input_ir,
            source_sha256=run.source_sha256,
            running=run.running,
            stopped_by=run.stopped_by,
        )
        if machine or run.resources:
            ended = self.add_machine_code(started.run_id, machine, run.resources)
        if run.bench is not None:
            ended = self.add_bench(started.run_id, run.bench)
        return ended

    def run(self, run_id: int) -> KernelRun:
        """The run as written so far."""
        return self._runs[run_id]

    def trace(self) -> Trace:
        """What has been written so far, as a ``Trace``."""
        path = str(self.path) if self.path else None
        return Trace(tuple(self._runs.values()), dict(self._texts), self.created, path)

    # --- child processes (``irtrace record --isolate``) ------------------------------------------

    def redirect(self, path: str | os.PathLike[str]) -> None:
        """In a forked child: write every further line to ``path`` (plain JSON Lines, no header).

        The parent's file stays untouched; the parent copies the child's lines with ``adopt``.
        """
        self._output = None
        self._stream = open(path, "wb")  # noqa: SIM115 - the child exits without closing it

    def adopt(self, lines: list[str], where: str) -> list[KernelRun]:
        """Copy lines a child wrote after ``redirect`` (a cut last line is dropped); returns its runs.

        Runs the child did not end stay open here; ``started_passes`` says what they were running.
        """
        run_ids: list[int] = []
        complete = [line for line in lines if line.strip()]
        for number, line in enumerate(complete, start=1):
            try:
                record = _decode_line(line)
            except TraceFormatError:
                if number == len(complete):
                    break  # the child died writing it
                raise
            kind = record.get("record")
            fields = _Fields(record, where, number, kind)
            if kind == "ir":
                self.add_text(fields.text("text"), fields.sha("sha256"))
            elif kind == "run":
                run = _run_from(fields)
                if run.run_id != self._next_run_id:
                    raise TraceFormatError(f"{where}:{number}: run {run.run_id} is out of order")
                run_ids.append(self.begin_run(run).run_id)
            elif kind == "start":
                run_id, started = fields.id("run"), _start_from(fields)
                self._adopted_starts.setdefault(run_id, {})[started.index] = started.name
                self.start_pass(run_id, started)
            elif kind == "pass":
                self.add_pass(fields.id("run"), _pass_from(fields))
            elif kind == "end":
                self.end_run(fields.id("run"), **_end_from(fields))
            elif kind == "machine":
                self.add_machine_code(fields.id("run"), *_machine_from(fields))
            elif kind == "bench":
                self.add_bench(fields.id("run"), _bench_from(fields))
        return [self._runs[run_id] for run_id in run_ids]

    def started_passes(self, run_id: int) -> dict[int, str]:
        """Index -> name of the passes a child noted as started for ``run_id`` (see ``adopt``)."""
        return self._adopted_starts.get(run_id, {})

    # --- finishing --------------------------------------------------------------------------

    def close(self) -> None:
        """Finish the file: write the footer, and put a partial file in place of the output."""
        if self._closed:
            return
        self._closed = True
        if self.failure is None and self._stream is not None:
            self._write({"record": "footer", "runs": len(self._runs)})
        self._close_stream()
        if self._output is not None:
            if self.failure is not None:
                self._output.discard()
                raise self.failure
            self._output.commit()

    def abandon(self, *, keep: bool) -> Path | None:
        """Stop without a footer. A partial file is kept (and returned) with ``keep``, else removed;
        the output is left as it was."""
        if self._closed:
            return None
        self._closed = True
        with contextlib.suppress(OSError):
            self._close_stream()
        if self._output is None:
            return None
        if keep and self.failure is None:
            self._output.keep()
            return self._output.partial
        self._output.discard()
        return None

    def _close_stream(self) -> None:
        stream, self._stream = self._stream, None
        if stream is None:
            return
        try:
            if self._output is None:
                stream.close()
            else:  # a gzip stream ends here; the partial file itself is closed by commit/discard/keep
                if stream is not self._output.handle:
                    stream.close()
                self._output.handle.flush()
        except OSError as error:
            if self.failure is None:
                self.failure = OutputError(f"cannot write {str(self.path)!r}: {describe_os_error(error)}")

    def __enter__(self) -> TraceWriter:
        return self

    def __exit__(self, kind: type[BaseException] | None, *exc: object) -> None:
        if kind is None:
            self.close()
        else:
            self.abandon(keep=True)


_START_FIELDS = (
    "index",
    "name",
    "raw_name",
    "phase",
    "pipeline",
    "depth",
    "parent",
    "start_s",
    "ir_before",
    "scope",
)
"""What a ``start`` record holds of a pass: everything known before it runs."""
UNFINISHED = "did not finish: the recording stopped while this pass was running"
"""The error of a pass that started and has no record: it was running when the recording stopped."""

_END_ONLY_RUN_FIELDS = ("passes", "running", "stopped_by", "resources", "bench")


def _shas_of(run: KernelRun) -> Iterator[str]:
    for sha in (run.input_ir, run.source_sha256):
        if sha:
            yield sha
    for record in run.passes:
        for sha in (record.ir_before, record.ir_after):
            if sha:
                yield sha


def with_machine_code(
    run: KernelRun, passes: Sequence[PassRecord], resources: Sequence[KernelResources]
) -> KernelRun:
    """``run`` with its machine-code stages and resources; a failed stage fails an ``ok`` run."""
    run = replace(
        run,
        passes=tuple(sorted((*run.passes, *passes), key=lambda p: p.index)),
        resources=tuple(resources) or run.resources,
    )
    failed = next((record for record in passes if record.failed), None)
    if failed is not None and run.status == STATUS_OK:
        run = replace(run, status=STATUS_FAILED, error=failed.error)
    return run


def _run_to_json(run: KernelRun) -> dict[str, Any]:
    data = asdict(run)
    data["run"] = data.pop("run_id")
    return data


def merge_traces(paths: Iterable[str | os.PathLike[str]], output: str | os.PathLike[str]) -> Trace:
    """Join trace files into one; runs keep their order, IR texts are stored once.

    Every input is read before the output is touched, and the output is replaced only once it is
    complete, so ``merge A B -o A`` cannot lose A.
    """
    return write_merged([load_trace(path) for path in paths], output)


def write_merged(traces: Sequence[Trace], output: str | os.PathLike[str]) -> Trace:
    """Write the runs of loaded ``traces`` into one file, through ``NAME.partial``."""
    writer = TraceWriter(output, partial=True)
    try:
        for trace in traces:
            for run in trace.runs:
                writer.add_run(run, trace.texts)
    except BaseException:
        writer.abandon(keep=False)
        raise
    writer.close()
    return writer.trace()


def merge_warnings(traces: Sequence[Trace]) -> list[str]:
    """What a user merging ``traces`` should know: repeated kernel x target pairs, mixed versions."""
    runs = [run for trace in traces for run in trace.runs]
    warnings = []
    counts = Counter(run.key for run in runs)
    for (kernel, target), count in counts.items():
        if count > 1:
            labels = ", ".join(f"{kernel}#{n}" for n in range(1, count + 1))
            warnings.append(
                f"{kernel} on {target} is in the merged trace {count} times; select them as {labels}"
            )
    versions: dict[str, list[str]] = {}
    for trace in traces:
        for run in trace.runs:
            versions.setdefault(run.tilelang_version, [])
            name = Path(trace.path).name if trace.path else "?"
            if name not in versions[run.tilelang_version]:
                versions[run.tilelang_version].append(name)
    if len(versions) > 1:
        listed = "; ".join(f"{version} ({', '.join(files)})" for version, files in versions.items())
        warnings.append(f"the runs were lowered by different tilelang versions: {listed}")
    return warnings


# ----------------------------------------------------------------------------- reading

_IR_PREFIX = '{"record":"ir","sha256":"'
_SHA_END = len(_IR_PREFIX) + 64
_SHA = re.compile(r"[0-9a-f]{64}\Z")
MAX_ID = 2**31 - 1
"""Largest run id or pass index a trace may hold."""
MAX_DEPTH = 64
"""Deepest pass nesting a trace may hold (TileLang's pipelines nest two or three levels)."""
MAX_SECONDS = 1e9
"""Largest time a trace may hold."""
MAX_JSON_NESTING = 32
"""Deepest nesting of objects and lists inside a field (``args``, ``pass_configs``)."""
MAX_DECOMPRESSED = 8 << 30
"""Largest text a ``.gz`` trace may decompress to."""


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _decode_line(line: str) -> dict[str, Any]:
    """One JSON object; anything else (NaN, nesting too deep for the parser) is a format error."""
    try:
        record = json.loads(line, parse_constant=_reject_constant)
    except (ValueError, RecursionError) as error:
        reason = "nested too deeply" if isinstance(error, RecursionError) else "not valid JSON"
        raise TraceFormatError(reason) from None
    if not isinstance(record, dict):
        raise TraceFormatError("not a JSON object")
    if "\\ud" in line.lower() and not _encodable(record):
        raise TraceFormatError("text that is not Unicode (a lone surrogate escape)")
    return record


def _encodable(record: dict[str, Any]) -> bool:
    """Whether every string in ``record`` is valid Unicode (JSON escapes can make lone surrogates)."""
    try:
        json.dumps(record, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _nesting(value: Any) -> int:
    """How deeply lists and objects nest in ``value`` (without recursion)."""
    deepest = 0
    stack = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            items: Iterable[Any] = item.values()
        elif isinstance(item, list):
            items = item
        else:
            continue
        deepest = max(deepest, depth + 1)
        if deepest > MAX_JSON_NESTING:
            return deepest
        stack.extend((child, depth + 1) for child in items)
    return deepest


def _finite_numbers(value: Any) -> bool:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, float) and not math.isfinite(item):
            return False
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return True


_REQUIRED: Any = object()


class _Fields:
    """Typed access to one record's fields; a missing or mistyped field is a ``TraceFormatError``."""

    def __init__(self, record: Mapping[str, Any], where: str, number: int, kind: object) -> None:
        self.record = record
        self.where = where
        self.number = number
        self.kind = kind

    def fail(self, key: str, expected: str) -> TraceFormatError:
        if key not in self.record:
            return TraceFormatError(f"{self.where}:{self.number}: {self.kind} record without {key!r}")
        return TraceFormatError(
            f"{self.where}:{self.number}: {self.kind} record: {key!r} must be {expected}, "
            f"not {_show(self.record[key])}"
        )

    def _get(self, key: str, default: Any) -> Any:
        if key in self.record:
            return self.record[key]
        if default is _REQUIRED:
            raise self.fail(key, "given")
        return default

    def id(self, key: str, *, maximum: int = MAX_ID, default: Any = _REQUIRED) -> int:
        value = self._get(key, default)
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= maximum:
            raise self.fail(key, f"an integer from 0 to {maximum}")
        return value

    def optional_id(self, key: str) -> int | None:
        return None if self._get(key, None) is None else self.id(key)

    def text(self, key: str, *, default: Any = _REQUIRED) -> str:
        value = self._get(key, default)
        if not isinstance(value, str):
            raise self.fail(key, "a string")
        return value

    def optional_text(self, key: str) -> str | None:
        return None if self._get(key, None) is None else self.text(key)

    def choice(self, key: str, values: Sequence[str], *, default: Any = _REQUIRED) -> str:
        value = self._get(key, default)
        if value not in values:
            raise self.fail(key, " or ".join(repr(v) for v in values))
        return str(value)

    def seconds(self, key: str) -> float:
        value = self._get(key, _REQUIRED)
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or not 0 <= value <= MAX_SECONDS  # first: a 400-digit int does not convert to float
            or not math.isfinite(value)
        ):
            raise self.fail(key, f"a number of seconds from 0 to {MAX_SECONDS:g}")
        return float(value)

    def optional_seconds(self, key: str) -> float | None:
        return None if self._get(key, None) is None else self.seconds(key)

    def flag(self, key: str) -> bool:
        value = self._get(key, _REQUIRED)
        if not isinstance(value, bool):
            raise self.fail(key, "true or false")
        return value

    def sha(self, key: str) -> str:
        value = self._get(key, _REQUIRED)
        if not isinstance(value, str) or not _SHA.match(value):
            raise self.fail(key, "a SHA-256 (64 lowercase hex digits)")
        return value

    def optional_sha(self, key: str) -> str | None:
        return None if self._get(key, None) is None else self.sha(key)

    def object(self, key: str, *, strings: bool = False, default: Any = _REQUIRED) -> dict[str, Any]:
        value = self._get(key, default)
        if not isinstance(value, dict):
            raise self.fail(key, "an object")
        if strings and not all(isinstance(v, str) for v in value.values()):
            raise self.fail(key, "an object of strings")
        if _nesting(value) > MAX_JSON_NESTING:
            raise self.fail(key, f"nested at most {MAX_JSON_NESTING} deep")
        if not _finite_numbers(value):
            raise self.fail(key, "free of NaN and infinite numbers")
        return value


def _run_from(fields: _Fields) -> KernelRun:
    args = fields.object("args")
    for key, kind in (("args", list), ("kwargs", dict)):
        if key in args and not isinstance(args[key], kind):
            raise TraceFormatError(
                f"{fields.where}:{fields.number}: run record: 'args.{key}' must be "
                f"{'a list' if kind is list else 'an object'}, not {_show(args[key])}"
            )
    return KernelRun(
        run_id=fields.id("run"),
        kernel=fields.text("kernel"),
        spec=fields.text("spec"),
        args=args,
        target=fields.text("target"),
        target_detail=fields.text("target_detail"),
        pass_configs=fields.object("pass_configs"),
        tilelang_version=fields.text("tilelang_version"),
        host=fields.object("host", strings=True),
    )


def _pass_from(fields: _Fields) -> PassRecord:
    depth = fields.id("depth", maximum=MAX_DEPTH)
    parent = fields.optional_id("parent")
    index = fields.id("index")
    if (parent is None) != (depth == 0) or (parent is not None and parent >= index):
        raise TraceFormatError(
            f"{fields.where}:{fields.number}: pass record {index}: parent {parent} and depth {depth} "
            "do not fit (a nested pass has depth >= 1 and a parent that started before it)"
        )
    return PassRecord(
        index=index,
        name=fields.text("name"),
        raw_name=fields.text("raw_name"),
        phase=fields.choice("phase", PHASES),
        pipeline=fields.optional_text("pipeline"),
        depth=depth,
        parent=parent,
        start_s=fields.seconds("start_s"),
        wall_s=fields.seconds("wall_s"),
        self_s=fields.seconds("self_s"),
        changed=fields.flag("changed"),
        ir_before=fields.optional_sha("ir_before"),
        ir_after=fields.optional_sha("ir_after"),
        scope=fields.choice("scope", SCOPES, default="module"),
        status=fields.choice("status", (STATUS_OK, STATUS_FAILED), default=STATUS_OK),
        error=fields.optional_text("error"),
    )


def _start_from(fields: _Fields) -> PassRecord:
    """The pass as it started, failed with ``UNFINISHED`` until its own record says otherwise."""
    name = fields.text("name")
    depth = fields.id("depth", maximum=MAX_DEPTH, default=0)
    parent = fields.optional_id("parent")
    index = fields.id("index")
    if (parent is None) != (depth == 0) or (parent is not None and parent >= index):
        raise TraceFormatError(
            f"{fields.where}:{fields.number}: start record {index}: "
            f"parent {parent} and depth {depth} do not fit"
        )
    start_s = fields.optional_seconds("start_s")
    return PassRecord(
        index=index,
        name=name,
        raw_name=fields.text("raw_name", default=name),
        phase=fields.choice("phase", PHASES, default=PHASE_LOWER),
        pipeline=fields.optional_text("pipeline"),
        depth=depth,
        parent=parent,
        start_s=start_s or 0.0,
        wall_s=0.0,
        self_s=0.0,
        changed=False,
        ir_before=fields.optional_sha("ir_before"),
        ir_after=None,
        scope=fields.choice("scope", SCOPES, default="module"),
        status=STATUS_FAILED,
        error=UNFINISHED,
    )


def _end_from(fields: _Fields) -> dict[str, Any]:
    stopped_by = fields.optional_text("stopped_by")
    return {
        "status": fields.choice("status", RUN_STATUSES),
        "error": fields.optional_text("error"),
        "total_s": fields.optional_seconds("total_s"),
        "input_ir": fields.optional_sha("input_ir"),
        "source_sha256": fields.optional_sha("source_sha256"),
        "running": fields.optional_text("running"),
        "stopped_by": stopped_by,
    }


def _machine_from(fields: _Fields) -> tuple[list[PassRecord], list[KernelResources]]:
    items = fields.record.get("passes", [])
    if not isinstance(items, list) or not all(isinstance(item, dict) for item in items):
        raise fields.fail("passes", "a list of pass objects")
    passes = [_pass_from(_Fields(item, fields.where, fields.number, "machine pass")) for item in items]
    resources = []
    for function, value in fields.object("resources", default={}).items():
        if not isinstance(value, dict):
            raise fields.fail("resources", "an object of objects")
        item = _Fields(value, fields.where, fields.number, f"resources of {function!r}")
        counts = {name: item.id(name) for name in RESOURCE_COUNTS}
        resources.append(
            KernelResources(
                function=function,
                arch=item.text("arch"),
                dynamic_smem=item.optional_id("dynamic_smem"),
                **counts,
            )
        )
    return passes, resources


def _bench_from(fields: _Fields) -> BenchResult:
    return BenchResult(
        latency_ms=fields.optional_seconds("latency_ms"),
        device=fields.text("device", default=""),
        source_sha256=fields.optional_sha("source_sha256"),
        backend=fields.text("backend", default=""),
        warmup=fields.id("warmup", default=0),
        repeat=fields.id("repeat", default=0),
        error=fields.optional_text("error"),
    )


def load_trace(path: str | os.PathLike[str]) -> Trace:
    """Read a trace file; a file cut short (plain or ``.gz``) loads up to its last complete line.

    Raises ``InputError`` for a missing file and ``TraceFormatError`` for anything that is not
    an irtrace trace, has a field of the wrong type, or is of a newer schema.
    """
    file = Path(path)
    try:
        mode = file.stat().st_mode
    except FileNotFoundError:
        raise InputError(f"trace file {str(file)!r} does not exist") from None
    except OSError as error:
        raise InputError(f"cannot read {str(file)!r}: {describe_os_error(error)}") from None
    if stat.S_ISDIR(mode):
        raise InputError(f"{str(file)!r} is a directory; give a trace file written by `irtrace record`")
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        raise InputError(f"{str(file)!r} is a device, not a trace file")
    try:
        with open(file, "rb") as handle:
            data = handle.read()
    except OSError as error:
        raise TraceFormatError(
            f"{str(file)!r} is not a readable trace file: {describe_os_error(error)}"
        ) from None
    cut = False
    if data[:2] == b"\x1f\x8b":
        data, cut = _gunzip(data, str(file))
    decoder = codecs.getincrementaldecoder("utf-8")()
    try:
        text = decoder.decode(data, final=False)
    except UnicodeDecodeError as error:
        raise TraceFormatError(f"{str(file)!r} is not a trace: not UTF-8 text ({error.reason})") from None
    if decoder.getstate()[0]:
        cut = True  # the file ends inside a character: cut short
    text = text.removeprefix("\ufeff")  # a byte-order mark, added by some Windows editors
    return parse_trace_lines(text.split("\n"), str(file), cut=cut)


def _gunzip(data: bytes, where: str) -> tuple[bytes, bool]:
    """Decompress every gzip member; a stream that stops early (a killed writer) is not an error."""
    parts: list[bytes] = []
    total = 0
    while data:
        stream = zlib.decompressobj(16 + zlib.MAX_WBITS)
        try:
            chunk = stream.decompress(data, MAX_DECOMPRESSED - total + 1)
        except zlib.error as error:
            if parts or total:
                return b"".join(parts), True
            raise TraceFormatError(f"{where!r} is not a readable trace file: {error}") from None
        total += len(chunk)
        if total > MAX_DECOMPRESSED:
            raise TraceFormatError(f"{where!r} decompresses to more than {MAX_DECOMPRESSED >> 30} GiB")
        parts.append(chunk)
        if not stream.eof:
            if stream.unconsumed_tail:
                raise TraceFormatError(f"{where!r} decompresses to more than {MAX_DECOMPRESSED >> 30} GiB")
            return b"".join(parts), True  # no end-of-stream marker: the writer was killed
        data = stream.unused_data
    return b"".join(parts), False


@dataclass
class _Parsed:
    """What ``parse_trace_lines`` has read so far."""

    raw_texts: dict[str, str] = field(default_factory=dict)
    runs: dict[int, KernelRun] = field(default_factory=dict)
    passes: dict[int, dict[int, PassRecord]] = field(default_factory=dict)
    starts: dict[int, dict[int, PassRecord]] = field(default_factory=dict)
    ended: set[int] = field(default_factory=set)
    created: str = ""
    footer_expected: bool = False
    footer_seen: bool = False


def parse_trace_lines(lines: list[str], where: str = "<trace>", *, cut: bool = False) -> Trace:
    """Build a ``Trace`` from the file's lines (see ``load_trace``); ``cut``: the file itself was
    found cut short (a ``.gz`` stream without its end)."""
    parsed = _Parsed()
    truncated = cut
    header_seen = False
    last = len(lines) - 1
    while last >= 0 and not lines[last].strip():
        last -= 1
    if last < 0:
        raise TraceFormatError(f"{where} is empty; it is not an irtrace trace")
    # Lines are written whole with their newline: only a last line without one can be a cut write.
    last_is_cut_candidate = last == len(lines) - 1
    for number, line in enumerate(lines[: last + 1], start=1):
        if not line.strip():
            continue
        if (
            header_seen
            and not (number == last + 1 and last_is_cut_candidate)
            and line.startswith(_IR_PREFIX)
            and line.endswith('"}')
            and line[_SHA_END : _SHA_END + 2] == '",'
            and _SHA.match(line[len(_IR_PREFIX) : _SHA_END])
        ):
            # IR texts are most of a trace: keep the line, decode the text when it is read.
            if parsed.footer_seen:
                raise TraceFormatError(f"{where}:{number}: a record after the trace's footer")
            parsed.raw_texts[line[len(_IR_PREFIX) : _SHA_END]] = line
            continue
        try:
            record = _decode_line(line)
        except TraceFormatError as error:
            if number == last + 1 and last_is_cut_candidate and header_seen:
                truncated = True  # a write cut short by a kill: keep what came before
                break
            if not header_seen:
                raise TraceFormatError(
                    f"{where}:{number}: not a trace record ({error.message}); it is not an irtrace trace"
                ) from None
            raise TraceFormatError(
                f"{where}:{number}: not a trace record ({error.message}; "
                "corrupt file, or not written by irtrace)"
            ) from None
        kind = record.get("record")
        if not header_seen:
            _read_header(record, where, parsed)
            header_seen = True
            continue
        if parsed.footer_seen and kind != "header":  # a second header says more: two traces joined
            raise TraceFormatError(f"{where}:{number}: a record after the trace's footer")
        if not isinstance(kind, str):
            raise TraceFormatError(f"{where}:{number}: a record without a 'record' kind")
        _read_record(kind, _Fields(record, where, number, kind), parsed)
    return _finish(parsed, where, truncated)


def _read_header(record: Mapping[str, Any], where: str, parsed: _Parsed) -> None:
    if record.get("record") != "header" or record.get("format") != FORMAT_NAME:
        raise TraceFormatError(f"{where} is not an irtrace trace (no irtrace header on its first line)")
    schema = record.get("schema")
    if isinstance(schema, bool) or not isinstance(schema, int) or schema < 1:
        raise TraceFormatError(
            f"{where} has an invalid trace schema {_show(schema)}; it must be a positive integer"
        )
    if schema > SCHEMA_VERSION:
        raise TraceFormatError(
            f"{where} has trace schema {schema}, newer than this irtrace understands "
            f"({SCHEMA_VERSION}); upgrade tilelang-devtools to read it"
        )
    created = record.get("created", "")
    parsed.created = created if isinstance(created, str) else ""
    parsed.footer_expected = record.get("footer") is True


def _read_record(kind: str, fields: _Fields, parsed: _Parsed) -> None:
    where, number = fields.where, fields.number
    if kind == "header":
        raise TraceFormatError(
            f"{where}:{number}: a second header (two traces joined by hand?); join traces with irtrace merge"
        )
    if kind == "ir":
        parsed.raw_texts[fields.sha("sha256")] = json.dumps(
            {"record": "ir", "sha256": fields.sha("sha256"), "text": fields.text("text")}, ensure_ascii=False
        )
        return
    if kind == "footer":
        parsed.footer_seen = True
        return
    if kind in ("machine", "bench"):
        # written after the run's end (the compile overlaps the next lowering)
        run_id = fields.id("run")
        if run_id not in parsed.runs:
            raise TraceFormatError(
                f"{where}:{number}: {kind} record of run {run_id}, which has no run record"
            )
        run = parsed.runs[run_id]
        if kind == "bench":
            parsed.runs[run_id] = replace(run, bench=_bench_from(fields))
            return
        passes, resources = _machine_from(fields)
        for record in passes:
            if record.index in parsed.passes[run_id]:
                raise TraceFormatError(
                    f"{where}:{number}: run {run_id} has two passes with index {record.index}"
                )
            parsed.passes[run_id][record.index] = record
        parsed.runs[run_id] = with_machine_code(run, passes, resources)
        return
    if kind not in ("run", "start", "pass", "end"):
        return  # unknown kinds of the same schema are skipped: readers stay forward-tolerant
    run_id = fields.id("run")
    if kind == "run":
        if run_id in parsed.runs:
            raise TraceFormatError(f"{where}:{number}: run {run_id} is started twice")
        parsed.runs[run_id] = _run_from(fields)
        parsed.passes[run_id] = {}
        parsed.starts[run_id] = {}
        return
    if run_id not in parsed.runs:
        raise TraceFormatError(
            f"{where}:{number}: {kind} record of run {run_id}, which has no run record before it"
        )
    if run_id in parsed.ended:
        raise TraceFormatError(f"{where}:{number}: {kind} record of run {run_id} after its end")
    if kind == "start":
        started = _start_from(fields)
        parsed.starts[run_id][started.index] = started
    elif kind == "pass":
        record = _pass_from(fields)
        if record.index in parsed.passes[run_id]:
            raise TraceFormatError(f"{where}:{number}: run {run_id} has two passes with index {record.index}")
        parsed.passes[run_id][record.index] = record
    else:
        parsed.runs[run_id] = replace(parsed.runs[run_id], **_end_from(fields))
        parsed.ended.add(run_id)


def _finish(parsed: _Parsed, where: str, truncated: bool) -> Trace:
    finished = []
    if parsed.footer_expected and not parsed.footer_seen:
        truncated = True  # cut between two records: after a run, or before the first
    for run_id, run in parsed.runs.items():
        passes = parsed.passes[run_id]
        # Passes that started and never finished were running when the recording stopped: they
        # are kept as failed records, so a reader sees where it stopped and the IR they received.
        unfinished = {i: record for i, record in parsed.starts[run_id].items() if i not in passes}
        passes = {**passes, **unfinished}
        ended = run_id in parsed.ended
        records = _forest(run_id, [passes[index] for index in sorted(passes)], ended, where)
        for sha in _shas_of(replace(run, passes=records)):
            if sha not in parsed.raw_texts:
                raise TraceFormatError(
                    f"{where}: run {run_id} refers to IR {sha[:12]} that the trace does not hold"
                )
        running = run.running
        if unfinished and running is None:
            running = unfinished[max(unfinished)].name
        if run.status == STATUS_INCOMPLETE:
            truncated = True
        finished.append(replace(run, passes=records, running=running))
    return Trace(tuple(finished), LazyTexts(parsed.raw_texts, where), parsed.created, where, truncated)


def _forest(run_id: int, records: list[PassRecord], ended: bool, where: str) -> tuple[PassRecord, ...]:
    """The run's passes (in index order) with every parent among them and depths that agree.

    In a run that was cut short, a nested pass can outlive the record of its parent (the parent
    never finished and no ``start`` record names it): it becomes a top-level pass. In a run that
    ended, a missing parent or a depth that does not follow its parent's is a format error.
    """
    depth_of: dict[int, int] = {}
    out = []
    for record in records:
        parent = record.parent if record.parent in depth_of else None
        depth = 0 if parent is None else depth_of[parent] + 1
        if ended and (parent != record.parent or depth != record.depth):
            raise TraceFormatError(
                f"{where}: run {run_id}, pass {record.index}: parent {record.parent} and depth "
                f"{record.depth} do not match the run's passes"
            )
        depth_of[record.index] = depth
        out.append(
            record
            if (parent, depth) == (record.parent, record.depth)
            else replace(record, parent=parent, depth=depth)
        )
    return tuple(out)
