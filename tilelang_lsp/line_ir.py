"""Hover on a tile operation (``T.gemm``, ``T.copy``, ``T.reduce_max``, ...): what its line became
after layout inference, after ``tl.LowerTileOp`` and after the last pass that still prints it, with
a link to a text of every pass.

The answer comes from the kernel's full lowering recorded with source maps (the worker's
``LineMaps`` request), asked on the first such hover of a document version, never on an edit: maps
print each module a second time (``bench/lsp_source_map.py``). It covers every line of the kernel at
once, so later hovers of that version answer at once. The generated CUDA or HIP source's lines
come from TileLang's own ``#line`` directives (docs/source-maps.md); other backends' codegens write
none, and the hover says so rather than guess.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from typing import TYPE_CHECKING

from lsprotocol import types

from irtrace.facts.source_map import carried_words
from tilelang_lsp.document import Document
from tilelang_lsp.protocol import (
    OK,
    CompiledKernel,
    CompileJob,
    LineMaps,
    LineStage,
    LineThroughPasses,
    SourceLines,
)
from tilelang_lsp.worker_client import RequestCancelled, RequestFailed, WorkerError

if TYPE_CHECKING:
    from tilelang_lsp.server import TileLangLanguageServer

TILE_OPERATION = re.compile(
    r"(?<![\w.])[A-Za-z_]\w*\.(?P<op>copy|c2d_im2col|gemm(?:_\w+)?|wgmma_gemm|fill|clear|"
    r"reduce(?:_\w+)?|cumsum|atomic_\w+|finalize_reducer)\s*\("
)
"""A call of a tile operation through the module's alias (``T.gemm(``); the name is group ``op``."""
ASSIGNED_CALL = re.compile(r"\s*(?P<name>[A-Za-z_]\w*)\s*=\s*[A-Za-z_]\w*\.\w+\s*\(")
"""``NAME = T.call(``: the name bound is group ``name``."""
WAIT_S = 3.0
"""How long the first hover of a version waits for the lowering with source maps (a GEMM: about
0.5 s warm); past it the hover says to hover again, and the lowering goes on."""
SASS_WAIT_S = 0.3
"""How long a hover waits for the nvcc job (5-20 s for a GEMM) before answering without the SASS:
the IR it has is not held back for it."""
SHOWN_CHARS = 90
"""Characters of an IR line the hover shows."""
LAYOUT_PASSES = ("tl.LayoutInference", "tl.AscendLayoutInference")
LOWER_TILE_OP = "tl.LowerTileOp"


def tile_operation_at(text: str, line: int, character: int) -> bool:
    """Whether the cursor (0-based ``line``, ``character``) is on a tile operation's name, or on
    the name an assignment of a call through the module's alias binds (``tx =
    T.get_thread_binding()``: a line that may make no statement, shown with its readers' IR)."""
    lines = text.splitlines()
    if line >= len(lines):
        return False
    assigned = ASSIGNED_CALL.match(lines[line])
    if assigned is not None and assigned.start("name") <= character <= assigned.end("name"):
        return True
    return any(m.start("op") <= character <= m.end("op") for m in TILE_OPERATION.finditer(lines[line]))


async def _lower(
    server: TileLangLanguageServer, doc: Document, kernel: str, target: str
) -> SourceLines | str:
    """The worker's answer, or why there is none."""
    request = LineMaps(
        path=doc.path,
        text=doc.text,
        kernel=kernel,
        target=target,
        default_target=server.options.default_target,
        instance_traces=server.instance_traces(),
        instance_picks=server.instance_picks.get(doc.uri, {}),
    )
    try:
        return await server.worker.request(request, timeout=server.options.analysis_timeout_s)
    except (WorkerError, RequestFailed, RequestCancelled) as error:
        return f"lowering with source maps failed: {error}"


async def line_section(
    server: TileLangLanguageServer, doc: Document, position: types.Position, wait_s: float = WAIT_S
) -> str | None:
    """The hover's section for the tile operation at ``position``: ``None`` when there is none to
    show (not a tile operation, an untrusted workspace, no compiled kernel at that line)."""
    if not server.options.trusted or not doc.runnable or not doc.current(doc.analysis_version):
        return None
    if not tile_operation_at(doc.text, position.line, position.character):
        return None
    line = position.line + 1
    kernel = doc.kernel_at(line)
    if kernel is None or kernel.status != OK:
        return None
    task = server.line_maps.task(doc, kernel.name, lambda: _lower(server, doc, kernel.name, kernel.target))
    with contextlib.suppress(asyncio.TimeoutError):
        await asyncio.wait_for(asyncio.shield(task), wait_s)
    head = f"**Line {line} through the pipeline** — `{kernel.name}` on `{kernel.target}`"
    if not task.done():
        return f"{head}: lowering with source maps… hover again in a moment."
    if task.cancelled():  # the text changed meanwhile
        return f"{head}: the text changed; hover again."
    found = task.result()
    if isinstance(found, str):
        return f"{head}: {found}"
    from irtrace.facts.source_map import NOT_RUN

    entry = next((item for item in found.lines if item.line == line), None)
    if entry is None and line in found.not_run:
        return f"{head}: {NOT_RUN.format(line=line)}."
    if entry is None:
        return f"{head}: no statement of any pass carries this line's span."
    body = render_section(found, entry)
    note = stands_for_note(entry)
    if note:
        body = f"{note}\n\n{body}"
    full = server.line_maps.write(
        f"{found.kernel}-{found.target}-line{line}", every_pass_text(doc, found, entry)
    )
    link = f" · [Every pass]({full.as_uri()})" if full is not None else ""
    count = f"In {_passes_in(entry)} of {len(found.passes)} passes"
    sass = await sass_words(server, doc, kernel.name, found, line, min(wait_s, SASS_WAIT_S))
    return f"{head}\n\n{body}\n\n{count}{link} · {kernel_source_words(found, entry)}{sass}"


async def _compile_sass(found: SourceLines) -> CompiledKernel | str:
    """The nvcc job's SASS instructions per line of the document, or why there are none."""
    from tilelang_lsp.compile_job import compile_kernels

    assert found.sass_input is not None
    job = CompileJob(found.kernel, found.sass_input, python_lines=found.kernel_source_lines)
    try:
        answers = [answer async for answer in compile_kernels([job])]
    except OSError as error:
        return f"the nvcc job could not start: {error}"
    return answers[0] if answers else "the nvcc job gave no answer"


async def sass_words(
    server: TileLangLanguageServer, doc: Document, kernel: str, found: SourceLines, line: int, wait_s: float
) -> str:
    """`` · SASS: 5 MMA, 0 global, ...``: the machine code the line became, on a CUDA target (nvcc in
    a job of its own, started on the first hover; later hovers answer at once); empty elsewhere."""
    from irtrace.facts.instruction_classes import describe_counts

    if found.sass_input is None:
        return f" · SASS: {found.sass_error}" if found.sass_error else ""
    task = server.line_maps.task(doc, f"{kernel}\x00sass", lambda: _compile_sass(found))
    with contextlib.suppress(asyncio.TimeoutError):
        await asyncio.wait_for(asyncio.shield(task), wait_s)
    if not task.done():
        return " · SASS: compiling with nvcc… hover again for the instructions this line became."
    if task.cancelled():
        return ""
    compiled = task.result()
    if isinstance(compiled, str):
        return f" · SASS: {compiled}"
    if compiled.error is not None:
        return f" · SASS: nvcc failed: {compiled.error.splitlines()[0][:200]}"
    counts = dict(compiled.line_counts).get(line)
    if counts is None:
        return " · SASS: no instruction is located on this line."
    return f"\n\nSASS instructions from this line: {describe_counts(counts)}."


def stands_for_note(entry: LineThroughPasses) -> str:
    """Whose IR the hover shows for a line without its own: the readers of a value line, or of a
    bind a pass inlined (from which pass on); empty for a line shown with its own IR."""
    from irtrace.facts.source_map import used_by_words

    users = sorted({user for stage in entry.stages for user in stage.used_by if not stage.inlined})
    if users:
        return f"No statement of its own: {used_by_words(users)}, whose IR stands for it."
    inlined = sorted({user for stage in entry.stages for user in stage.used_by if stage.inlined})
    if inlined:
        first = next(stage.first for stage in entry.stages if stage.inlined)
        return (
            f"After `{first}` a pass inlined this line's bind: {used_by_words(inlined)}, "
            "whose IR stands for it there."
        )
    return ""


def kernel_source_words(found: SourceLines, entry: LineThroughPasses) -> str:
    """``In the CUDA source: lines 120-164``, or why no line is named."""
    from irtrace.facts.source_map import line_ranges

    language = found.source_language or "kernel"
    if not found.source_mapped:
        return f"{language} source: not mapped (this backend's codegen writes no `#line` directives)."
    if not entry.source_lines:
        return f"{language} source: no line carries this line (code TileLang's own macros emit is theirs)."
    ranges = ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in line_ranges(entry.source_lines))
    noun = "line" if len(entry.source_lines) == 1 else "lines"
    return f"In the {language} source: {noun} {ranges}."


def _passes_in(entry: LineThroughPasses) -> int:
    return sum(stage.last_index - stage.first_index + 1 for stage in entry.stages)


def key_stages(found: SourceLines, entry: LineThroughPasses) -> list[tuple[str, LineStage | None]]:
    """``(what, stage)`` in pass order: the first stage, the ones holding layout inference and
    LowerTileOp, and the last one; ``None`` when no statement after that pass carries the line."""
    picked: dict[int, tuple[str, LineStage | None]] = {}
    for stage in (entry.stages[0], entry.stages[-1]):
        picked[stage.first_index] = (stage.first, stage)
    for names in (LAYOUT_PASSES, (LOWER_TILE_OP,)):
        index = next((i for i, label in enumerate(found.passes) if label in names), None)
        if index is None:
            continue
        holding = next((s for s in entry.stages if s.first_index <= index <= s.last_index), None)
        if holding is None:
            picked[index] = (found.passes[index], None)
        else:
            picked[holding.first_index] = (holding.first, holding)
    return [picked[index] for index in sorted(picked)]


def render_section(found: SourceLines, entry: LineThroughPasses) -> str:
    """One bullet per key stage: ``after `tl.LowerTileOp` (IR lines 52, 53): `T.ptx_...` +1``."""
    bullets = []
    for what, stage in key_stages(found, entry):
        if stage is None:
            bullets.append(f"- after `{what}`: no statement carries this line")
            continue
        passes = f"`{stage.first}`" if stage.first == stage.last else f"`{stage.first}` … `{stage.last}`"
        numbers = ", ".join(str(n) for n in stage.ir_lines[:6]) + (", …" if len(stage.ir_lines) > 6 else "")
        noun = "IR line" if len(stage.ir_lines) == 1 else "IR lines"
        more = f" +{len(stage.text) - 1}" if len(stage.text) > 1 else ""
        carried = f", {carried_words(stage.carried, stage.owned)}" if stage.carried else ""
        bullets.append(f"- after {passes} ({noun} {numbers}{carried}): {_code(stage.text[0])}{more}")
    return "\n".join(bullets)


def _code(text: str) -> str:
    shown = text.strip().replace("`", "'")
    if len(shown) > SHOWN_CHARS:
        shown = shown[: SHOWN_CHARS - 1] + "…"
    return f"`{shown}`"


def every_pass_text(doc: Document, found: SourceLines, entry: LineThroughPasses) -> str:
    """What ``irtrace ir TRACE --line N`` prints, for the link."""
    lines = [
        f"# Line {entry.line} of {doc.path}: {found.kernel} on {found.target}, the IR lines it became",
        "# after each pass (tilelang-lsp, from a lowering recorded with source maps).",
        "",
    ]
    for stage in entry.stages:
        span = stage.first if stage.first == stage.last else f"{stage.first} .. {stage.last}"
        lines.append(f"== after {span} (passes {stage.first_index}-{stage.last_index})")
        width = len(str(stage.ir_lines[-1])) if stage.ir_lines else 1
        lines += [
            f"{n:>{width}} {'~' if n in stage.carried else '|'} {text}"
            for n, text in zip(stage.ir_lines, stage.text, strict=False)
        ]
        lines.append("")
    return "\n".join(lines)
