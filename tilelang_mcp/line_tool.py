"""What ``source_line_ir`` answers: what a line of a kernel's Python file became after each pass,
from a lowering recorded with source maps (docs/source-maps.md), as ``irtrace ir TRACE --line N
--json`` gives it. The tool itself is ``tilelang_mcp.tools.source_line_ir``, which checks the
spec's file against the roots and records the trace as the other tools do; the answer is computed
by ``python -m tilelang_mcp.line_tool`` in a child under the job's limits (``answer_in_child``),
never in the server, and comes back bounded (groups, lines per group, characters).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from irtrace.base.errors import NotInTraceError
from irtrace.facts.source_map import stands_for_words
from tilelang_mcp import backend
from tilelang_mcp.session import ToolError

MAX_GROUPS = 400
"""Groups of passes one answer lists; past it the list is cut, with a note."""
MAX_GROUP_LINES = 100
"""IR lines one group lists; past it they are cut, with a note."""
MAX_LINE_CHARS = 400
"""Characters of one IR line shown."""
MAX_ANSWER_CHARS = 400_000
"""Characters of IR text in one answer; past it no further group is listed, with a note."""
MAX_FILE_BYTES = 16 * 2**20
"""A kernel file longer than this is not read here to check the line (the trace's copy is checked)."""


def check_line(file: Path, line: int) -> None:
    """Refuse a line past the end of the kernel's file before lowering anything."""
    try:
        if file.stat().st_size > MAX_FILE_BYTES:
            return
        text = file.read_bytes()
    except OSError:
        return  # the job says why the file cannot be read
    count = text.count(b"\n") + (0 if text.endswith(b"\n") else 1)
    if line > count:
        raise ToolError(f"line {line} is past the end of {file.name} ({count} lines)")


def line_answer(
    trace_id: str, trace: backend.Trace, run: backend.KernelRun, line: int, pass_name: str | None
) -> tuple[str, dict[str, Any]]:
    """The tool's summary and structured answer: the ``irtrace-line/1`` document and the trace id."""
    try:
        document = backend.source_line_document(trace, run, line, pass_name)
    except NotInTraceError as error:
        if run.source_maps:
            raise
        raise ToolError(
            f"trace {trace_id} has no source maps: give `spec` to lower the kernel with them "
            "(or a trace from `irtrace record --source-map`)"
        ) from error
    groups, notes = _bounded_groups(document["passes"])
    data: dict[str, Any] = {"trace": trace_id, **document, "passes": groups}
    for stage in ("source", "ptx", "sass"):
        if stage in document and len(document[stage]["lines"]) > MAX_GROUP_LINES:
            notes.append(f"{stage} cut to its first {MAX_GROUP_LINES} lines")
        if stage in document:
            lines, text = document[stage]["lines"], document[stage]["text"]
            data[stage] = {
                "lines": lines[:MAX_GROUP_LINES],
                "text": [line[:MAX_LINE_CHARS] for line in text[:MAX_GROUP_LINES]],
            }
    if notes:
        data["note"] = "; ".join(notes)
    where = f"line {line} of {run.kernel} on {run.target}"
    machine = document.get("machine_code")
    if machine is not None:
        where += f" (SASS: {_counts_words(machine)})"
    if not groups:
        after = f" after {pass_name}" if pass_name else " after any pass"
        return f"{where}: no statement carrying this line is in the IR{after} (trace {trace_id})", data
    first = groups[0]["first"]
    users = sorted({user for group in groups for user in group.get("used_by", ())})
    inlined = any(group.get("inlined") for group in groups)
    value = f"; {stands_for_words(users, inlined)}" if users else ""
    return (
        f"{where}: {len(document['passes'])} group(s) of passes, the first after {first}{value} "
        f"(trace {trace_id})",
        data,
    )


def _counts_words(counts: dict[str, int]) -> str:
    """``2 MMA, 14 global, 0 shared, 3 barrier, 40 other, 59 in all``."""
    from irtrace.facts.instruction_classes import CLASS_TITLES

    parts = [f"{counts[name]} {title}" for name, title in CLASS_TITLES.items()]
    return ", ".join([*parts, f"{counts['total']} in all"])


def _bounded_groups(groups: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[str]]:
    """``groups`` cut to what one answer may hold: ``MAX_GROUPS`` groups, ``MAX_GROUP_LINES`` lines
    each, ``MAX_LINE_CHARS`` a line, ``MAX_ANSWER_CHARS`` in all; and notes saying what was cut."""
    kept: list[dict[str, Any]] = []
    notes: list[str] = []
    size = 0
    cut_lines = 0
    for group in groups[:MAX_GROUPS]:
        if size > MAX_ANSWER_CHARS:
            notes.append(
                f"showing the first {len(kept)} of {len(groups)} groups ({MAX_ANSWER_CHARS} characters)"
            )
            break
        if len(group["ir_lines"]) > MAX_GROUP_LINES:
            cut_lines += 1
        text = [line[:MAX_LINE_CHARS] for line in group["text"][:MAX_GROUP_LINES]]
        size += sum(len(line) for line in text)
        kept.append({**group, "ir_lines": group["ir_lines"][:MAX_GROUP_LINES], "text": text})
    else:
        if len(groups) > MAX_GROUPS:
            notes.append(
                f"showing the first {MAX_GROUPS} of {len(groups)} groups; give pass_name for one pass"
            )
    if cut_lines:
        notes.append(f"{cut_lines} group(s) cut to their first {MAX_GROUP_LINES} IR lines")
    return kept, notes


def answer_in_child(
    path: Path, trace_id: str, query: dict[str, Any], memory_mb: int, timeout_s: float
) -> tuple[str, dict[str, Any]]:
    """``line_answer`` for the trace at ``path``, computed by a child process under ``memory_mb``
    and ``timeout_s`` (``main``): the server only relays its bounded answer. ``query`` holds
    ``line``, ``kernel``, ``target`` and ``pass_name``."""
    command = [
        sys.executable,
        "-m",
        "tilelang_mcp.line_tool",
        str(memory_mb),
        str(path),
        json.dumps({"trace_id": trace_id, **query}),
    ]
    try:
        done = subprocess.run(
            command, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout_s
        )
    except subprocess.TimeoutExpired:
        raise ToolError(f"answering for {str(path)!r} took longer than {timeout_s:g} s") from None
    if done.returncode != 0:
        lines = [line for line in done.stderr.splitlines() if line.strip()]
        why = lines[-1] if lines else f"exit {done.returncode}"
        raise ToolError(why[:4000])
    answer = json.loads(done.stdout)
    return answer["summary"], answer["data"]


def main(argv: list[str]) -> int:
    """``python -m tilelang_mcp.line_tool LIMIT_MB TRACE QUERY_JSON``: the answer as JSON on stdout;
    an error as one line on stderr (exit 6 for a trace that is not one, 9 past the memory limit)."""
    from irtrace.base.errors import IrtraceError
    from tilelang_mcp.trace_copy import limit_memory

    limit_mb, trace_path, query = int(argv[0]), argv[1], json.loads(argv[2])
    limit_memory(limit_mb)
    try:
        trace = backend.load_trace(trace_path)
        target = query.get("target")
        run = trace.find_run(query.get("kernel"), backend.canonical_targets([target])[0] if target else None)
        summary, data = line_answer(query["trace_id"], trace, run, int(query["line"]), query.get("pass_name"))
    except (IrtraceError, backend.JobError, ToolError) as error:
        message = error.message if isinstance(error, IrtraceError) else str(error)
        print(message.replace("\n", " "), file=sys.stderr)
        return int(error.exit_code) if isinstance(error, IrtraceError) else 1
    except MemoryError:
        print(f"answering needs more than {limit_mb} MB (--memory-limit)", file=sys.stderr)
        return 9
    sys.stdout.write(json.dumps({"summary": summary, "data": data}, ensure_ascii=False, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
