"""``irtrace reduce``: shrink the IR a failing pass received while the pass still fails the same
way, and write it as an ``irtrace repro`` script.

The module is caught exactly as ``irtrace repro`` catches it (the kernel lowered again from the
file the user names). Then, to a fixed point or a time budget: delete one statement at a time
(an element of a statement sequence), and make constant loop extents 1; a change is kept when
the pass, run alone on the smaller module, still raises the same error (``repro.same_error``:
the headline, target JSON masked).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from irtrace.ci.repro import (
    Reproducer,
    ReproError,
    SavedModule,
    capture_modules,
    failed_passes,
    failing_step,
    rebuild_spec,
    render_script,
    run_alone,
    same_error,
    target_json,
)
from irtrace.core.errors import UsageError
from irtrace.core.trace import STATUS_OK, KernelRun, Trace


@dataclass(frozen=True)
class Reduction:
    """The reproducer of the reduced module, and how much smaller it is."""

    reproducer: Reproducer
    statements_before: int
    statements_after: int
    tries: int
    timed_out: bool


def reduce_failure(
    trace: Trace,
    run: KernelRun,
    kernel_file: str | Path,
    *,
    budget_s: float = 60.0,
    trace_name: str | None = None,
) -> Reduction:
    """Shrink the module ``run``'s innermost failing pass received; raise ``ReproError`` when the
    pass does not fail on its own (nothing to reduce)."""
    import tilelang  # noqa: F401  (TileLang's TVM)
    import tvm

    if run.status == STATUS_OK:
        raise ReproError(f"{run.kernel} on {run.target} lowered without error; there is nothing to reduce")
    if run.spec.startswith(("captured:", "resumed:")):
        raise ReproError(f"{run.kernel} was not recorded from a kernel file; record it with `irtrace record`")
    candidates = failed_passes(run)
    if not candidates:
        raise ReproError(f"{run.kernel} on {run.target} failed before its first pass; nothing to reduce")
    record = candidates[0]
    step = failing_step(record)
    if isinstance(step, str):
        raise ReproError(f"{record.name} cannot be run alone: {step}")
    modules = capture_modules(run, rebuild_spec(run, kernel_file), [record.index])
    saved = modules.get(record.index)
    if saved is None:
        raise ReproError(f"the lowering of {run.kernel} did not reach {record.name} again")
    target = target_json(run)
    expected = record.error or run.error

    def still_fails(module: Any) -> bool:
        outcome = run_alone(step, str(tvm.ir.save_json(module)), run, target)
        return outcome is not None and same_error(outcome, expected)

    module = tvm.ir.load_json(saved.json)
    if not still_fails(module):
        raise ReproError(f"{record.name} does not fail the same way when run alone on the module it received")
    before = count_statements(module)
    module, tries, timed_out = shrink(module, still_fails, deadline=time.monotonic() + budget_s)
    reduced = SavedModule(str(tvm.ir.save_json(module)), str(module))
    outcome = run_alone(step, reduced.json, run, target) or ""
    script = render_script(run, record, reduced, target, trace_name or trace.path or "the trace")
    reproducer = Reproducer(run, record, expected or "", outcome, script)
    return Reduction(reproducer, before, count_statements(module), tries, timed_out)


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
    """Delete statements and shorten loops while ``still_fails`` holds, until nothing more goes
    or ``deadline`` (``time.monotonic``) passes."""
    tries = 0
    changed = True
    while changed:
        changed = False
        position = 0
        while True:
            if time.monotonic() > deadline:
                return module, tries, True
            smaller = _edit_at(module, position)
            if smaller is None:
                break
            tries += 1
            if still_fails(smaller):
                module, changed = smaller, True
            else:
                position += 1
    return module, tries, False


def _edit_at(module: Any, position: int) -> Any:
    """``module`` with its ``position``-th edit made (statements to delete, then loops to make one
    iteration long, in post order); ``None`` past the last."""
    import tilelang  # noqa: F401  (TileLang's TVM)
    import tvm
    from tvm.tirx.stmt_functor import ir_transform, post_order_visit

    targets: list[Any] = []

    def collect(node: Any) -> None:
        if isinstance(node, tvm.tirx.SeqStmt) and len(node.seq) > 1:
            targets.extend(("delete", node, index) for index in range(len(node.seq)))
        elif isinstance(node, tvm.tirx.For) and isinstance(node.extent, tvm.tirx.IntImm):
            targets.append(("shorten", node, 0) if node.extent.value > 1 else ("unwrap", node, 0))

    functions = [(gv, f) for gv, f in module.functions.items() if isinstance(f, tvm.tirx.PrimFunc)]
    for _, function in functions:
        post_order_visit(function.body, collect)
    if position >= len(targets):
        return None
    kind, chosen, index = targets[position]

    def rewrite(node: Any) -> Any:
        if not node.same_as(chosen):
            return None
        if kind == "delete":
            rest = [s for i, s in enumerate(node.seq) if i != index]
            return rest[0] if len(rest) == 1 else tvm.tirx.SeqStmt(rest)
        if kind == "unwrap":  # a one-iteration loop: its body, with the loop variable at its start
            return tvm.tirx.stmt_functor.substitute(node.body, {node.loop_var: node.min})
        return tvm.tirx.For(
            node.loop_var,
            node.min,
            tvm.tirx.IntImm(node.extent.dtype, 1),
            node.kind,
            node.body,
            node.thread_binding,
            node.annotations,
        )

    kinds = ["tirx.SeqStmt"] if kind == "delete" else ["tirx.For"]
    updated = {}
    for gv, function in functions:
        body = ir_transform(function.body, None, rewrite, kinds)
        updated[gv] = function.with_body(body) if not body.same_as(function.body) else function
    result = tvm.IRModule(dict(module.functions.items()))
    for gv, function in updated.items():
        result[gv] = function
    return result


def reduce_usage_error(message: str) -> UsageError:
    return UsageError(message)
