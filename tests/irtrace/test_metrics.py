"""Per-kernel metrics read from a trace's text, against the compiler's own facts computed another
way: the module codegen received, caught through TileLang's codegen hook in a plain lowering,
measured by TVM (``calculate_allocated_bytes``) and by walking its calls."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from irtrace.perf.metrics import SHARED_SCOPE, SYNC_OPS, run_metrics
from irtrace.trace.reader import load_trace

from ..conftest import EXAMPLES, SMALL_GEMM, record_to_file
from ..passdiff.oracle import load_kernel_module

CASES = [
    (SMALL_GEMM, "gemm.py", ("matmul", (256, 256, 256)), "cuda:sm_90"),
    (f"{EXAMPLES / 'rmsnorm.py'}::rms_norm()", "rmsnorm.py", ("rms_norm", ()), "hip:gfx942"),
]


class CodegenInput:
    """A TileLang instrumentation tool that keeps the module handed to codegen."""

    pass_instrument_priority = 0

    def __init__(self) -> None:
        self.module: Any = None
        self.source: str | None = None

    def create_pass_instrument(self) -> None:
        return None

    def pipeline_scope(self, base_phase: str) -> Any:
        import contextlib

        return contextlib.nullcontext()

    def run_codegen(self, event: Any, next_call: Any) -> Any:
        self.module = event.mod
        result = next_call()
        self.source = str(result.inspect_source())
        return result

    def finish(self, error: BaseException | None) -> None:
        pass


def _oracle(file: str, factory: tuple[str, tuple[Any, ...]], target_name: str) -> dict[str, int]:
    import tilelang
    import tvm
    from tilelang.instrumentation import compile_pass_instrumentation
    from tvm.s_tir.analysis import calculate_allocated_bytes

    from irtrace.lowering.tvm_targets import make_tvm_target
    from irtrace.targets.backends import get_target

    target = make_tvm_target(get_target(target_name))
    name, args = factory
    with target:
        func = getattr(load_kernel_module(EXAMPLES / file), name)(*args)
    tool = CodegenInput()
    with (
        compile_pass_instrumentation(tools=[tool], include_default_tools=False, reuse_existing=False),
        tvm.transform.PassContext(opt_level=3),
        target,
    ):
        tilelang.lower(func, target=target)
    module = tool.module
    shared = sum(
        int(size)
        for scopes in calculate_allocated_bytes(module).values()
        for scope, size in scopes.items()
        if SHARED_SCOPE.match(str(scope))
    )
    calls: list[str] = []

    def visit(node: Any) -> None:
        if isinstance(node, tvm.tirx.Call) and isinstance(node.op, tvm.ir.Op):
            calls.append(str(node.op.name).rsplit(".", 1)[-1])

    for _, function in module.functions.items():
        tvm.tirx.stmt_functor.post_order_visit(function.body, visit)
    assert tool.source is not None
    return {
        "ir_lines": len(str(module).splitlines()),
        "source_lines": len(tool.source.splitlines()),
        "shared_bytes": shared,
        "syncs": sum(name in SYNC_OPS for name in calls),
        "barriers": sum("barrier" in name and name not in SYNC_OPS for name in calls),
    }


@pytest.mark.parametrize(("spec", "file", "factory", "target"), CASES, ids=["gemm-sm_90", "rmsnorm-gfx942"])
def test_metrics_match_the_compilers_own_facts(
    spec: str, file: str, factory: tuple[str, tuple[Any, ...]], target: str, tmp_path: Path
) -> None:
    record_to_file(tmp_path / "t.jsonl", [spec], [target])
    trace = load_trace(tmp_path / "t.jsonl")
    (run,) = trace.runs
    metrics = run_metrics(trace, run).as_dict()
    expected = _oracle(file, factory, target)
    assert {name: metrics[name] for name in expected} == expected
    assert expected["shared_bytes"] > 0 and expected["syncs"] > 0
    assert metrics["registers"] is None and metrics["spill_bytes"] is None  # no --machine-code
