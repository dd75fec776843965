"""``irtrace reduce``: shrink the IR a failing pass received while the pass still fails the same
way, and write it as an ``irtrace repro`` script.

The module is caught exactly as ``irtrace repro`` catches it (the kernel lowered again from the
file the user names, the pass run alone). Then, to a fixed point or a time budget, smaller
modules are tried, the biggest cuts first: delete chunks of a statement sequence (halves, then
quarters, ... then single statements), unwrap thread launches, blocks, loops and branches
(their body stays), make loops one iteration long, and drop a block's unused buffers, access
regions and annotations. A change is kept when the pass, run alone on the smaller module (after
a round trip through TVM's JSON form, as the script stores it), still raises the same error:
the same headline once target JSON is masked and the module's buffer and variable names and all
numbers are masked (``failure_signature``).
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from irtrace.ci.coverage import error_headline
from irtrace.ci.repro import (
    Reproducer,
    ReproError,
    SavedModule,
    mask_targets,
    render_script,
    reproducible_pass,
    require_rebuildable,
    run_alone,
)
from irtrace.trace.model import KernelRun, Trace


@dataclass(frozen=True)
class Reduction:
    """The reproducer of the reduced module, and how much smaller it is."""

    reproducer: Reproducer
    statements_before: int
    """TIR statement nodes in the module the pass received."""
    statements_after: int
    """TIR statement nodes in the reduced module."""
    tries: int
    """Smaller modules the pass was run on."""
    timed_out: bool
    """The budget ran out before a fixed point (a longer budget may shrink it further)."""


def failure_signature(error: str, names: frozenset[str] = frozenset()) -> str:
    """What must stay the same while reducing: the error's headline with target JSON masked,
    each of ``names`` (the module's buffers and variables) read as ``<name>`` and every number
    as ``N``. Names are masked because a pass may name a different buffer for the same fault
    from one run to the next (``tl.LayoutInference`` walks an unordered map)."""
    headline = error_headline(mask_targets(error))
    if names:
        pattern = "|".join(re.escape(name) for name in sorted(names, key=len, reverse=True))
        headline = re.sub(rf"(?<![\w.])(?:{pattern})(?![\w])", "<name>", headline)
    return re.sub(r"\d+", "N", headline)


def module_names(module: Any) -> frozenset[str]:
    """Names of the buffers and variables in ``module``'s functions."""
    import tilelang  # noqa: F401  (TileLang's TVM)
    import tvm
    from tvm.tirx.stmt_functor import post_order_visit

    tir = tvm.tirx
    names: set[str] = set()

    def visit(node: Any) -> None:
        if isinstance(node, tir.Var):
            names.add(str(node.name))
        elif isinstance(node, (tir.BufferLoad, tir.BufferStore)):
            names.add(str(node.buffer.name))
        elif isinstance(node, tir.SBlock):
            names.update(str(b.name) for b in [*node.alloc_buffers, *(r.buffer for r in node.reads)])

    for _, function in module.functions.items():
        if isinstance(function, tir.PrimFunc):
            names.update(str(buffer.name) for buffer in function.buffer_map.values())
            names.update(str(param.name) for param in function.params)
            post_order_visit(function.body, visit)
    return frozenset(name for name in names if re.fullmatch(r"\w+", name))


def reduce_failure(
    trace: Trace,
    run: KernelRun,
    kernel_file: str | Path | None,
    *,
    budget_s: float,
    trace_name: str | None = None,
    compile_flags: bool = False,
) -> Reduction:
    """Shrink the module ``run``'s failing pass received; ``ReproError`` when there is no failure
    to reduce or it does not recur with the pass run alone (the message says why). The run's pass
    configs are decoded as ``irtrace repro`` decodes them (``compile_flags`` keeps its flags)."""
    import tilelang  # noqa: F401  (TileLang's TVM)
    import tvm

    from irtrace.lowering.trace_configs import run_with_trace_configs

    kernel_file = require_rebuildable(run, kernel_file, "reduce")
    run, dropped = run_with_trace_configs(run, compile_flags=compile_flags)
    failing = reproducible_pass(run, kernel_file, dropped)
    module = tvm.ir.load_json(failing.saved.json)
    names = module_names(module)
    signature = failure_signature(failing.outcome, names)

    def still_fails(module: Any) -> bool:
        outcome = run_alone(failing.step, str(tvm.ir.save_json(module)), run, failing.target)
        return outcome is not None and failure_signature(outcome, names) == signature

    before = count_statements(module)
    with _quiet_stderr():  # TVM logs each tried module's layout conflicts on stderr
        module, tries, timed_out = shrink(module, still_fails, deadline=time.monotonic() + budget_s)
    reduced = SavedModule(str(tvm.ir.save_json(module)), str(module))
    after = count_statements(module)
    outcome = run_alone(failing.step, reduced.json, run, failing.target)
    if outcome is None or failure_signature(outcome, names) != signature:  # shrink keeps only failing modules
        raise ReproError(
            f"the reduced module no longer fails {failing.record.name} the same way: {outcome!r}"
        )
    name = trace_name or trace.path or "the trace"
    script = render_script(run, failing.record, reduced, failing.target, name, reduced=(before, after))
    recorded, reproduced = (error_headline(mask_targets(e)) for e in (failing.expected_error, outcome))
    reproducer = Reproducer(run, failing.record, recorded, reproduced, script, tuple(dropped))
    return Reduction(reproducer, before, after, tries, timed_out)


def count_statements(module: Any) -> int:
    """TIR statement nodes in every function of ``module``."""
    import tilelang  # noqa: F401  (TileLang's TVM)
    import tvm
    from tvm.tirx.stmt_functor import post_order_visit

    count = 0

    def visit(node: Any) -> None:
        nonlocal count
        if isinstance(node, tvm.tirx.Stmt):
            count += 1

    for _, function in module.functions.items():
        if isinstance(function, tvm.tirx.PrimFunc):
            post_order_visit(function.body, visit)
    return count


def shrink(module: Any, still_fails: Callable[[Any], bool], *, deadline: float) -> tuple[Any, int, bool]:
    """Make the edits ``_edits`` lists while ``still_fails`` holds, until a whole round keeps
    none or ``deadline`` (``time.monotonic``) passes. Returns the module, the tries, and whether
    the deadline stopped it."""
    tries = 0
    changed = True
    while changed:
        changed = False
        position = 0
        while True:
            if time.monotonic() > deadline:
                return module, tries, True
            edits = _edits(module)
            if position >= len(edits):
                break
            smaller = _apply(module, edits[position])
            tries += 1
            if still_fails(smaller):
                # the edits before this one failed on a larger module: go on from here
                module, changed = smaller, True
            else:
                position += 1
    return module, tries, False


@dataclass(frozen=True)
class _Edit:
    """One way to make the module smaller: ``kind`` done to ``node`` (compared by identity)."""

    kind: str
    node: Any
    start: int = 0
    stop: int = 0
    key: str = ""


_NODE_KINDS = {
    "delete": "tirx.SeqStmt",
    "unwrap_attr": "tirx.AttrStmt",
    "unwrap_block": "tirx.SBlockRealize",
    "unwrap_loop": "tirx.For",
    "shorten_loop": "tirx.For",
    "then": "tirx.IfThenElse",
    "else": "tirx.IfThenElse",
    "unused_buffers": "tirx.SBlockRealize",
    "access_regions": "tirx.SBlockRealize",
    "annotation": "tirx.SBlockRealize",
}


def _edits(module: Any) -> list[_Edit]:
    """Every edit that applies to ``module``: sequence chunks largest first, then unwrapping,
    then the clean-ups that leave the statement count as it is."""
    import tilelang  # noqa: F401  (TileLang's TVM)
    import tvm
    from tvm.tirx.stmt_functor import post_order_visit

    tir = tvm.tirx
    deletions: list[_Edit] = []
    unwraps: list[_Edit] = []
    cleanups: list[_Edit] = []

    def collect(node: Any) -> None:
        if isinstance(node, tir.SeqStmt):
            deletions.extend(_Edit("delete", node, start, stop) for start, stop in _chunks(len(node.seq)))
        elif isinstance(node, tir.AttrStmt):
            unwraps.append(_Edit("unwrap_attr", node))
        elif isinstance(node, tir.For):
            unwraps.append(_Edit("unwrap_loop", node))
            if isinstance(node.extent, tir.IntImm) and node.extent.value > 1:
                unwraps.append(_Edit("shorten_loop", node))
        elif isinstance(node, tir.IfThenElse):
            unwraps.append(_Edit("then", node))
            if node.else_case is not None:
                unwraps.append(_Edit("else", node))
        elif isinstance(node, tir.SBlockRealize):
            block = node.block
            if not block.alloc_buffers and not block.match_buffers and not block.iter_vars:
                unwraps.append(_Edit("unwrap_block", node))
            if _unused_buffers(block):
                cleanups.append(_Edit("unused_buffers", node))
            if block.reads or block.writes:
                cleanups.append(_Edit("access_regions", node))
            cleanups.extend(_Edit("annotation", node, key=str(key)) for key in block.annotations)

    for _, function in module.functions.items():
        if isinstance(function, tir.PrimFunc):
            post_order_visit(function.body, collect)
    deletions.sort(key=lambda edit: edit.start - edit.stop)  # largest chunks first, stable
    return deletions + unwraps + cleanups


def _chunks(length: int) -> Iterator[tuple[int, int]]:
    """``(start, stop)`` of the chunks of a sequence of ``length`` to try deleting: halves,
    quarters, ... single elements (ddmin's order), never the whole sequence."""
    size = length // 2
    seen = set()
    while size >= 1:
        for start in range(0, length, size):
            chunk = (start, min(start + size, length))
            if chunk[1] - chunk[0] < length and chunk not in seen:
                seen.add(chunk)
                yield chunk
        size //= 2


def _unused_buffers(block: Any) -> list[Any]:
    """Buffers ``block`` allocates that its body never names (loads, stores, data pointers,
    nested blocks' access regions)."""
    import tvm
    from tvm.tirx.stmt_functor import post_order_visit

    tir = tvm.tirx
    named: set[Any] = set()

    def visit(node: Any) -> None:
        if isinstance(node, (tir.BufferLoad, tir.BufferStore)):
            named.add(node.buffer.data)
        elif isinstance(node, tir.Var):
            named.add(node)
        elif isinstance(node, tir.SBlock):
            named.update(region.buffer.data for region in [*node.reads, *node.writes])
            named.update(buffer.data for buffer in node.alloc_buffers)

    post_order_visit(block.body, visit)
    return [buffer for buffer in block.alloc_buffers if buffer.data not in named]


def _apply(module: Any, edit: _Edit) -> Any:
    """``module`` with ``edit`` made."""
    import tvm
    from tvm.tirx.stmt_functor import ir_transform

    def rewrite(node: Any) -> Any:
        return _rewrite(node, edit) if node.same_as(edit.node) else None

    result = tvm.IRModule(dict(module.functions.items()))
    for gv, function in module.functions.items():
        if isinstance(function, tvm.tirx.PrimFunc):
            body = ir_transform(function.body, None, rewrite, [_NODE_KINDS[edit.kind]])
            if not body.same_as(function.body):
                result[gv] = function.with_body(body)
    return result


def _rewrite(node: Any, edit: _Edit) -> Any:
    """The statement that replaces ``node`` for ``edit``."""
    import tvm
    from tvm.tirx.stmt_functor import substitute

    tir = tvm.tirx
    if edit.kind == "delete":
        rest = [s for i, s in enumerate(node.seq) if not edit.start <= i < edit.stop]
        return rest[0] if len(rest) == 1 else tir.SeqStmt(rest)
    if edit.kind == "unwrap_attr":  # a launched thread's index becomes 0
        if isinstance(node.node, tir.IterVar):
            return substitute(node.body, {node.node.var: tir.const(0, node.node.var.dtype)})
        return node.body
    if edit.kind == "unwrap_loop":  # the body once, at the loop's start
        return substitute(node.body, {node.loop_var: node.min})
    if edit.kind == "shorten_loop":
        one = tir.IntImm(node.extent.dtype, 1)
        return tir.For(
            node.loop_var, node.min, one, node.kind, node.body, node.thread_binding, node.annotations
        )
    if edit.kind in ("then", "else"):
        return node.then_case if edit.kind == "then" else node.else_case
    if edit.kind == "unwrap_block":
        return node.block.body
    block = node.block
    reads, writes, alloc, annotations = block.reads, block.writes, block.alloc_buffers, block.annotations
    if edit.kind == "unused_buffers":
        unused = {buffer.data for buffer in _unused_buffers(block)}
        alloc = [buffer for buffer in alloc if buffer.data not in unused]
        reads = [region for region in reads if region.buffer.data not in unused]
        writes = [region for region in writes if region.buffer.data not in unused]
    elif edit.kind == "access_regions":
        reads, writes = [], []
    else:
        annotations = {key: value for key, value in annotations.items() if str(key) != edit.key}
    smaller = tir.SBlock(
        block.iter_vars,
        reads,
        writes,
        block.name_hint,
        block.body,
        block.init,
        alloc,
        block.match_buffers,
        annotations,
    )
    return tir.SBlockRealize(node.iter_values, node.predicate, smaller)


@contextlib.contextmanager
def _quiet_stderr() -> Iterator[None]:
    """Send file descriptor 2 (where TVM's C++ logging writes) to the null device meanwhile."""
    sys.stderr.flush()
    try:
        saved = os.dup(2)
    except OSError:  # no stderr to quiet
        yield
        return
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 2)
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)
