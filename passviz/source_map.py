"""The kernel's source beside its IR: which source line an IR line came from.

Traces hold no TVM spans (the recorder prints TVMScript without them), so the mapping is read
from what the printed IR contains: the tile operator it calls (``T.copy`` is ``T.copy``;
``T.sblock_alloc_buffer(..., scope="shared.dyn")`` is ``T.alloc_shared``), the variable it
defines (``A_shared = ...``, ``for ko in ...``) and the buffers and variables it names, with TVM's
``_N`` suffixes dropped. Lines that name nothing distinctive (``T.reads()``) map to no line. Exact
spans need the recorder to keep them; ``docs/passviz.md`` says so.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import PurePath

from irtrace.core.trace import KernelRun, Trace

_IDENT = re.compile(r'"(?:[^"\\\n]|\\.)*"|(?<![.\w])([A-Za-z_]\w*)')
_OP = re.compile(r"\bT\.([A-Za-z_]\w*)")
_DEFINES = re.compile(
    r"^\s*(?:for\s+([A-Za-z_]\w*)(?:\s*,\s*([A-Za-z_]\w*))*\s+in\b|([A-Za-z_]\w*)\s*(?::[^=]+)?=[^=])"
)
_SUFFIX = re.compile(r"(?:_\d+)+$")
_COMMON = frozenset(
    {
        "T",
        "for",
        "in",
        "with",
        "as",
        "if",
        "else",
        "return",
        "def",
        "range",
        "True",
        "False",
        "None",
        "and",
        "or",
        "not",
        "I",
        "dtype",
        "scope",
        "float16",
        "float32",
        "int32",
        "bool",
        "handle",
        "annotations",
        "thread",
        "data",
        "strides",
        "import",
        "from",
        "tilelang",
        "language",
        "self",
    }
)
# How operators of the printed IR read in kernel source.
_OP_SYNONYMS = {
    "sblock_alloc_buffer": ("alloc_shared", "alloc_fragment", "alloc_local", "alloc_buffer", "alloc_var"),
    "alloc_buffer": ("alloc_shared", "alloc_fragment", "alloc_local", "alloc_buffer", "alloc_var"),
    "decl_buffer": ("alloc_shared", "alloc_fragment", "alloc_local", "alloc_buffer"),
    "fill": ("fill", "clear"),
    "serial": ("Pipelined", "serial", "Serial"),
    "thread_binding": ("Kernel",),
    "launch_thread": ("Kernel",),
    "launch_thread_idx": ("Kernel",),
    "parallel": ("Parallel",),
    "unroll": ("unroll", "Unroll"),
    "gemm": ("gemm", "gemm_v1", "gemm_v2"),
    # Lowered forms of the tile operators.
    "tma_copy": ("copy",),
    "tma_load": ("copy",),
    "tma_store": ("copy",),
    "ptx_cp_async": ("copy",),
    "ptx_ldmatrix": ("copy", "gemm"),
    "ptx_mma": ("gemm",),
    "ptx_wgmma_ss": ("gemm",),
    "ptx_wgmma_rs": ("gemm",),
    "tvm_mfma": ("gemm",),
    "simdgroup_multiply_accumulate": ("gemm",),
}
MIN_SCORE = 3


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


@dataclass(frozen=True)
class _Facts:
    ops: frozenset[str]
    defines: frozenset[str]
    names: frozenset[str]


def _facts(line: str, *, ir: bool) -> _Facts:
    code = line.split("#", 1)[0] if not line.lstrip().startswith("#") else ""
    ops = {m.group(1) for m in _OP.finditer(code)}
    if ir:
        ops = {synonym for op in ops for synonym in _OP_SYNONYMS.get(op, (op,))}
    names = {_SUFFIX.sub("", m.group(1)) or m.group(1) for m in _IDENT.finditer(code) if m.group(1)}
    defined = _DEFINES.match(code)
    defines = {_SUFFIX.sub("", d) for d in defined.groups() if d} if defined else set()
    return _Facts(frozenset(ops), frozenset(defines - _COMMON), frozenset(names - _COMMON))


def map_lines(ir_lines: Sequence[str], source: KernelSource) -> list[int | None]:
    """For each IR line, the 0-based source line it most likely came from, or ``None``.

    Ties go to the source line at or after the one the previous IR line mapped to, since
    lowering mostly keeps the order of statements.
    """
    candidates = [
        (number, _facts(source.lines[number], ir=False)) for number in range(source.first, source.last + 1)
    ]
    candidates = [(n, f) for n, f in candidates if f.ops or f.defines or f.names]
    mapped: list[int | None] = []
    previous = source.first
    cache: dict[str, int | None] = {}
    for line in ir_lines:
        key = line.strip()
        if key in cache and cache[key] is not None:
            mapped.append(cache[key])
            continue
        facts = _facts(line, ir=True)
        best: tuple[int, int, int] | None = None  # (score, prefers order, -number)
        if facts.ops or facts.defines:
            for number, source_facts in candidates:
                if facts.defines and source_facts.defines and not facts.defines & source_facts.defines:
                    continue  # defines another variable than the source line does
                score = 3 * len(facts.ops & source_facts.ops) + 4 * len(facts.defines & source_facts.defines)
                if not score:
                    continue
                score += len(facts.names & source_facts.names)
                ranked = (score, int(number >= previous), -number)
                if best is None or ranked > best:
                    best = ranked
        found = -best[2] if best is not None and best[0] >= MIN_SCORE else None
        cache[key] = found
        mapped.append(found)
        if found is not None:
            previous = found
    return mapped
