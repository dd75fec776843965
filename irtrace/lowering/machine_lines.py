"""Which kernel-source line each PTX and SASS line was compiled from: nvcc's ``.loc`` directives
(TileLang compiles with ``-lineinfo``) and nvdisasm's line table, read exactly or not at all. Used by
``machine_code`` when a run is recorded with source maps.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from msgspec.structs import replace

from irtrace.facts.instruction_classes import costs_of_map
from irtrace.facts.source_map import kernel_source_map
from irtrace.trace.model import KernelRun, PassRecord
from irtrace.trace.schema import MachineLines

PTX_STAGE = "ptx"
"""The ``machine`` stage whose text is the PTX nvcc's front end made of the kernel source."""
SASS_STAGE = "sass"
"""The ``machine`` stage whose text is the disassembled cubin ptxas made of that PTX."""
SOURCE_NAME = "tvm_kernels.cu"
"""The kernel source's file name, as TileLang names it (PTX ``.file`` directives show it)."""


_FILE = re.compile(r'\s*\.file\s+(\d+)\s+"([^"\n]*)"(?:\s*,.*)?')
_LOC = re.compile(
    r"\s*\.loc\s+(\d+)\s+(\d+)\s+(\d+)"
    r"(?:\s*,\s*function_name\s+\S+(?:\s*\+\s*\d+)?\s*,\s*inlined_at\s+(\d+)\s+(\d+)\s+(\d+))?\s*"
)
_FUNCTION_START = re.compile(r"\s*(?:\.visible\s+|\.weak\s+|\.extern\s+)?\.(?:entry|func)\b")
_INSTRUCTION = re.compile(r"\s*[^.\s/$].*;\s*")
"""A PTX line that is an instruction (``mov.u32 %r1, %tid.x;``, ``@%p1 bra $L__BB0_2;``, a line of
inline assembly), not a directive (``.reg``, ``.loc``), a label, a brace or a comment."""


def ptx_source_lines(ptx: str, source_name: str = SOURCE_NAME) -> list[tuple[int, int]]:
    """``(ptx_line, source_line)`` for each PTX instruction nvcc located in ``source_name``, by the
    ``.loc`` directives ``-lineinfo`` writes (lines from 1). An instruction inlined from a header
    (``.loc 3 194 11, function_name ..., inlined_at 2 149 5``) is given the kernel-source line of
    its call site: ``inlined_at`` names the location of the call, which is itself either in the
    kernel source or the location of an earlier ``.loc`` in the same function, whose line it takes.
    Instructions whose chain does not reach the kernel source are left out, never guessed."""
    lines = ptx.split("\n")
    files = {int(m[1]) for line in lines if (m := _FILE.fullmatch(line)) and m[2] == source_name}
    found: list[tuple[int, int]] = []
    resolved: dict[tuple[int, int, int], int | None] = {}
    current: int | None = None
    for number, line in enumerate(lines, start=1):
        if _FUNCTION_START.match(line):
            resolved, current = {}, None
            continue
        loc = _LOC.fullmatch(line)
        if loc is not None:
            file, row, column = int(loc[1]), int(loc[2]), int(loc[3])
            if loc[4] is None:
                current = row if file in files and row > 0 else None
            else:
                site = (int(loc[4]), int(loc[5]), int(loc[6]))
                current = resolved.get(site)
                if current is None and site[0] in files and site[1] > 0:
                    current = site[1]
            resolved[(file, row, column)] = current
            continue
        if current is not None and _INSTRUCTION.fullmatch(line):
            found.append((number, current))
    return found


_LINE_INFO = re.compile(
    r'\t//## File "(?P<file>[^"\n]*)", line (?P<line>\d+)'
    r'(?: inlined at "(?P<at>[^"\n]*)", line (?P<at_line>\d+))?'
)
"""A line of ``nvdisasm --print-line-info-inline``: a location, and where it was inlined if it was.
Before an instruction, nvdisasm lists its inlining chain innermost first: the last is the frame of
the kernel function itself."""
_SASS_INSTRUCTION = re.compile(r"\s*/\*[0-9a-f]{4,}\*/\s+\S.*;.*")
"""An instruction line of nvdisasm's listing: ``/*0010*/  S2R R2, SR_TID.X ;``."""


def sass_source_lines(annotated: str, sass: str, source_path: str) -> list[tuple[int, int]] | None:
    """``(sass_line, source_line)`` for each instruction line of ``sass`` (``nvdisasm
    --print-code``) located in ``source_path``, from ``annotated`` (the same listing with
    ``--print-line-info-inline``): the last frame listed before the instruction (the outermost: the
    kernel function's own), when it is in the kernel source; a location holds until the next one
    (nvdisasm prints one where the line table's row changes) or the next section. ``None`` when
    ``annotated`` without its ``//##`` lines is not ``sass`` byte for byte."""
    kept: list[str] = []
    found: list[tuple[int, int]] = []
    current: int | None = None
    for line in annotated.split("\n"):
        info = _LINE_INFO.fullmatch(line)
        if info is not None:
            at = info["at"] is not None
            file, row = (info["at"], info["at_line"]) if at else (info["file"], info["line"])
            current = int(row) if file == source_path and int(row) > 0 else None
            continue
        kept.append(line)
        if _SASS_INSTRUCTION.fullmatch(line):
            if current is not None:
                found.append((len(kept), current))
        elif line.startswith(("//--", "\t.section")):
            current = None  # another section (function): no location carries over into it
    if "\n".join(kept) != sass:
        return None
    return found


def machine_line_maps(
    run: KernelRun,
    passes: Sequence[PassRecord],
    texts: Mapping[str, str],
    sass_lines: Sequence[tuple[int, int]] | None = None,
) -> list[MachineLines]:
    """The PTX stage's lines mapped to the kernel source (``ptx_source_lines``), and the SASS's
    (``sass_lines``, from ``compile_source(line_info=True)``) with its instructions per Python line
    (``costs``, through the kernel source's map), for a run recorded with source maps; none
    otherwise (maps only when asked)."""
    if not run.source_maps or run.source_sha256 is None:
        return []
    maps = []
    for record in passes:
        if record.ir_after is None or record.ir_after not in texts:
            continue
        if record.name == PTX_STAGE:
            lines = ptx_source_lines(texts[record.ir_after])
            maps.append(MachineLines(stage="ptx", ir=record.ir_after, source=run.source_sha256, lines=lines))
        elif record.name == SASS_STAGE and sass_lines is not None:
            sass_map = MachineLines(
                stage="sass", ir=record.ir_after, source=run.source_sha256, lines=list(sass_lines)
            )
            source_map = kernel_source_map(run)
            if source_map is not None:
                costs = costs_of_map(texts[record.ir_after], sass_map, source_map.files, source_map.lines)
                sass_map = replace(sass_map, costs=costs)
            maps.append(sass_map)
    return maps
