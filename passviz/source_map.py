"""The kernel's source as the trace recorded it, for showing beside the IR.

Which IR line comes from which source line is the trace's source maps' to say (``srcmap``
records, ``irtrace record --source-map``; ``irtrace.facts.source_map``); passviz reads them and
guesses nothing from the text (docs/passviz.md says why).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import PurePath

from irtrace.trace.model import KernelRun, Trace

MAX_SOURCE_CHARS = 1 << 20
"""Longest kernel file the report shows and parses (``ast.parse`` costs far more memory than the
text): a kernel file is kilobytes, a trace can hold a text of millions of lines in a few KB."""


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
    text = trace.kernel_file(run)
    if text is None or len(text) > MAX_SOURCE_CHARS:
        return None
    # the file's and the function's names, read without parsing the spec's arguments (a trace
    # can hold megabytes of them)
    path, _, rest = run.spec.partition("::")
    function = rest.partition("(")[0].strip() or None
    name = PurePath(path.strip()).name or path.strip()[:200] or "kernel file"
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
