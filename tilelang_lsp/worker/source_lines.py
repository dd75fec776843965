"""What each line of a kernel's file became, pass by pass: the kernel's full lowering recorded with
source maps (``irtrace.lowering.spans``), read back with ``irtrace.facts.source_map``. Runs inside
the worker only, on the first hover of a tile operation (maps print each module twice, so they are
not computed on every edit).
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path

from irtrace.base.errors import NotInTraceError
from irtrace.facts.source_map import (
    LineQuery,
    author_lines,
    generated_lines,
    kernel_source_map,
    line_through_passes,
    pass_maps,
    wanted_files,
)
from irtrace.lowering.machine_code import compiles_to_machine_code
from irtrace.targets.backends import TARGETS
from irtrace.trace.reader import load_trace
from tilelang_lsp.protocol import LineMaps, LineStage, LineThroughPasses, SourceLines
from tilelang_lsp.worker.analysis import AnalysisJob, analyze
from tilelang_lsp.worker.machine_code import sass_input

MAX_STAGE_LINES = 200
"""IR lines kept per stage; a tile operation's statements are a handful, a hostile file's could be many."""
MAX_LINE_CHARS = 400


def _never() -> bool:
    return False


def source_lines(request: LineMaps, should_stop: Callable[[], bool] = _never) -> SourceLines:
    """The request's kernel lowered through the whole pipeline with source maps, and for every
    line of the document its statements carry, the IR lines that line became after each pass."""
    kernel = request.kernel
    with tempfile.TemporaryDirectory() as folder:
        trace_file = str(Path(folder) / "lines.jsonl")
        result = analyze(AnalysisJob.of(request, should_stop=should_stop, trace_path=trace_file))
        trace = load_trace(trace_file)
    if not trace.runs:
        reasons = "; ".join(d.message for d in result.diagnostics) or "no run was recorded"
        raise ValueError(f"kernel {kernel!r} could not be built: {reasons}")
    run = trace.runs[0]
    labels = {item.record.index: item.label for item in pass_maps(run)}
    passes = tuple(
        labels.get(record.index, record.name) for record in sorted(run.passes, key=lambda p: p.index)
    )
    try:
        files = wanted_files(run, LineQuery(1))
    except NotInTraceError:  # no statement carries a line of this file
        return SourceLines(kernel=run.kernel, target=run.target, passes=passes)
    facts = author_lines(trace, run)
    mapped = sorted(
        {
            py
            for record in run.source_maps
            for _, file, py in record.lines
            if file < len(record.files) and record.files[file] in files
        }
        | set(facts.value_users)
    )
    lines = []
    for number in mapped:
        stages = tuple(
            LineStage(
                first=item.first.label,
                first_index=item.first.record.index,
                last=item.last.label,
                last_index=item.last.record.index,
                ir_lines=item.lines[:MAX_STAGE_LINES],
                text=tuple(line[:MAX_LINE_CHARS] for line in item.text_lines[:MAX_STAGE_LINES]),
                carried=tuple(n for n in item.carried if n in item.lines[:MAX_STAGE_LINES]),
                owned=tuple(n for n in item.owned if n in item.lines[:MAX_STAGE_LINES]),
                used_by=item.used_by,
                inlined=item.inlined,
            )
            for item in line_through_passes(trace, run, LineQuery(number), facts=facts)
        )
        if stages:
            source = generated_lines(trace, run, LineQuery(number), facts).source[:MAX_STAGE_LINES]
            lines.append(LineThroughPasses(line=number, stages=stages, source_lines=source))
    source_map = kernel_source_map(run)
    compile_input, compile_error = None, None
    python_lines: tuple[tuple[int, int], ...] = ()
    if source_map is not None and compiles_to_machine_code(run) and run.source_sha256 is not None:
        compile_input, compile_error = sass_input(run, trace.text(run.source_sha256))
        python_lines = tuple(
            sorted(
                {
                    (cu, py)
                    for cu, file, py in source_map.lines
                    if file < len(source_map.files) and source_map.files[file] in files
                }
            )
        )
    return SourceLines(
        kernel=run.kernel,
        target=run.target,
        passes=passes,
        lines=tuple(lines),
        not_run=facts.skipped,
        lowering_ms=(run.total_s or 0.0) * 1000,
        source_language=spec.source_language if (spec := TARGETS.get(run.target)) else "",
        source_mapped=source_map is not None,
        sass_input=compile_input,
        sass_error=compile_error,
        kernel_source_lines=python_lines,
    )
