"""The kernel's source as the trace recorded it, for showing beside the IR.

Which IR line comes from which source line is the trace's source maps' to say (``srcmap``
records, ``irtrace record --source-map``; ``irtrace.core.source_map``); passviz reads them and
guesses nothing from the text (docs/passviz.md says why).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import PurePath

from irtrace.core.trace import KernelRun, Trace


@dataclass(frozen=True)
class KernelSource:
    """The kernel's Python file as the trace recorded it."""

    name: str
    """The file's name, for display (from the run's spec; never opened)."""
    lines: tuple[str, ...]
    first: int
    """0-based line where the kernel's factory or function starts (0 if not found)."""
    last: int
    """0-based line where it ends (inclusive)."""


def kernel_source(trace: Trace, run: KernelRun) -> KernelSource | None:
    """The run's kernel file as the trace holds it, or ``None`` when it holds none.

    Only text stored in the trace (checked against its SHA-256 when read) is shown: a trace is
    data, and a file its spec names may be anything on this machine (``../settings.py``).
    """
    from irtrace.core.errors import IrtraceError
    from irtrace.core.specs import parse_spec

    text = trace.kernel_file(run)
    if text is None:
        return None
    try:
        spec = parse_spec(run.spec)
        name, function = PurePath(spec.path).name or spec.path, spec.name
    except IrtraceError:
        name, function = "kernel file", None
    lines = tuple(text.splitlines())
    first, last = _function_lines(text, function, len(lines))
    return KernelSource(name, lines, first, last)


def _function_lines(text: str, name: str | None, count: int) -> tuple[int, int]:
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError):
        return (0, max(0, count - 1))
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == name:
            start = min([node.lineno, *(d.lineno for d in node.decorator_list)]) - 1
            return (start, (node.end_lineno or count) - 1)
    return (0, max(0, count - 1))
