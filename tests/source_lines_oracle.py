"""The lines an author wrote, from the kernel's file with Python's ``ast`` (ORACLES.md, "Source
maps"): every call statement, assignment and loop header inside a ``with T.Kernel(...)`` block, with
the buffers each one uses. Shared by the source-map tests and ``bench/line_coverage.py``; it reads
the kernel's file, never the spans, so a line TileLang stopped carrying still counts.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field

from irtrace.facts.source_map import author_lines as run_author_lines
from irtrace.facts.source_map import kernel_files, origins_by_ir_line, pass_maps
from irtrace.trace.model import KernelRun, Trace
from irtrace.trace.schema import SourceMapRecord

_ALLOCATING = re.compile(r"(alloc_\w+|empty)")
_BUFFER_TYPE = re.compile(r"\b(Tensor|Buffer|StridedTensor|FragmentBuffer|SharedBuffer|LocalBuffer)\b")


def _is_kernel_scope(node: ast.With) -> bool:
    return any(
        isinstance(item.context_expr, ast.Call)
        and isinstance(item.context_expr.func, ast.Attribute)
        and item.context_expr.func.attr == "Kernel"
        for item in node.items
    )


def _buffers(tree: ast.AST) -> set[str]:
    """Names bound to buffers: parameters or declarations typed ``T.Tensor``/``T.Buffer``..., and
    targets of ``T.alloc_*``/``T.empty``."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.arg) and node.annotation is not None:
            if _BUFFER_TYPE.search(ast.unparse(node.annotation)):
                names.add(node.arg)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            if _BUFFER_TYPE.search(ast.unparse(node.annotation)):
                names.add(node.target.id)
        elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            func = node.value.func
            called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if _ALLOCATING.fullmatch(called):
                names.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return names


def _header_names(node: ast.stmt) -> set[str]:
    """The names a statement's own line uses (a loop's header, not its body)."""
    if isinstance(node, ast.For):
        parts: list[ast.AST] = [node.target, node.iter]
    else:
        parts = [node]
    return {n.id for part in parts for n in ast.walk(part) if isinstance(n, ast.Name)}


def author_lines(source: str, function: str | None = None) -> dict[int, set[str]]:
    """Line -> the buffers it uses, for every call statement, assignment and loop header inside a
    ``T.Kernel`` block of ``function`` (of the whole file when ``None`` or not found)."""
    tree: ast.AST = ast.parse(source)
    if function is not None:
        tree = next(
            (n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == function),
            tree,
        )
    buffers = _buffers(tree)
    lines: dict[int, set[str]] = {}
    for scope in ast.walk(tree):
        if not (isinstance(scope, ast.With) and _is_kernel_scope(scope)):
            continue
        for statement in scope.body:
            for node in ast.walk(statement):
                if (isinstance(node, ast.Expr) and isinstance(node.value, ast.Call)) or isinstance(
                    node, ast.Assign | ast.AnnAssign | ast.AugAssign | ast.For
                ):
                    lines[node.lineno] = _header_names(node) & buffers  # type: ignore[attr-defined]
    return lines


def mentions(text: str, buffers: set[str]) -> bool:
    """Whether ``text`` names one of ``buffers`` (also as TileLang renames them: ``A_1``)."""
    return any(re.search(rf"(?<![\w.]){re.escape(name)}(?:_\d+)?(?!\w)", text) for name in buffers)


@dataclass
class StageCoverage:
    """Author lines followed at each stage, summed over runs."""

    lines: int = 0
    at_first_pass: int = 0
    at_lower_tile_op: int = 0
    in_source: int = 0
    wrong: int = 0
    not_run: int = 0
    """lines the trace says the frontend did not run, and the independent oracle agrees"""
    missing: dict[str, list[int]] = field(default_factory=dict)
    """stage -> the author lines not followed there (one run)"""
    wrong_lines: list[tuple[str, int]] = field(default_factory=list)

    def add(self, other: StageCoverage) -> None:
        self.lines += other.lines
        self.at_first_pass += other.at_first_pass
        self.at_lower_tile_op += other.at_lower_tile_op
        self.in_source += other.in_source
        self.wrong += other.wrong
        self.not_run += other.not_run

    def percent(self, count: int) -> str:
        return f"{100.0 * count / self.lines:.1f}" if self.lines else "nan"

    def describe(self) -> str:
        missing = " ".join(f"{stage}-missing={lines}" for stage, lines in self.missing.items() if lines)
        return (
            f"lines={self.lines} first={self.at_first_pass} lower_tile_op={self.at_lower_tile_op} "
            f"source={self.in_source} wrong={self.wrong} not_run={self.not_run} {missing} "
            f"{self.wrong_lines or ''}"
        ).strip()


def _mapped(
    trace: Trace, source_map: SourceMapRecord | None, files: set[str], text: str | None
) -> dict[int, list[str]]:
    """Python line -> the texts of the IR lines the map names for it."""
    if source_map is None or text is None:
        return {}
    rows = text.split("\n")
    found: dict[int, list[str]] = {}
    for ir, lines in origins_by_ir_line(source_map, files, text).items():
        for line in lines:
            found.setdefault(line, []).append(rows[ir - 1])
    return found


def run_coverage(
    trace: Trace,
    run: KernelRun,
    source: str,
    function: str | None = None,
    python_ran: AbstractSet[int] | None = None,
) -> StageCoverage:
    """How many author lines of ``run``'s kernel the trace's maps follow at the first pass, after
    ``tl.LowerTileOp`` and in the kernel source; ``wrong`` counts mapped lines (in the IR stages)
    whose IR lines mention none of the buffers the Python line uses.

    A line that built no statement but binds a value (the trace's ``value_users``), or whose bind
    a pass inlined (``inlined_users``: at a stage where it has no IR of its own), is followed where
    the lines reading it are, and judged by their IR. A line the trace says did not run is
    followed (``not_run``) only when ``python_ran``, the lines an independent oracle saw Python run
    while building the same kernel, leaves it out too; without ``python_ran`` it is not."""
    if function is None and "::" in run.spec:
        function = run.spec.split("::", 1)[1].split("(", 1)[0] or None
    wanted = author_lines(source, function)
    files = kernel_files(run)
    maps = pass_maps(run)
    first = maps[0] if maps else None
    lower = next((m for m in maps if m.record.name == "tl.LowerTileOp"), None)
    kernel_source = next((m for m in run.source_maps if m.by == "line_directives"), None)
    stages = {
        "first": _mapped(trace, first.source_map, files, trace.text(first.record.ir_after)) if first else {},
        "lower_tile_op": _mapped(trace, lower.source_map, files, trace.text(lower.record.ir_after))
        if lower
        else {},
        "source": _mapped(trace, kernel_source, files, trace.text(kernel_source.ir)) if kernel_source else {},
    }
    facts = run_author_lines(trace, run)
    for mapped in stages.values():
        for line in wanted:
            users = facts.users_of(line) or facts.inlined_into(line)  # a bind a pass inlined, too
            if line not in mapped and users:
                texts = [text for user in users for text in mapped.get(user, [])]
                if texts:
                    mapped[line] = texts
    agreed = {
        line for line in wanted if facts.not_run(line) and python_ran is not None and line not in python_ran
    }
    for mapped in stages.values():
        for line in agreed:
            mapped.setdefault(line, [])
    found = StageCoverage(lines=len(wanted), not_run=len(agreed))
    found.at_first_pass = sum(1 for line in wanted if line in stages["first"])
    found.at_lower_tile_op = sum(1 for line in wanted if line in stages["lower_tile_op"])
    found.in_source = sum(1 for line in wanted if line in stages["source"])
    found.missing = {stage: sorted(set(wanted) - set(mapped)) for stage, mapped in stages.items()}
    for stage in ("first", "lower_tile_op"):
        for line, buffers in wanted.items():
            texts = stages[stage].get(line)
            if texts and buffers and not mentions("\n".join(texts), buffers):
                found.wrong_lines.append((stage, line))
    found.wrong = len({line for _, line in found.wrong_lines})
    return found
