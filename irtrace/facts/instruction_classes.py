"""What each Python line cost in machine code: SASS instructions sorted into a few classes by their
opcode (a small, explicit grammar, docs/source-maps.md "Instruction classes"), counted per Python
line through the trace's SASS line table and the kernel source's ``#line`` map. No tilelang here.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence

from irtrace.facts.source_map import (
    LineQuery,
    kernel_source_map,
    machine_line_map,
    require_maps,
    wanted_files,
)
from irtrace.trace.model import Trace
from irtrace.trace.schema import InstructionCounts, KernelRun, LineInstructions, MachineLines, SassLineCosts

CLASSES: tuple[str, ...] = ("mma", "global_memory", "shared_memory", "barrier", "other")
"""The classes, in the order every view shows them; the names are ``InstructionCounts``'s fields."""
CLASS_TITLES: Mapping[str, str] = {
    "mma": "MMA",
    "global_memory": "global",
    "shared_memory": "shared",
    "barrier": "barrier",
    "other": "other",
}

OPCODES: Mapping[str, frozenset[str]] = {
    # tensor-core matrix multiply-accumulate: warp-level (Volta to Ada, sm_120), warpgroup-level
    # (Hopper's wgmma), and Blackwell's tcgen05 (issued by one thread, accumulating in tensor memory)
    "mma": frozenset(
        {"HMMA", "IMMA", "DMMA", "BMMA", "QMMA", "OMMA"}
        | {"HGMMA", "IGMMA", "QGMMA", "BGMMA"}
        | {"UTCHMMA", "UTCIMMA", "UTCQMMA", "UTCOMMA", "UTCBMMA", "UTCMMA"}
    ),
    # global memory: loads, stores, atomics and reductions; asynchronous copies out of global memory
    # (cp.async's LDGSTS, the tensor memory accelerator's UTMA*, bulk copies' UBLK*); generic-address
    # loads and stores (LD, ST, ATOM, RED), which TileLang's kernels use for global pointers
    "global_memory": frozenset(
        {"LDG", "STG", "LDGSTS", "ATOMG", "REDG", "RED", "ATOM", "LD", "ST", "LDGMC"}
        | {"UTMALDG", "UTMASTG", "UTMAREDG", "UTMAPF", "UBLKCP", "UBLKRED", "UBLKPF"}
    ),
    # shared memory: loads, stores, matrix loads and stores (ldmatrix, stmatrix), shared atomics
    "shared_memory": frozenset({"LDS", "STS", "LDSM", "STSM", "ATOMS"}),
    # synchronization between threads or with asynchronous work: CTA barriers (__syncthreads), memory
    # barriers and fences, dependency barriers (cp.async.wait, wgmma.wait), mbarrier operations
    # (Hopper's SYNCS, Ampere's ARRIVES), warp and warpgroup synchronization, cluster barriers
    "barrier": frozenset(
        {"BAR", "MEMBAR", "FENCE", "ERRBAR", "CGAERRBAR", "DEPBAR", "LDGDEPBAR", "SYNCS", "ARRIVES"}
        | {"WARPSYNC", "WARPGROUP", "UCGABAR_ARV", "UCGABAR_WAIT"}
    ),
}
"""Each class but ``other`` as the base opcodes (the name before the first ``.``) it holds. Anything
else is ``other``: arithmetic, conversions, moves, control flow (branches and the convergence
barriers ``BSSY``/``BSYNC``, which order a warp's own threads), local memory (``LDL``/``STL``)."""

_CLASS_OF = {opcode: name for name, opcodes in OPCODES.items() for opcode in opcodes}

SASS_INSTRUCTION = re.compile(
    r"\s*/\*[0-9a-f]{4,}\*/\s+(?:\{\s*)?(?:@!?U?P(?:T|\d+)\s+)?(?P<opcode>[A-Z][A-Z0-9_]*)[^;]*;.*"
)
"""An instruction line of nvdisasm's listing, ``/*0070*/  @!P0 HGMMA.64x128x16.F32 R24, ... ;``:
an address, an optional predicate guard, the opcode (its base name is group ``opcode``)."""


def opcode_of(line: str) -> str | None:
    """The base opcode of a SASS listing line (``HGMMA``), ``None`` for a line that is not an
    instruction (labels, directives, comments)."""
    match = SASS_INSTRUCTION.fullmatch(line)
    return match["opcode"] if match else None


def instruction_class(opcode: str) -> str:
    """The class of a base opcode: ``mma``, ``global_memory``, ``shared_memory``, ``barrier`` or
    ``other``."""
    return _CLASS_OF.get(opcode, "other")


def count_classes(opcodes: Iterable[str]) -> InstructionCounts:
    """How many of ``opcodes`` fall in each class."""
    counts = dict.fromkeys(CLASSES, 0)
    for opcode in opcodes:
        counts[instruction_class(opcode)] += 1
    return InstructionCounts(**counts)


def add_counts(first: InstructionCounts, second: InstructionCounts) -> InstructionCounts:
    return InstructionCounts(**{name: getattr(first, name) + getattr(second, name) for name in CLASSES})


def total(counts: InstructionCounts) -> int:
    return sum(getattr(counts, name) for name in CLASSES)


def describe_counts(counts: InstructionCounts) -> str:
    """``2 MMA, 14 global, 0 shared, 3 barrier, 40 other (59 in all)``."""
    parts = ", ".join(f"{getattr(counts, name)} {CLASS_TITLES[name]}" for name in CLASSES)
    return f"{parts} ({total(counts)} in all)"


def sass_line_costs(
    sass: str, sass_map: Sequence[tuple[int, int]], source_lines: Iterable[tuple[int, str, int]]
) -> SassLineCosts:
    """The SASS instructions of ``sass`` per Python line, by class: ``sass_map`` holds
    ``(sass_line, source_line)`` (the line table, ``MachineLines.lines``), ``source_lines`` holds
    ``(source_line, python_file, python_line)`` (the kernel source's ``#line`` map). An instruction
    counts for every Python line its kernel-source line carries; one whose kernel-source line
    carries none (or that the line table does not place) counts as unplaced. Entries naming a line
    past the text, or a line that is not an instruction, count nowhere."""
    listing = sass.split("\n")
    opcodes = {number: op for number, text in enumerate(listing, start=1) if (op := opcode_of(text))}
    python: dict[int, set[tuple[str, int]]] = {}
    for source_line, file, line in source_lines:
        python.setdefault(source_line, set()).add((file, line))
    placed: dict[int, int] = {}
    for sass_line, source_line in sass_map:
        if sass_line in opcodes:
            placed.setdefault(sass_line, source_line)
    per_line: dict[tuple[str, int], list[str]] = {}
    unplaced: list[str] = []
    for number, opcode in opcodes.items():
        lines = python.get(placed.get(number, 0), set())
        if not lines:
            unplaced.append(opcode)
        for key in lines:
            per_line.setdefault(key, []).append(opcode)
    return SassLineCosts(
        lines=[
            LineInstructions(file=file, line=line, counts=count_classes(found))
            for (file, line), found in sorted(per_line.items())
        ],
        unplaced=count_classes(unplaced),
        total=count_classes(opcodes.values()),
    )


def costs_of_map(
    sass: str, sass_map: MachineLines, files: Sequence[str], lines: Iterable[tuple[int, int, int]]
) -> SassLineCosts:
    """``sass_line_costs`` from the trace's records: the SASS stage's ``MachineLines`` and the kernel
    source's ``srcmap`` (its ``files`` and ``[source_line, file, line]`` entries; a file index past
    ``files`` is dropped)."""
    named = ((source_line, files[file], line) for source_line, file, line in lines if file < len(files))
    return sass_line_costs(sass, sass_map.lines, named)


# ----------------------------------------------------------------------------- reading a trace


def run_line_costs(trace: Trace, run: KernelRun) -> SassLineCosts | None:
    """The SASS instructions per Python line of ``run``: as the trace stores them, or counted from
    its SASS text and maps for a trace written before they were stored; ``None`` when the trace has
    no SASS line table or no kernel-source map (recorded without ``--machine-code --source-map``)."""
    sass_map = machine_line_map(run, "sass")
    if sass_map is None:
        return None
    if sass_map.costs is not None:
        return sass_map.costs
    source_map = kernel_source_map(run)
    if source_map is None:
        return None
    return costs_of_map(trace.text(sass_map.ir), sass_map, source_map.files, source_map.lines)


def line_counts(costs: SassLineCosts, files: set[str], line: int) -> InstructionCounts:
    """The instructions of Python ``line`` in ``files`` (zero of each when it became none)."""
    found = InstructionCounts()
    for item in costs.lines:
        if item.line == line and item.file in files:
            found = add_counts(found, item.counts)
    return found


def line_instructions(trace: Trace, run: KernelRun, query: LineQuery) -> InstructionCounts | None:
    """The SASS instructions Python line ``query`` became, by class; ``None`` when the trace does not
    count them (no SASS line table or kernel-source map). Raises ``NotInTraceError`` as
    ``generated_lines`` does (no source maps, or none names the file asked for)."""
    require_maps(run)
    files = wanted_files(run, query)
    costs = run_line_costs(trace, run)
    return None if costs is None else line_counts(costs, files, query.line)


def counts_document(counts: InstructionCounts) -> dict[str, int]:
    """``{"mma": 2, "global_memory": 14, ..., "total": 59}``: the JSON views' form."""
    return {**{name: getattr(counts, name) for name in CLASSES}, "total": total(counts)}


MACHINE_CODE_HINT = (
    "record it with --machine-code --source-map (irtrace record or run; a CUDA target, with nvcc "
    "and nvdisasm installed)"
)
"""What to run for a trace without per-line instruction counts."""
