"""The trace model: a loaded trace's runs, passes and texts, and what every reader asks of it.

The records themselves are declared once in ``irtrace.trace.schema``; ``irtrace.trace.writer``
writes them and ``irtrace.trace.reader`` reads and validates them (``docs/trace-format.md``).
This module does not import tilelang.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import cast

import msgspec
from msgspec.structs import replace

from irtrace.base.errors import NotInTraceError, TraceFormatError
from irtrace.targets.backends import canonical_target_name
from irtrace.trace.resources import RESOURCE_COUNTS, BenchResult, KernelResources
from irtrace.trace.schema import (
    MAX_DEPTH,
    MAX_ID,
    MAX_JSON_NESTING,
    MAX_SECONDS,
    STATUS_FAILED,
    STATUS_INCOMPLETE,
    STATUS_OK,
    STOPPED_BY_CRASH,
    STOPPED_BY_TIMEOUT,
    UNFINISHED,
    BenchRecord,
    EndRecord,
    KernelRun,
    MachineRecord,
    PassRecord,
    Phase,
    Scope,
    ir_decoder,
    occurrence_labels,
    occurrences,
    pass_label,
)

__all__ = [
    "FORMAT_NAME",
    "MAX_DEPTH",
    "MAX_ID",
    "MAX_JSON_NESTING",
    "MAX_SECONDS",
    "PHASES",
    "PHASE_CHECK",
    "PHASE_CODEGEN",
    "PHASE_FINALIZE",
    "PHASE_LOWER",
    "PHASE_MACHINE",
    "RUN_STATUSES",
    "SCHEMA_VERSION",
    "SCOPES",
    "STATUS_FAILED",
    "STATUS_INCOMPLETE",
    "STATUS_OK",
    "STOPPED_BY_CRASH",
    "STOPPED_BY_TIMEOUT",
    "UNFINISHED",
    "KernelRun",
    "LazyTexts",
    "PassRecord",
    "RunHeader",
    "Trace",
    "bench_of",
    "headers_of",
    "host_facts",
    "occurrence_labels",
    "occurrences",
    "pass_label",
    "resources_of",
    "shas_of",
    "text_sha256",
    "with_end",
    "with_machine_code",
]


SCHEMA_VERSION = 1
FORMAT_NAME = "irtrace"

RUN_STATUSES = (STATUS_OK, STATUS_FAILED, STATUS_INCOMPLETE)

PHASE_CHECK: Phase = "check"
"""Backend-independent semantic checks before the pipeline."""
PHASE_LOWER: Phase = "lower"
"""The backend's pass pipeline."""
PHASE_FINALIZE: Phase = "finalize"
"""Host/device split and device preparation after the pipeline."""
PHASE_CODEGEN: Phase = "codegen"
"""Kernel source generation; its snapshot is the kernel source."""
PHASE_MACHINE: Phase = "machine"
"""The kernel source compiled by nvcc (``irtrace record --machine-code``): stages ``ptx`` and ``sass``."""
PHASES = (PHASE_CHECK, PHASE_LOWER, PHASE_FINALIZE, PHASE_CODEGEN, PHASE_MACHINE)
SCOPES: tuple[Scope, ...] = ("module", "host", "device")
"""A pass's ``scope``: the whole module until the host/device split, then one side of it."""


def text_sha256(text: str) -> str:
    """The content key of an IR text or kernel source."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class LazyTexts(Mapping[str, str]):
    """IR texts of a loaded trace, decoded from their JSON line when first asked for.

    Most readers look at a few snapshots of a large trace; decoding every text up front would
    dominate the time to open it.
    """

    def __init__(self, raw_lines: Mapping[str, str], where: str, *, keep: int | None = None) -> None:
        self._raw = raw_lines
        self._decoded: dict[str, str] = {}
        self._where = where
        self._keep = keep
        """Decoded texts kept (most recently read first out last); ``None``: all of them."""

    def __getitem__(self, sha: str) -> str:
        text = self._decoded.get(sha)
        if text is not None and self._keep is not None:
            self._decoded[sha] = self._decoded.pop(sha)  # most recently read last
        if text is None:
            line = self._raw[sha]
            try:
                decoded = ir_decoder.decode(line).text
            except (msgspec.MsgspecError, RecursionError):
                raise TraceFormatError(f"{self._where}: the IR record {sha[:12]} is corrupt") from None
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
            if self._keep is not None and len(self._decoded) > self._keep:
                del self._decoded[next(iter(self._decoded))]
        return text

    def __iter__(self) -> Iterator[str]:
        return iter(self._raw)

    def __len__(self) -> int:
        return len(self._raw)

    def __contains__(self, sha: object) -> bool:
        return sha in self._raw

    def size(self, sha: str) -> int:
        """About the length of the text, without decoding it."""
        sized = getattr(self._raw, "line_length", None)
        if sized is not None:
            return int(sized(sha))
        return len(self._raw.get(sha, ""))


@dataclass(frozen=True, slots=True)
class RunHeader:
    """What a streamed trace keeps of each run (``trace_stream``): the keys runs are selected,
    paired and labelled by."""

    run_id: int
    kernel: str
    target: str
    tilelang_version: str
    hostname: str

    @property
    def key(self) -> tuple[str, str]:
        return (self.kernel, self.target)


@dataclass(frozen=True)
class Trace:
    """A loaded trace file: its runs and the IR texts they refer to."""

    runs: Sequence[KernelRun]
    """A tuple (``load_trace``), or a ``trace_stream.RunFile`` that reads each run when asked for."""
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
        size = getattr(self.texts, "size", None)  # LazyTexts and views of it know without decoding
        if size is not None:
            return int(size(sha))
        return len(self.texts.get(sha, ""))

    def kernel_source(self, run: KernelRun) -> str | None:
        return self.texts.get(run.source_sha256) if run.source_sha256 else None

    def kernel_file(self, run: KernelRun) -> str | None:
        """The kernel's Python file as the trace recorded it (``None`` when it holds none)."""
        return self.text(run.kernel_file_sha256) if run.kernel_file_sha256 else None

    def headers(self) -> Sequence[RunHeader]:
        """Every run's keys; a streamed trace gives them without reading its runs."""
        return headers_of(self.runs)

    def kernels(self) -> list[str]:
        return list(dict.fromkeys(run.kernel for run in self.headers()))

    def targets(self) -> list[str]:
        return list(dict.fromkeys(run.target for run in self.headers()))

    def select(self, kernel: str | None = None, target: str | None = None) -> Sequence[KernelRun]:
        """Runs of ``kernel`` (full or short name) on ``target``; ``None`` matches any.

        ``target`` may be an alias, as on ``irtrace record -t`` (``cuda`` is ``cuda:sm_90``).
        ``NAME#N`` picks the Nth run of a kernel on each target, for traces that hold it more than
        once (``irtrace merge`` of two recordings). An empty selection raises ``NotInTraceError``
        listing what the trace holds. A streamed trace's selection is streamed too.
        """
        if target is not None:
            target = canonical_target_name(target)
        wanted, occurrence = self._kernel_query(kernel)
        labels = self.run_labels()
        matches = [
            run.run_id
            for run in self.headers()
            if (wanted is None or wanted in (run.kernel, run.kernel.split("::")[-1]))
            and (target is None or run.target == target)
            and (occurrence is None or labels[run.run_id].endswith(f"#{occurrence}"))
        ]
        if not matches:
            asked = " on ".join(x for x in (kernel, target) if x) or "a run"
            raise NotInTraceError(f"{asked} is not in the trace; it holds: {self._contents()}")
        return self.runs_by_id(matches)

    def runs_by_id(self, run_ids: Sequence[int]) -> Sequence[KernelRun]:
        """These runs, in the order given: a streamed trace's are read when iterated."""
        only = getattr(self.runs, "only", None)
        if only is not None:
            return cast(Sequence[KernelRun], only(run_ids))
        by_id = {run.run_id: run for run in self.runs}
        return [by_id[run_id] for run_id in run_ids]

    def _kernel_query(self, kernel: str | None) -> tuple[str | None, int | None]:
        """``(name, N)`` for ``NAME#N`` unless a kernel is called that whole text."""
        if kernel is None or "#" not in kernel:
            return kernel, None
        if any(kernel in (run.kernel, run.kernel.split("::")[-1]) for run in self.headers()):
            return kernel, None
        name, _, number = kernel.rpartition("#")
        if not number.isdigit() or int(number) < 1:
            raise NotInTraceError(f"bad run number in {kernel!r}; write KERNEL#N with N >= 1")
        return name, int(number)

    def run_labels(self) -> dict[int, str]:
        """Run id -> ``kernel``, or ``kernel#N`` when the trace holds that kernel and target N times."""
        headers = self.headers()
        counts = Counter(run.key for run in headers)
        seen: Counter[tuple[str, str]] = Counter()
        labels = {}
        for run in headers:
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
        raise NotInTraceError(f"several runs match; {self._what_to_name(matches)}")

    def _what_to_name(self, matches: Sequence[KernelRun]) -> str:
        """The option that tells ``matches`` apart: ``--target`` when they are one kernel on
        several targets, ``--kernel`` when several kernels on one target, else both."""
        kernels = list(dict.fromkeys(run.kernel for run in matches))
        targets = list(dict.fromkeys(run.target for run in matches))
        if len(kernels) == 1 and len(targets) > 1:
            return f"name --target: {kernels[0]} was recorded for {', '.join(targets)}"
        if len(targets) == 1 and len(kernels) > 1:
            labels = self.run_labels()
            names = ", ".join(labels[run.run_id] for run in matches)
            return f"name --kernel: the trace holds {names} on {targets[0]}"
        if len(kernels) == 1:  # one kernel on one target, recorded more than once
            return f"name --kernel {kernels[0]}#N: the trace holds it {len(matches)} times on {targets[0]}"
        return f"name --kernel and --target. The trace holds: {self._contents()}"

    def _contents(self) -> str:
        labels = self.run_labels()
        return "; ".join(f"{labels[run.run_id]} on {run.target}" for run in self.headers()) or "no runs"


def headers_of(runs: Sequence[KernelRun]) -> Sequence[RunHeader]:
    """The keys of ``runs`` (a trace's, or a selection of them), without reading a streamed
    trace's runs (``trace_stream.RunFile`` knows them from its scan)."""
    known = getattr(runs, "headers", None)
    if known is not None:
        return cast(Sequence[RunHeader], known)
    return [
        RunHeader(run.run_id, run.kernel, run.target, run.tilelang_version, run.host.get("hostname", "?"))
        for run in runs
    ]


def host_facts() -> dict[str, str]:
    """Where a trace was recorded."""
    import platform
    import socket

    return {
        "hostname": socket.gethostname(),
        "platform": platform.platform(),
        "python": platform.python_version(),
    }


def shas_of(run: KernelRun) -> Iterator[str]:
    for sha in (run.kernel_file_sha256, run.input_ir, run.source_sha256):
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


def with_end(run: KernelRun, end: EndRecord) -> KernelRun:
    """``run`` with the outcome its ``end`` record gives, passes in index order."""
    outcome = {name: getattr(end, name) for name in EndRecord.__struct_fields__ if name != "run"}
    return replace(run, passes=tuple(sorted(run.passes, key=lambda p: p.index)), **outcome)


def resources_of(record: MachineRecord) -> list[KernelResources]:
    return [
        KernelResources(
            function=function,
            arch=counts.arch,
            dynamic_smem=counts.dynamic_smem,
            **{name: getattr(counts, name) for name in RESOURCE_COUNTS},
        )
        for function, counts in record.resources.items()
    ]


def bench_of(record: BenchRecord) -> BenchResult:
    """The benchmark a ``bench`` record holds (the record's fields but its run)."""
    fields = {name: getattr(record, name) for name in BenchRecord.__struct_fields__ if name != "run"}
    return BenchResult(**{**fields, "samples_ms": tuple(record.samples_ms)})
