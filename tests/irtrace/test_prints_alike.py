"""Modules that print as the one before them are not printed again (``snapshots.prints_alike``).

The oracle is TVM's printer itself: every module the check calls alike must print to the very
same text, on real lowerings, and the attacks are the two ways a check could be fooled: a
variable renamed without any other change (structural equality ignores names) and a variable
used twice against two distinct variables of one name (a field-by-field comparison sees no
difference). The exactness sweep (``-m sweep test_exact_passes.py``) checks every record of every
bundled example on every target with the print pool.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from irtrace.lowering import snapshots
from irtrace.lowering.api import prepare_request
from irtrace.lowering.manifest import load_manifest
from irtrace.lowering.recorder import CaptureOptions
from irtrace.lowering.snapshots import ModuleState, prints_alike
from irtrace.trace.writer import TraceWriter

from .conftest import MANIFEST, record_against_oracle

KERNELS = (
    ("per_token_quant", "cuda:sm_90"),
    ("matmul", "hip:gfx942"),
    ("rms_norm", "metal"),
    ("add_silu", "ascend"),
)


def _prepared(kernel: str, target: str) -> Any:
    for request in load_manifest(MANIFEST):
        for prepared in prepare_request(replace(request, targets=(target,))):
            if prepared.name == kernel:
                assert prepared.built is not None, prepared.error
                return prepared
    raise AssertionError(f"{kernel} is not in {MANIFEST}")


def _tvm() -> tuple[Any, Any]:
    """TVM and its TIR, from TileLang's copy."""
    import tilelang  # noqa: F401  (puts its TVM on the path)
    import tvm
    from tvm import tirx

    return tvm, tirx


def _modules(*bodies: Any) -> list[Any]:
    """One-function modules of one global variable and one parameter ``n``, a module a body
    (``body(n)``): what differs between them is the body alone."""
    tvm, tirx = _tvm()
    main, n = tvm.ir.GlobalVar("main"), tirx.Var("n", "int32")
    return [tvm.IRModule({main: tirx.PrimFunc([n], body(n))}) for body in bodies]


def test_a_renamed_variable_is_not_alike_though_the_structure_is_equal() -> None:
    tvm, tirx = _tvm()
    (before,) = _modules(lambda n: tirx.Evaluate(n + 1))
    ((main, _),) = before.functions.items()
    m = tirx.Var("m", "int32")
    after = tvm.IRModule({main: tirx.PrimFunc([m], tirx.Evaluate(m + 1))})
    assert tvm.ir.structural_equal(before, after)  # the trap: equality that ignores names
    assert before.script() != after.script()
    assert not prints_alike(ModuleState(after), ModuleState(before))


def test_two_variables_of_one_name_are_not_alike_to_one_variable_used_twice() -> None:
    _, tirx = _tvm()
    import tvm_ffi

    # the second body adds a free variable also named n
    before, after = _modules(
        lambda n: tirx.Evaluate(n + n), lambda n: tirx.Evaluate(n + tirx.Var("n", "int32"))
    )
    assert tvm_ffi.get_global_func("ffi.RecursiveEq")(before, after)  # the trap: fields all equal
    assert before.script() != after.script()
    assert not prints_alike(ModuleState(after), ModuleState(before))


def test_a_module_rebuilt_of_equal_parts_is_alike_and_prints_the_same() -> None:
    _, tirx = _tvm()
    before, after = _modules(lambda n: tirx.Evaluate(n + 1), lambda n: tirx.Evaluate(n + 1))
    assert not after["main"].body.same_as(before["main"].body)
    assert prints_alike(ModuleState(after), ModuleState(before))
    assert after.script() == before.script()


@pytest.mark.parametrize("threaded", [False, True], ids=["on the pipeline", "print pool"])
@pytest.mark.parametrize(("kernel", "target"), KERNELS)
def test_every_module_told_alike_prints_the_same_and_prints_are_saved(
    kernel: str, target: str, threaded: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Real lowerings, each pass checked against a synchronous print; modules are told alike."""
    told_alike: list[bool] = []

    def counted(state: ModuleState, previous: ModuleState) -> bool:
        told_alike.append(prints_alike(state, previous))
        return told_alike[-1]

    monkeypatch.setattr(snapshots, "prints_alike", counted)
    with TraceWriter(tmp_path / "t.jsonl") as writer:
        result, wrong = record_against_oracle(
            writer, _prepared(kernel, target), CaptureOptions(threaded=threaded)
        )
    assert result.error is None
    assert wrong == []
    assert sum(told_alike) >= 3, f"only {sum(told_alike)} of {len(told_alike)} modules compared told alike"
