"""Tracing must not change compilation: the traced kernel source equals untraced `tilelang.lower`.

The untraced sources come from a plain ``tilelang.lower`` in a separate process, with no
instrument (``tests/irtrace/conftest.py``); a kernel that fails to lower must fail traced too.
"""

from __future__ import annotations

import pytest

from irtrace.trace import STATUS_OK, text_sha256

from .conftest import Coverage, coverage_cases


@pytest.mark.slow
@pytest.mark.parametrize(("kernel", "target"), coverage_cases())
def test_traced_source_is_byte_identical(kernel: str, target: str, coverage: Coverage) -> None:
    run = coverage.run(kernel, target)
    untraced = coverage.untraced_sources[(kernel, target)]
    if untraced is None:
        assert run.status != STATUS_OK, "lowers traced but not untraced"
        return
    assert run.status == STATUS_OK, run.error
    assert coverage.trace.kernel_source(run) == untraced
    assert run.source_sha256 == text_sha256(untraced)
