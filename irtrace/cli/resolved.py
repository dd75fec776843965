"""The instance a kernel named without arguments is recorded with, in the words the editor's hover
and the MCP server use (``irtrace.lowering.resolve``): for ``irtrace record``'s summary and
``irtrace instances FILE.py``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from irtrace.trace.model import KernelRun

RESOLVED_FORMAT = "irtrace-resolved/1"
"""The ``format`` of ``irtrace instances FILE.py --json``; a change that breaks readers gets a new number."""


def provenance_line(kernel: str, resolved: Mapping[str, Any]) -> str:
    """``matmul: `matmul(M=1024, ...)` — arguments from __main__; symbolic: N`` (one line, raw:
    print it with ``echo``)."""
    text = f"{kernel}: `{resolved.get('call', kernel)}` — arguments from {resolved.get('origin', '?')}"
    autotune = resolved.get("autotune") or {}
    if isinstance(autotune, dict) and autotune:
        text += "; from the first @autotune config: " + ", ".join(f"{k}={v}" for k, v in autotune.items())
    for key, words in (("from_project", "from pyproject.toml"), ("symbolic", "symbolic (no value found)")):
        values = resolved.get(key) or []
        if isinstance(values, list) and values:
            text += f"; {words}: {', '.join(str(v) for v in values)}"
    others = [str(label) for label in resolved.get("instances") or [] if label != resolved.get("origin")]
    if others:
        text += f"; other instances (--instance LABEL): {', '.join(others)}"
    return text


def run_provenance_lines(runs: Sequence[KernelRun]) -> list[str]:
    """One line per kernel whose instance the resolver chose (``args["resolved"]``), in run order."""
    lines: list[str] = []
    seen: set[str] = set()
    for run in runs:
        resolved = run.args.get("resolved") if isinstance(run.args, dict) else None
        if not isinstance(resolved, dict):
            continue
        line = provenance_line(run.kernel, resolved)
        if line not in seen:
            seen.add(line)
            lines.append(line)
    return lines


def cli_instance_sources(pick: str | None) -> Any:
    """Where a kernel named without arguments finds its instance on the command line: the real
    runs recorded in the current folder (``irtrace.jsonl``, ``.irtrace/*.jsonl``) and the file's
    entry point, as the editor finds them in its workspace."""
    from pathlib import Path

    from irtrace.lowering.resolve.candidates import InstanceSources
    from irtrace.trace.instances import instance_trace_files

    return InstanceSources(traces=instance_trace_files(Path.cwd()), pick=pick)
