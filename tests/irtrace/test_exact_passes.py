"""Every pass record tells the truth: checked against TileLang's own way of seeing a pass.

The oracle is a plain TVM instrument that prints the module synchronously before and after
every pass (what TileLang's ``tilelang/tools/lower_trace`` compares). It watches the very
lowering the recorder records, on every bundled example and every target of its dialect
(``tests/irtrace/conftest.py``), so TileLang's own run-to-run differences cannot blur it.
"""

from __future__ import annotations

import pytest

from irtrace.lowering.manifest import load_manifest

from ..conftest import EXAMPLES
from .conftest import MANIFEST, Coverage, coverage_cases


@pytest.mark.slow
@pytest.mark.parametrize(("kernel", "target"), coverage_cases())
def test_every_pass_record_matches_a_synchronous_print(kernel: str, target: str, coverage: Coverage) -> None:
    run = coverage.run(kernel, target)
    if not run.passes:
        pytest.skip(f"{kernel} cannot be built for {target}: {run.error}")
    wrong = coverage.disagreements[(kernel, target)]
    assert not wrong, "\n".join(wrong)


def test_every_bundled_example_is_checked() -> None:
    """The manifest the exactness test walks holds every bundled kernel file."""
    listed = {r.spec.path for r in load_manifest(MANIFEST)}
    programs = {"gemm_on_gpu.py", "gemm_script.py"}  # programs that call the kernels, not kernel files
    kernels = {p.name for p in EXAMPLES.glob("*.py") if p.name not in programs}
    assert kernels <= listed
