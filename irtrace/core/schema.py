"""The trace file's records, written once.

Each line of a trace is one of the tagged structs below (the ``record`` field names which). The
writer encodes them, the reader decodes and validates them in one typed step (msgspec), and
``docs/trace-format.md``'s field tables and the JSON Schema (``irtrace schema``) are generated
from them. The models the tools use, ``PassRecord`` and ``KernelRun``, are the same structs, so a
field is declared here and nowhere else. No tilelang here.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Annotated, Any, Literal, TypeAlias

import msgspec
from msgspec import Meta, Struct, field

from irtrace.errors import NotInTraceError
from irtrace.resources import BenchResult, KernelResources

MAX_ID = 2**31 - 1
"""Largest run id or pass index a trace may hold."""
MAX_DEPTH = 64
"""Deepest pass nesting a trace may hold (TileLang's pipelines nest two or three levels)."""
MAX_SECONDS = 1e9
"""Largest time a trace may hold."""
MAX_JSON_NESTING = 32
"""Deepest nesting of objects and lists inside a field (``args``, ``pass_configs``)."""

Id: TypeAlias = Annotated[int, Meta(ge=0, le=MAX_ID)]
Depth: TypeAlias = Annotated[int, Meta(ge=0, le=MAX_DEPTH)]
Seconds: TypeAlias = Annotated[float, Meta(ge=0, le=MAX_SECONDS)]
Sha: TypeAlias = Annotated[str, Meta(pattern="^[0-9a-f]{64}$")]
Phase: TypeAlias = Literal["check", "lower", "finalize", "codegen", "machine"]
Scope: TypeAlias = Literal["module", "host", "device"]
PassStatus: TypeAlias = Literal["ok", "failed"]
RunStatus: TypeAlias = Literal["ok", "failed", "incomplete"]
StoppedBy: TypeAlias = Literal["timeout", "crash"]

STATUS_OK: PassStatus = "ok"
STATUS_FAILED: PassStatus = "failed"
STATUS_INCOMPLETE: RunStatus = "incomplete"
"""A run whose ``end`` record is missing: the recording process died midway."""
STOPPED_BY_TIMEOUT: StoppedBy = "timeout"
"""The lowering process was killed after ``--timeout`` seconds."""
STOPPED_BY_CRASH: StoppedBy = "crash"
"""The lowering process died (a native crash such as a segmentation fault)."""


class SchemaError(ValueError):
    """A record's fields do not fit together; the message names the fields."""


def nesting(value: Any) -> int:
    """How deeply lists and objects nest in ``value`` (without recursion)."""
    deepest = 0
    stack = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            items: Any = item.values()
        elif isinstance(item, list):
            items = item
        else:
            continue
        deepest = max(deepest, depth + 1)
        if deepest > MAX_JSON_NESTING:
            return deepest
        stack.extend((child, depth + 1) for child in items)
    return deepest


def _shallow(name: str, value: Mapping[str, Any]) -> None:
    if nesting(value) > MAX_JSON_NESTING:
        raise SchemaError(f"{name!r} must be nested at most {MAX_JSON_NESTING} deep")


class PassRecord(Struct, frozen=True, kw_only=True, tag="pass", tag_field="record"):
    """One pass invocation (or the final codegen step, or a machine-code stage) of one run."""

    run: Id = 0
    """The run it belongs to (set by the writer)."""
    index: Id
    """Position in the run, in the order passes started."""
    name: str
    """Display name; TVM's anonymous ``pass_fn`` passes are named from their Python function."""
    raw_name: str
    """The name TVM reported."""
    phase: Phase
    """``check``, ``lower`` (the backend pipeline), ``finalize``, ``codegen`` or ``machine``."""
    pipeline: str | None
    """The backend pipeline it ran in (``cuda``, ``hip``, ``metal``, ``ascend``), if any."""
    depth: Depth
    """Nesting depth: 0 for a top-level pass."""
    parent: Id | None
    """Index of the enclosing pass, for nested passes."""
    start_s: Seconds
    """Seconds from the run's start to this pass's start."""
    wall_s: Seconds
    """Inclusive wall time, without the recorder's own overhead."""
    self_s: Seconds
    """Wall time minus that of nested passes."""
    changed: bool
    """Whether the printed IR after the pass differs from the IR it received."""
    ir_before: Sha | None
    """SHA-256 of the IR text the pass received."""
    ir_after: Sha | None
    """SHA-256 of the IR text after it; null when it failed. For codegen: the kernel source."""
    scope: Scope = "module"
    """``module`` before the host/device split, then ``host`` or ``device``."""
    status: PassStatus = STATUS_OK
    """``ok`` or ``failed``."""
    error: str | None = None
    """The error message of a failed pass."""

    def __post_init__(self) -> None:
        parent, depth = self.parent, self.depth
        if (parent is None) != (depth == 0) or (parent is not None and parent >= self.index):
            raise SchemaError(
                f"pass {self.index}: parent {parent} and depth {depth} do not fit (a nested pass "
                "has depth >= 1 and a parent that started before it)"
            )

    @property
    def failed(self) -> bool:
        return self.status == STATUS_FAILED


class StartRecord(Struct, frozen=True, kw_only=True, tag="start", tag_field="record"):
    """A pass began: what is known of it before it runs, so a crash inside it still names it."""

    run: Id
    index: Id
    name: str
    raw_name: str | None = None
    """The name TVM reported (the display name when absent)."""
    phase: Phase = "lower"
    pipeline: str | None = None
    depth: Depth = 0
    parent: Id | None = None
    start_s: Seconds | None = None
    ir_before: Sha | None = None
    scope: Scope = "module"

    def __post_init__(self) -> None:
        parent, depth = self.parent, self.depth
        if (parent is None) != (depth == 0) or (parent is not None and parent >= self.index):
            raise SchemaError(f"start record {self.index}: parent {parent} and depth {depth} do not fit")


UNFINISHED = "did not finish: the recording stopped while this pass was running"
"""The error of a pass that started and has no record: it was running when the recording stopped."""


def unfinished_pass(start: StartRecord) -> PassRecord:
    """The record of a pass that started and never ended: failed, with the IR it received."""
    return PassRecord(
        run=start.run,
        index=start.index,
        name=start.name,
        raw_name=start.raw_name if start.raw_name is not None else start.name,
        phase=start.phase,
        pipeline=start.pipeline,
        depth=start.depth,
        parent=start.parent,
        start_s=start.start_s or 0.0,
        wall_s=0.0,
        self_s=0.0,
        changed=False,
        ir_before=start.ir_before,
        ir_after=None,
        scope=start.scope,
        status=STATUS_FAILED,
        error=UNFINISHED,
    )


def start_of(record: PassRecord) -> StartRecord:
    """The ``start`` record of a pass: every field known before it runs."""
    return StartRecord(
        run=record.run,
        index=record.index,
        name=record.name,
        raw_name=record.raw_name,
        phase=record.phase,
        pipeline=record.pipeline,
        depth=record.depth,
        parent=record.parent,
        start_s=record.start_s,
        ir_before=record.ir_before,
        scope=record.scope,
    )


class ResourceCounts(Struct, frozen=True, kw_only=True):
    """What one kernel function uses, as ``ptxas -v`` reports it (``KernelResources`` in memory)."""

    arch: str
    registers: Id
    spill_stores: Id
    spill_loads: Id
    static_smem: Id
    barriers: Id
    stack: Id
    dynamic_smem: Id | None = None


class BenchRecord(Struct, frozen=True, kw_only=True, tag="bench", tag_field="record"):
    """A run's measured latency (``irtrace record --bench``), written after its ``end``."""

    run: Id
    latency_ms: Seconds | None = None
    device: str = ""
    source_sha256: Sha | None = None
    backend: str = ""
    warmup: Id = 0
    repeat: Id = 0
    error: str | None = None


class MachineRecord(Struct, frozen=True, kw_only=True, tag="machine", tag_field="record"):
    """A run's machine-code stages and resources (``--machine-code``), written after its ``end``."""

    run: Id
    passes: list[PassRecord] = []
    resources: dict[str, ResourceCounts] = {}


class KernelRun(Struct, frozen=True, kw_only=True, tag="run", tag_field="record"):
    """One kernel lowered for one target: its header facts and its passes.

    In the file, the ``run`` record holds the fields up to ``host``; passes, ``end``, ``machine``
    and ``bench`` records fill in the rest.
    """

    run_id: Id = field(name="run")
    """Position of the run in its trace file."""
    kernel: str
    """Kernel name as users refer to it (``matmul``, ``gemm.py::matmul``)."""
    spec: str
    """The kernel spec as given (``examples/gemm.py::matmul(M=1024)``)."""
    args: dict[str, Any]
    """``{"args": [...], "kwargs": {...}}`` given to the factory, as JSON values."""
    target: str
    """Short target name (``cuda:sm_90``)."""
    target_detail: str
    """The full TVM target the pipeline ran with."""
    pass_configs: dict[str, Any]
    """Pass configs in effect (the jit decorator's and ``--pass-config`` ones)."""
    tilelang_version: str
    host: dict[str, str]
    """Machine facts: hostname, platform, python."""
    kernel_file_sha256: Sha | None = None
    """SHA-256 of the kernel's Python file as it was imported, stored like an IR text: readers
    show this text, never the file a spec names. Null in older traces and captured runs."""
    passes: tuple[PassRecord, ...] = ()
    status: RunStatus = STATUS_INCOMPLETE
    """``ok``, ``failed``, or ``incomplete`` when the recording was cut short."""
    error: str | None = None
    """Why the run failed (frontend, pass or codegen error)."""
    total_s: Seconds | None = None
    """Wall time of the whole lowering, recorder overhead included."""
    input_ir: Sha | None = None
    """SHA-256 of the module handed to the pipeline."""
    source_sha256: Sha | None = None
    """SHA-256 of the final kernel source; null if codegen did not finish."""
    running: str | None = None
    """The pass that was running when the recording stopped (cut short, crashed or timed out)."""
    stopped_by: StoppedBy | None = None
    """``timeout`` or ``crash`` when the lowering process was killed or died (``--isolate``)."""
    resources: tuple[KernelResources, ...] = ()
    """Per kernel function: registers, spills, shared memory (``--machine-code``, CUDA only)."""
    bench: BenchResult | None = None
    """The kernel's measured latency (``--bench``, on a GPU)."""

    def __post_init__(self) -> None:
        for key, kind, expected in (("args", list, "a list"), ("kwargs", dict, "an object")):
            if key in self.args and not isinstance(self.args[key], kind):
                raise SchemaError(f"'args.{key}' must be {expected}, not {show(self.args[key])}")
        _shallow("args", self.args)
        _shallow("pass_configs", self.pass_configs)

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


RUN_HEADER_FIELDS = (
    "kernel",
    "spec",
    "args",
    "target",
    "target_detail",
    "pass_configs",
    "tilelang_version",
    "host",
    "kernel_file_sha256",
)
"""What a ``run`` record holds besides its id; the rest comes from later records."""


class EndRecord(Struct, frozen=True, kw_only=True, tag="end", tag_field="record"):
    """A run finished (or was stopped): its outcome."""

    run: Id
    status: RunStatus
    error: str | None = None
    total_s: Seconds | None = None
    input_ir: Sha | None = None
    source_sha256: Sha | None = None
    running: str | None = None
    stopped_by: StoppedBy | None = None


class IrRecord(Struct, frozen=True, kw_only=True, tag="ir", tag_field="record"):
    """One distinct IR text or kernel source, stored once under its SHA-256."""

    sha256: Sha
    text: str


class FooterRecord(Struct, frozen=True, kw_only=True, tag="footer", tag_field="record"):
    """The file is complete."""

    runs: Id = 0


class HeaderRecord(Struct, frozen=True, kw_only=True, tag="header", tag_field="record"):
    """The first line of every trace."""

    format: str
    schema: int
    created: str = ""
    footer: bool = False
    """Whether the writer ends the file with a ``footer`` (a missing one means it was cut short)."""


Record: TypeAlias = (
    KernelRun | StartRecord | PassRecord | EndRecord | MachineRecord | BenchRecord | IrRecord | FooterRecord
)
"""Every record after the header."""
RECORD_KINDS = ("header", "ir", "run", "start", "pass", "end", "machine", "bench", "footer")

record_decoder = msgspec.json.Decoder(Record)
ir_decoder = msgspec.json.Decoder(IrRecord)


def _plain(value: Any) -> Any:
    """TVM hands out ``str`` and ``int`` subclasses (its FFI ``String``); they are written as plain values."""
    for kind in (str, bool, int, float):
        if isinstance(value, kind):
            return kind(value)
    raise NotImplementedError(f"cannot write a value of type {type(value).__name__} into a trace")


encoder = msgspec.json.Encoder(enc_hook=_plain)


def show(value: Any) -> str:
    """A value as an error message quotes it: its repr, cut to 40 characters."""
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
