"""The trace file's records, written once.

Each line of a trace is one of the tagged structs below (the ``record`` field names which). The
writer encodes them, the reader decodes and validates them in one typed step (msgspec), and
``docs/trace-format.md``'s field tables and the JSON Schema (``irtrace schema``) are generated
from them. The models the tools use, ``PassRecord`` and ``KernelRun``, are the same structs, so a
field is declared here and nowhere else. No tilelang here.
"""

from __future__ import annotations

import difflib
import typing
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Annotated, Any, Literal, TypeAlias

import msgspec
from msgspec import Meta, Struct, field

from irtrace.base.errors import NotInTraceError
from irtrace.trace.resources import BenchResult, KernelResources

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
SHA_PATTERN = "^[0-9a-f]{64}$"
Sha: TypeAlias = Annotated[
    str, Meta(min_length=64, max_length=64, extra_json_schema={"pattern": SHA_PATTERN})
]
"""64 lowercase hex digits: the length checked by the decoder, the digits by ``check_shas`` (a regex
per field, as ``Meta(pattern=...)`` runs, was most of the time a trace took to load). The IR a
``pass`` or ``start`` names is checked by the reader instead, once per run: it must be a text the
trace holds, and a held text's SHA-256 is checked where its ``ir`` record is read."""
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


_HEX_DIGITS = "0123456789abcdef"


def is_sha_type(info: Any) -> bool:
    """Whether ``info`` (``msgspec.inspect``) is ``Sha``."""
    info = info.type if isinstance(info, msgspec.inspect.Metadata) else info
    return isinstance(info, msgspec.inspect.StrType) and info.min_length == info.max_length == 64


def check_shas(record: Struct, *values: str | None) -> None:
    """The SHA-256 fields ``values`` of ``record`` (of length 64 once decoded) are lowercase hex.
    Called with the values, not their names: this runs once per record a trace holds."""
    for bad in values:
        if bad is not None and bad.strip(_HEX_DIGITS):
            name = next(name for name in record.__struct_fields__ if getattr(record, name) is bad)
            raise SchemaError(f"{name!r} must be a SHA-256 (64 lowercase hex digits), not {show(bad)}")


def check_nesting(what: str, index: int, parent: int | None, depth: int) -> None:
    """A pass's parent and depth fit: a nested pass has depth >= 1 and a parent that started
    before it; a top-level pass has neither. Shared by ``pass`` and ``start`` records."""
    if (parent is None) != (depth == 0) or (parent is not None and parent >= index):
        raise SchemaError(
            f"{what}: parent {parent} and depth {depth} do not fit (a nested pass "
            "has depth >= 1 and a parent that started before it)"
        )


class PassRecord(Struct, frozen=True, kw_only=True, tag="pass", tag_field="record"):
    """One pass invocation, or the final codegen step. Written when the pass finishes (a failed pass when
    the failure is seen), so records of nested passes come before their parent's; order by `index`.
    """

    run: Id = 0
    """the run it belongs to"""
    index: Id
    """position in the run, in the order passes started (0-based)"""
    name: str
    """display name; TVM's anonymous `pass_fn` passes are named from the Python function that made them
    (`NestedLoopChecker`)
    """
    raw_name: str
    """the name TVM reported (`pass_fn`, `tl.LayoutInference`, or the codegen function for codegen)"""
    phase: Phase
    """`check` (semantic checks), `lower` (the backend pipeline), `finalize` (host/device split and device
    preparation), `codegen`, `machine` (the stages `ptx` and `sass` of `--machine-code`, which come in a
    `machine` record)
    """
    pipeline: str | None
    """backend pipeline for `lower` passes: `cuda`, `hip`, `metal`, `ascend`"""
    depth: Depth
    """nesting depth, 0 for top-level passes"""
    parent: Id | None
    """`index` of the enclosing pass"""
    start_s: Seconds
    """seconds from the start of the run to the start of the pass"""
    wall_s: Seconds
    """inclusive wall time, with the recorder's own work subtracted; for a failed pass, until its error
    reached the recorder (TVM's one-time setup of error backtraces, 1-2 s, is done before the first
    kernel by an `irtrace record` of more than one run, so it is not charged to the first pass that
    fails; in a recording of one run it is)
    """
    self_s: Seconds
    """`wall_s` minus the `wall_s` of directly nested passes"""
    changed: bool
    """the printed IR after the pass differs from the IR it received"""
    ir_before: Sha | None
    """SHA-256 of the IR the pass received"""
    ir_after: Sha | None
    """SHA-256 of the IR after it (for codegen: of the kernel source); `null` when it failed"""
    scope: Scope = "module"
    """`module` until the host/device split, then `host` or `device`"""
    status: PassStatus = STATUS_OK
    """`ok` or `failed`"""
    error: str | None = None
    """the error of a failed pass"""

    def __post_init__(self) -> None:
        if (self.parent is None) != (self.depth == 0) or (
            self.parent is not None and self.parent >= self.index
        ):
            check_nesting(f"pass {self.index}", self.index, self.parent, self.depth)

    @property
    def failed(self) -> bool:
        return self.status == STATUS_FAILED


class StartRecord(Struct, frozen=True, kw_only=True, tag="start", tag_field="record"):
    """Written before each pass runs (and before codegen), so a process that dies inside a pass leaves a
    trace that names it. It holds what is known of the pass then: `run`, `index`, `name`,
    `raw_name`, `phase`, `pipeline`, `depth`, `parent`, `start_s`, `ir_before` and `scope`, as in
    `pass`. A `start` with no `pass` record of the same index is a pass that was running when the
    recording stopped: readers keep it as a pass with status `failed`, `ir_after` `null` and the
    error `did not finish: the recording stopped while this pass was running`, and the run's
    `running` is the innermost such pass. Readers that predate `start` skip it.
    """

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
        if (self.parent is None) != (self.depth == 0) or (
            self.parent is not None and self.parent >= self.index
        ):
            check_nesting(f"start record {self.index}", self.index, self.parent, self.depth)


UNFINISHED = "did not finish: the recording stopped while this pass was running"
"""The error of a pass that started and has no record: it was running when the recording stopped."""


def unfinished_pass(start: StartRecord) -> PassRecord:
    """The record of a pass that started and never ended: failed, with the IR it received."""
    known = {name: getattr(start, name) for name in StartRecord.__struct_fields__}
    known.update(
        raw_name=start.name if start.raw_name is None else start.raw_name, start_s=start.start_s or 0.0
    )
    return PassRecord(
        **known,
        wall_s=0.0,
        self_s=0.0,
        changed=False,
        ir_after=None,
        status=STATUS_FAILED,
        error=UNFINISHED,
    )


def start_of(record: PassRecord) -> StartRecord:
    """The ``start`` record of a pass: every field known before it runs."""
    return StartRecord(**{name: getattr(record, name) for name in StartRecord.__struct_fields__})


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
    """The kernel's measured latency (``irtrace record --bench``, on a GPU). Like `machine`, it
    comes after the run's `end` and older readers skip it.
    """

    run: Id
    """the run"""
    latency_ms: Seconds | None = None
    """mean latency of one launch (TileLang's `do_bench`); `null` when the benchmark failed"""
    device: str = ""
    """the GPU"""
    source_sha256: Sha | None = None
    """SHA-256 of the kernel source `tilelang.compile` built and timed"""
    backend: str = ""
    """TileLang's execution backend (`tvm_ffi`, ...)"""
    warmup: Id = 0
    """`do_bench`'s `warmup` (milliseconds)"""
    repeat: Id = 0
    """`do_bench`'s `rep` (milliseconds)"""
    error: str | None = None
    """why the benchmark failed"""
    samples_ms: list[Seconds] = []
    """each repetition's mean latency of one launch (milliseconds); `latency_ms` is their median and
    their range is the noise `irtrace check` allows for (`[]` from releases that measured once)"""
    shape: dict[str, Id] = {}
    """the size bound to each symbolic dimension for the measurement (`tokens`: 4096)"""
    shape_from: str = ""
    """where those sizes came from: `--bench-shape`, `manifest`, `captured` (a captured call's
    tensors), joined by `+` when dimensions came from different places (`--bench-shape+manifest`),
    or `""` when the kernel has no symbolic dimension"""
    driver: str = ""
    """the NVIDIA driver version"""
    clocks_mhz: dict[str, Id] = {}
    """the GPU's clocks when measured: `sm`, `memory` (current), `sm_max` (MHz)"""

    def __post_init__(self) -> None:
        check_shas(self, self.source_sha256)


class LaunchArg(Struct, frozen=True, kw_only=True, omit_defaults=True):
    """One argument of a launch of a captured kernel: a tensor's shape, dtype and strides, or a
    scalar's value."""

    param: str = ""
    """the kernel parameter it was passed to (`""` when not known)"""
    shape: list[Id] | None = None
    """a tensor's shape"""
    dtype: str = ""
    """a tensor's dtype, torch's name without `torch.` (`float16`)"""
    strides: list[int] | None = None
    """a tensor's strides, in elements"""
    value: int | float | bool | None = None
    """a scalar's value (`num_chunks`)"""
    kind: str = ""
    """the Python type of an argument that is neither (its value is not kept)"""


class LaunchSignature(Struct, frozen=True, kw_only=True):
    """Launches of a captured kernel with the same arguments' shapes, dtypes, strides and scalars."""

    args: list[LaunchArg]
    """`LaunchArg` objects, one per positional argument"""
    count: Id
    """how many launches passed these"""


class LaunchesRecord(Struct, frozen=True, kw_only=True, tag="launches", tag_field="record"):
    """What the program passed each time it launched a kernel it compiled while captured
    (`irtrace run`, `IRTRACE=`): its distinct launch signatures, with counts. Written when the
    capture ends, after the run's `end`; older readers skip it.
    """

    run: Id
    """the run"""
    signatures: list[LaunchSignature] = []
    """distinct `LaunchSignature` objects, most launched first"""
    dropped: Id = 0
    """launches not counted because the kernel had more distinct signatures than are kept"""


class InstructionCounts(Struct, frozen=True, kw_only=True):
    """SASS instructions counted by class (docs/source-maps.md, "Instruction classes")."""

    mma: Id = 0
    """tensor-core matrix multiply-accumulate (`HMMA`, `HGMMA`, `UTCHMMA`, ...)"""
    global_memory: Id = 0
    """global memory loads, stores, atomics, asynchronous copies (`LDG`, `STG`, `LDGSTS`, `UTMALDG`, ...)"""
    shared_memory: Id = 0
    """shared memory loads and stores (`LDS`, `STS`, `LDSM`, `STSM`, `ATOMS`)"""
    barrier: Id = 0
    """barriers, fences and waits (`BAR`, `MEMBAR`, `DEPBAR`, `SYNCS`, `WARPGROUP`, ...)"""
    other: Id = 0


class LineInstructions(Struct, frozen=True, kw_only=True):
    """The SASS instructions compiled from one Python line."""

    file: str
    """the Python file, as the kernel source's `srcmap` names it"""
    line: Annotated[int, Meta(ge=1, le=MAX_ID)]
    counts: InstructionCounts


class SassLineCosts(Struct, frozen=True, kw_only=True):
    """A run's SASS instructions per Python line: by the SASS line table and the kernel source's map."""

    lines: list[LineInstructions] = []
    """`LineInstructions` objects, sorted by file and line; an instruction counts for every Python line its
    kernel-source line carries (a macro's and the author's, say)"""
    unplaced: InstructionCounts = InstructionCounts()
    """instructions on no Python line: on no kernel-source line, or on one no Python line carries"""
    total: InstructionCounts = InstructionCounts()
    """every instruction of the SASS"""


class MachineLines(Struct, frozen=True, kw_only=True):
    """Which lines of a machine-code stage's text come from which line of the kernel source."""

    stage: Literal["ptx", "sass"]
    ir: Sha
    """SHA-256 of the stage's text (its `ir_after`)"""
    source: Sha
    """SHA-256 of the kernel source the lines refer to (the run's `source_sha256`)"""
    lines: list[tuple[Id, Id]] = []
    """`[stage_line, source_line]`, both from 1: the PTX instruction on `stage_line` was compiled
    from `source_line` of the kernel source, by the `.loc` directives nvcc writes under TileLang's
    `-lineinfo` (code inlined from TileLang's or CUDA's headers: the kernel-source line it was
    inlined at); sorted"""

    costs: SassLineCosts | None = None
    """`sass` stage: its instructions per Python line (`SassLineCosts`); `null` for `ptx`, without a
    kernel-source map, and in older traces (readers then count from the SASS text and the maps)"""

    def __post_init__(self) -> None:
        check_shas(self, self.ir, self.source)
        for stage_line, source_line in self.lines:
            if stage_line < 1 or source_line < 1:
                raise SchemaError(f"machine: line map entry {[stage_line, source_line]} needs lines from 1")


class MachineRecord(Struct, frozen=True, kw_only=True, tag="machine", tag_field="record"):
    """The run's kernel source compiled by nvcc: its two stages and what each kernel function uses.
    Written after the run's `end` (the compile overlaps the next kernel's lowering), so runs of other
    kernels may come between. Readers that do not know it skip it and see the run as it ended.
    A failed stage makes a run whose `end` said `ok` read as `failed`, with the stage's error.
    """

    run: Id
    """the run"""
    passes: list[PassRecord] = []
    """`pass` objects (the fields of a `pass` record, without `record` and `run`) with phase `machine`: `ptx`
    (`raw_name` `nvcc`; `ir_before` the kernel source, `ir_after` the PTX) and `sass` (`raw_name` `ptxas`;
    `ir_before` the PTX, `ir_after` the disassembly), indexes after the run's last pass. A stage that
    failed has status `failed` and nvcc's error; the stages after it are absent
    """
    resources: dict[str, ResourceCounts] = {}
    """per kernel function name: `arch` (`sm_90a`), `registers`, `spill_stores`, `spill_loads` (bytes per
    thread), `static_smem` (bytes, as ptxas reports), `dynamic_smem` (bytes TileLang launches with; `null`
    when symbolic), `barriers`, `stack` (bytes per thread)
    """
    line_maps: list[MachineLines] = []
    """`MachineLines` objects, one per stage mapped (with `--source-map`): PTX lines to kernel-source lines"""


class TensorArg(Struct, frozen=True, kw_only=True):
    """A tensor the program passed to a captured kernel: enough to make one like it."""

    shape: list[Id]
    dtype: str
    """torch's dtype name without `torch.` (`float16`)"""
    device: str = ""
    """`cuda:0`, `cpu`, ..."""


class Instance(Struct, frozen=True, kw_only=True, omit_defaults=True):
    """Where a kernel captured from a running program (`irtrace run`, `IRTRACE=...`) was
    instantiated, and with what: the facts another tool needs to make the same instance again."""

    process: str
    """the process in words: `pid 4242`, `pid 4242, rank 3 of 8` under torchrun"""
    pid: Id
    """the process id"""
    rank: Id | None = None
    """`RANK` of a distributed job (torchrun and friends set it)"""
    world_size: Id | None = None
    """`WORLD_SIZE` of a distributed job"""
    call_site: str | None = None
    """`path:line` of the program's own frame that compiled the kernel (the first outside tilelang)"""
    definition: str | None = None
    """`path:line` where the kernel's Python function begins (its first decorator's line), for an editor"""
    test_id: str | None = None
    """the pytest test that was running (`tests/test_gemm.py::test_gemm[4096]`)"""
    constants: dict[str, Id] = {}
    """`T.const` sizes as the call bound them"""
    dynamic: dict[str, Id] = {}
    """`T.dynamic` sizes as the call's tensors gave them (the kernel stays symbolic in them)"""
    tensors: dict[str, TensorArg] = {}
    """per tensor parameter: `shape`, `dtype`, `device` of what the call passed (`--bench` makes these)"""
    stand_in: bool = False
    """the program ran on GPU stand-ins (`irtrace run --no-gpu`, `IRTRACE_NO_GPU=1`): the kernel was
    lowered for real, but nothing was launched and its tensors were shapes only (`meta`)"""


class BufferLayout(Struct, frozen=True, kw_only=True, omit_defaults=True):
    """One buffer's layout as TileLang holds it in a block's `layout_map`: a `Layout` (shared memory:
    element to address) or a `Fragment` (registers: element to thread and local index)."""

    buffer: str
    """the buffer's name"""
    scope: str
    """its storage scope (`shared.dyn`, `local.fragment`, ...)"""
    dtype: str
    """its element type"""
    shape: list[Id | str]
    """its shape (a symbolic dimension as text)"""
    kind: Literal["layout", "fragment"]
    """TileLang's class: `Layout` or `Fragment`"""
    input_shape: list[Id | str]
    """the shape the layout maps from"""
    output_shape: list[Id | str]
    """the shape it maps to (for a fragment: the local index space of one thread)"""
    forward_vars: list[str]
    """the names of the input coordinates in `forward_index` and `forward_thread` (`_i`, `_j`, ...), one
    per input dimension"""
    forward_index: list[str]
    """one expression per output dimension, in Python syntax (`//`, `%`, `*`, `+`), as TileLang prints it"""
    forward_thread: str | None = None
    """fragment: the thread that holds an element, an expression of `forward_vars` (and `rep` when
    replicated)"""
    replicate: Id | None = None
    """fragment: how many threads hold each element"""
    replicate_var: str | None = None
    """fragment: the name of the replica number (0 to `replicate` - 1) in `forward_thread` (`_rep`)"""
    threads: Id | None = None
    """fragment: the number of threads it spreads over"""
    thread_offset: Id | None = None
    """fragment: the first thread of its thread range (128 for a warp-specialized consumer)"""
    swizzle: str | None = None
    """shared memory: `swizzle 128B`, `swizzle 64B`, `swizzle 32B`, `linear` or `custom layout`"""
    summary: str
    """the layout in a few words, as the language server's hover shows it (`128 thr, 128 elem/thr`,
    `swizzle 128B`)"""
    text: str
    """TileLang's own text of the layout"""


class LayoutRecord(Struct, frozen=True, kw_only=True, tag="layout", tag_field="record"):
    """Every buffer's layout after a pass: written after the layout-inference pass's `pass` record, and
    again after each later pass that changed a layout, until the layouts are lowered away. Older readers
    skip it.
    """

    run: Id
    """the run"""
    after: Id
    """the `index` of the pass after which the module holds these layouts"""
    layouts: list[BufferLayout] = []
    """`BufferLayout` objects, one per buffer, in the order of the module's blocks"""


MAX_SOURCE_FILES = 256
"""Most source files one `srcmap` record may name."""


class SourceMapRecord(Struct, frozen=True, kw_only=True, tag="srcmap", tag_field="record"):
    """Which lines of one recorded IR text come from which Python line: the spans TileLang's script
    builder set on the module's statements (a statement sequence is neither counted nor mapped),
    placed on the printed lines through TVM's printer (`irtrace.lowering.spans`). Written after the
    `pass` record of the pass that produced the module (and once for the module the pipeline
    received), only for a module made of new objects: a pass whose module holds the very same
    objects as the last one mapped keeps that map. Older readers skip it.

    With `after` naming the `codegen` stage, the text is the kernel source (`ir` is the run's
    `source_sha256`) and `by` is `line_directives`: the lines were placed by TileLang's own `#line`
    directives (docs/source-maps.md, "The kernel source").
    """

    run: Id
    """the run"""
    after: Id | None = None
    """the `index` of the pass after which the module is this; `null` for the module the pipeline received"""
    ir: Sha
    """SHA-256 of the IR text the line numbers refer to (that pass's `ir_after`)"""
    statements: Id = 0
    """statements in the module"""
    with_span: Id = 0
    """of those, how many carry a span (a file and line); the rest lost it or never had one"""
    placed: bool = True
    """`false` when the printer's annotated print could not be matched line by line with the text, so no
    line is mapped (`lines` is empty); the counts still hold"""
    files: list[str] = []
    """the source files the spans name (as TileLang recorded them), indexed by `lines` (and the files
    of `ran`)"""
    lines: list[tuple[Id, Id, Id]] = []
    """`[ir_line, file, line]`: IR line `ir_line` (from 1) prints a statement whose span is line `line` of
    `files[file]`; sorted, one entry per distinct triple"""
    carried: list[tuple[Id, Id, Id]] = []
    """`[ir_line, file, line]` as in `lines`, for a statement that has no span of that line but is
    provably the statement of that line: one before a pass that dropped its span
    (`irtrace.lowering.carry_rules.carry_spans`, by the rules of docs/source-maps.md, "Carried lines", each
    match the only one of its kind on both sides), or one inside a block of that line (listed in
    `owned` too). Views mark these lines as carried; a line neither spanned nor carried was lost in
    that pass"""
    owned: list[tuple[Id, Id, Id]] = []
    """of `carried`, the entries whose statement is the line's only because it is inside a block
    (or the scope a block became) of that line, without a span of its own in that file: not carried
    over a pass, so views word them apart (an entry not in `carried` is ignored)"""
    inner: list[tuple[Id, Id, Id]] = []
    """`[ir_line, file, line]` as in `lines`: the macro's own line (the inner frame) of a statement that
    a macro such as `T.reduce_sum` built and whose span names the kernel line that called it (the
    frontend hook, docs/source-maps.md); `irtrace ir --line FILE:LINE` of the macro's file finds these"""
    ran: list[tuple[Id, Id]] | None = None
    """only for the module the pipeline received (`after` null): `[file, line]` for each line of
    `files[file]` (files outside TileLang's and TVM's packages) at which TileLang's frontend ran a
    statement to build this module (a `set_fileline` call, which its rewrite puts before every
    statement it runs, `if` tests and assignments of build-time values too; the rewrite's own added
    statements are numbered from line 1); sorted. A statement line of the kernel not listed did
    not run for this instance (a branch Python left out). `null`: not known (an older trace, or a
    module built without irtrace's frontend hook, docs/source-maps.md)"""
    by: Literal["printer", "line_directives"] = "printer"
    """how the lines were placed: `printer`, TVM's printer annotating the statements (an IR text);
    `line_directives`, the `#line` directives TileLang's codegen writes before each statement with a
    span (the kernel source; a line belongs to the statement whose directive is the last above it)"""

    def __post_init__(self) -> None:
        check_shas(self, self.ir)
        if self.with_span > self.statements:
            raise SchemaError(f"srcmap: with_span {self.with_span} is more than statements {self.statements}")
        if len(self.files) > MAX_SOURCE_FILES:
            raise SchemaError(f"srcmap: more than {MAX_SOURCE_FILES} files")
        if self.lines and not self.placed:
            raise SchemaError("srcmap: lines given though placed is false")
        if self.carried and not self.placed:
            raise SchemaError("srcmap: carried lines given though placed is false")
        if self.inner and not self.placed:
            raise SchemaError("srcmap: inner frames given though placed is false")
        for file, line in self.ran or ():
            if line < 1 or file >= len(self.files):
                raise SchemaError(
                    f"srcmap: ran entry {[file, line]} needs a line from 1 and a file index below "
                    f"{len(self.files)}"
                )
        if self.ran is not None and self.after is not None:
            raise SchemaError("srcmap: ran is given only for the module the pipeline received (after null)")
        for ir_line, file, line in [*self.lines, *self.carried, *self.owned, *self.inner]:
            if ir_line < 1 or line < 1 or file >= len(self.files):
                raise SchemaError(
                    f"srcmap: entry {[ir_line, file, line]} needs lines from 1 and a file index below "
                    f"{len(self.files)}"
                )


class KernelRun(Struct, frozen=True, kw_only=True, tag="run", tag_field="record"):
    """Starts one kernel lowered for one target. The record holds the run's header (the fields up
    to `kernel_file_sha256`); the `pass`, `end`, `machine` and `bench` records fill in the rest in
    memory. A run with no `end` (the recording was cut short) keeps status `incomplete`. Traces
    written before the typed schema also hold `status`, `error`, `total_s`, `input_ir` and
    `source_sha256` here, always null or `incomplete`; readers take them from `end`.

    A kernel whose factory raised for a target is a run with no passes, an empty `target_detail`
    and empty `pass_configs` (no target object or configs were made), and an `end` with status
    `failed` whose `error` is the factory's error.
    """

    run_id: Id = field(name="run")
    """run id, unique in the file"""
    kernel: str
    """kernel name (the Python name, or a manifest `name`)"""
    spec: str
    """the kernel spec, e.g. `examples/gemm.py::matmul(1024, 1024, 1024)`; `captured:NAME` for `irtrace run`
    """
    args: dict[str, Any]
    """`{"args": [...], "kwargs": {...}}`: the spec's arguments, evaluated; dtypes appear as `"T.float16"`,
    other objects as their `repr`. An `@autotune` kernel adds `"autotune_defaults": {...}`, the parameters
    taken from its first config. A kernel `irtrace record` took named without arguments adds `"resolved"`:
    the instance the resolver chose (`call`, `origin` such as `__main__`, and `symbolic`, `autotune`,
    `from_project`, `instances` where they apply). For `irtrace run`, the program's own call of the
    `@tilelang.jit` kernel, tensors as `{"shape": [...], "dtype": ..., "device": ...}`
    """
    target: str
    """short target name (`cuda:sm_90`, `hip:gfx942`, `ascend`, `metal`, ...)"""
    target_detail: str
    """the full TVM target JSON the pipeline ran with; `""` when the kernel's factory raised before lowering
    began (and for a kernel `irtrace run` captured with no current target)
    """
    pass_configs: dict[str, Any]
    """pass configs in effect (the PrimFunc's own, the jit decorator's, the manifest's and `--pass-config`
    ones); `{}` when the factory raised
    """
    tilelang_version: str
    """version of tilelang that lowered it"""
    host: dict[str, str]
    """`hostname`, `platform`, `python`"""
    kernel_file_sha256: Sha | None = None
    """SHA-256 of the kernel's Python file as it was imported (an editor's unsaved text for the language
    server), stored as an `ir` record: the source passviz shows beside the IR. `null` for runs captured by
    `irtrace run`; absent in traces written before it existed (readers then show no source)
    """
    instance: Instance | None = None
    """for a kernel captured from a running program: its process, call site, test id, `T.const` and
    `T.dynamic` sizes and tensors (`Instance`); `null` for kernels `irtrace record` lowered from a spec
    """
    passes: tuple[PassRecord, ...] = ()
    status: RunStatus = STATUS_INCOMPLETE
    """always `"incomplete"` here: the run has only started"""
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
    warnings: tuple[str, ...] = ()
    """Warnings TileLang's C++ code logged while this run lowered, one per line, in order."""
    resources: tuple[KernelResources, ...] = ()
    """Per kernel function: registers, spills, shared memory (``--machine-code``, CUDA only)."""
    bench: BenchResult | None = None
    """The kernel's measured latency (``--bench``, on a GPU)."""
    layouts: tuple[LayoutRecord, ...] = ()
    """The buffers' layouts after the layout pass and each later pass that changed them."""
    source_maps: tuple[SourceMapRecord, ...] = ()
    """Which IR lines come from which Python line, per module recorded (``srcmap`` records)."""
    launches: tuple[LaunchSignature, ...] = ()
    """What the program passed at each launch, by distinct signature (``irtrace run``)."""
    machine_lines: tuple[MachineLines, ...] = ()
    """Machine-code lines to kernel-source lines (the ``machine`` record's ``line_maps``)."""

    def __post_init__(self) -> None:
        check_shas(self, self.kernel_file_sha256, self.input_ir, self.source_sha256)
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
        if matches:
            raise NotInTraceError(
                f"pass {name!r} ran {len(matches)} time(s) in {self.kernel} on {self.target}; "
                f"ask for {name}#1 to {name}#{len(matches)}"
            )
        raise NotInTraceError(
            f"pass {query!r} is not in {self.kernel} on {self.target}; {self._closest_pass(name)}"
        )

    def _closest_pass(self, name: str) -> str:
        """``did you mean X?`` for a misspelt pass name; the run has tens of passes, too many to list."""
        names = list(dict.fromkeys(p.name for p in self.passes))
        short = {p.split(".")[-1]: p for p in names}
        close = difflib.get_close_matches(name, names, n=3, cutoff=0.6) or [
            short[s] for s in difflib.get_close_matches(name.split(".")[-1], list(short), n=3, cutoff=0.6)
        ]
        if close:
            return "did you mean " + " or ".join(close) + "?"
        return f"irtrace show TRACE -k {self.kernel} -t {self.target} lists its {len(names)} passes"


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
    "instance",
)
"""What a ``run`` record holds besides its id; the rest comes from later records."""


class EndRecord(Struct, frozen=True, kw_only=True, tag="end", tag_field="record"):
    """Closes a run. A run copied by `irtrace merge` from a trace where it was cut short ends with status
    `incomplete`.
    """

    run: Id
    """the run"""
    status: RunStatus
    """`ok` or `failed`"""
    error: str | None = None
    """why it failed (pass, codegen or frontend error)"""
    total_s: Seconds | None = None
    """wall time of the whole lowering, recorder overhead included"""
    input_ir: Sha | None = None
    """SHA-256 of the module the pipeline received"""
    source_sha256: Sha | None = None
    """SHA-256 of the final kernel source"""
    running: str | None = None
    """the pass that was running when the lowering stopped (with `stopped_by`)"""
    stopped_by: StoppedBy | None = None
    """`crash` when the lowering process died (`irtrace record --isolate`) or `timeout` when it was killed at
    `--timeout`; the run's `status` is then `failed` and `error` says which signal or how long
    """
    warnings: tuple[str, ...] = ()
    """warnings TileLang's C++ code logged to stderr while this run lowered (`T.vectorized loop ... lowered as
    a serial loop`), one per message in the order logged, the log's time and location prefix removed;
    known-harmless ones (TVM's ROCm version guess) left out; empty for runs `irtrace run` captured
    """

    def __post_init__(self) -> None:
        check_shas(self, self.input_ir, self.source_sha256)


class IrRecord(Struct, frozen=True, kw_only=True, tag="ir", tag_field="record"):
    """One distinct IR text (TVMScript of the whole module), kernel source, or kernel file (the Python
    file a kernel was imported from, see `kernel_file_sha256`), stored once per file.
    An `ir` record always comes before the first record that refers to it.
    """

    sha256: Sha
    """SHA-256 of `text` (UTF-8); records refer to texts by it"""
    text: str
    """the text"""

    def __post_init__(self) -> None:
        check_shas(self, self.sha256)


class FooterRecord(Struct, frozen=True, kw_only=True, tag="footer", tag_field="record"):
    """The last line of a complete file: `{"record": "footer", "runs": N}`, `N` the number of runs.
    Nothing may follow it.
    """

    runs: Id = 0
    """the number of runs in the file"""


class HeaderRecord(Struct, frozen=True, kw_only=True, tag="header", tag_field="record"):
    """The first line of every file, exactly once."""

    format: str
    """`"irtrace"`: identifies the file"""
    schema: int
    """this document describes schema `1`; readers refuse a newer schema with exit code 6, and a value that
    is not a positive integer as invalid
    """
    created: str = ""
    """ISO 8601 UTC time the file was written"""
    footer: bool = False
    """`true`: the file ends with a `footer` record when complete (written since issue 10; files without it
    are never called cut short for lacking a footer)
    """


Record: TypeAlias = (
    KernelRun
    | StartRecord
    | PassRecord
    | EndRecord
    | LayoutRecord
    | SourceMapRecord
    | MachineRecord
    | BenchRecord
    | LaunchesRecord
    | IrRecord
    | FooterRecord
)
"""Every record after the header."""
RECORD_TYPES: dict[str, type[Struct]] = {
    str(kind.__struct_config__.tag): kind for kind in (HeaderRecord, *typing.get_args(Record))
}
"""Each record kind by the name its ``record`` field gives, derived from the structs' tags."""

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
