"""Every pass record tells the truth: checked against TileLang's own way of seeing a pass.

The oracle is a plain TVM instrument that prints the module synchronously before and after
every pass (what TileLang's ``tilelang/tools/lower_trace`` compares). It runs in its own
lowering, by another route than the recorder; both must agree pass by pass on every bundled
example and every target it lowers on.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from irtrace.api import prepare_request
from irtrace.manifest import load_manifest
from irtrace.recorder import record_lowering
from irtrace.trace import PHASE_CODEGEN, STATUS_OK, TraceWriter

from ..conftest import EXAMPLES
from .test_identical_source import MANIFEST, manifest_cases


@dataclass
class OraclePass:
    name: str
    before: str
    after: str | None = None


def synchronous_printer(seen: list[OraclePass]) -> Any:
    """A plain TVM instrument printing the module before and after every pass, on the spot."""
    from tvm.ir.instrument import pass_instrument

    stack: list[OraclePass] = []

    @pass_instrument
    class SynchronousPrint:
        def run_before_pass(self, mod: Any, info: Any) -> None:
            entry = OraclePass(str(info.name), str(mod))
            seen.append(entry)
            stack.append(entry)

        def run_after_pass(self, mod: Any, info: Any) -> None:
            stack.pop().after = str(mod)

    return SynchronousPrint()


@pytest.mark.slow
@pytest.mark.parametrize(("spec_text", "target_name"), manifest_cases())
def test_every_pass_record_matches_a_synchronous_print(spec_text: str, target_name: str) -> None:
    (request,) = [r for r in load_manifest(MANIFEST) if r.spec.text == spec_text]
    prepared = next(p for p in prepare_request(request) if p.target.name == target_name)
    assert prepared.built is not None, prepared.error
    expected: list[OraclePass] = []
    # The oracle watches the very lowering the recorder records (pass order = run_before_pass order).
    with TraceWriter() as writer:
        recorded = record_lowering(
            prepared.built.func,
            prepared.target,
            writer,
            kernel=prepared.name,
            pass_configs=dict(prepared.pass_configs),
            tvm_target=prepared.tvm_target,
            instruments=[synchronous_printer(expected)],
        )
    assert recorded.run.status == STATUS_OK, recorded.run.error
    trace = writer.trace()
    # codegen itself is the recorder's own step (its snapshot is the kernel source), not a TVM pass
    records = [p for p in recorded.run.passes if not (p.phase == PHASE_CODEGEN and p.name == "codegen")]

    assert [p.raw_name for p in records] == [p.name for p in expected]
    wrong = []
    for record, truth in zip(records, expected, strict=True):
        label = f"#{record.index} {record.name}"
        if trace.ir_before(record) != truth.before:
            wrong.append(f"{label}: IR before differs")
        if trace.ir_after(record) != truth.after:
            wrong.append(f"{label}: IR after differs")
        if record.changed != (truth.before != truth.after):
            wrong.append(
                f"{label}: recorded changed={record.changed}, the synchronous print says {not record.changed}"
            )
    assert not wrong, "\n".join(wrong)


def test_every_bundled_example_is_checked() -> None:
    """The manifest the exactness test walks holds every bundled kernel file."""
    listed = {r.spec.path for r in load_manifest(MANIFEST)}
    kernels = {p.name for p in EXAMPLES.glob("*.py") if p.name != "gemm_on_gpu.py"}
    assert kernels <= listed
