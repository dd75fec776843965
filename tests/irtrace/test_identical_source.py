"""Tracing must not change compilation: the traced kernel source equals untraced `tilelang.lower`.

The untraced sources come from a plain ``tilelang.lower`` in a separate process, with no
instrument (``tests/irtrace/conftest.py``); a kernel that fails to lower must fail traced too.
"""

from __future__ import annotations

import re

import pytest

from irtrace.trace.model import STATUS_OK, text_sha256

from .conftest import Coverage, coverage_cases


def _without_workspace_numbers(source: str) -> str:
    return re.sub(r"\bworkspace(_\d+)?\b", "workspace", source)


@pytest.mark.slow
@pytest.mark.parametrize(("kernel", "target"), coverage_cases())
def test_traced_source_is_byte_identical(kernel: str, target: str, coverage: Coverage) -> None:
    run = coverage.run(kernel, target)
    untraced = coverage.untraced_sources[(kernel, target)]
    if untraced is None:
        assert run.status != STATUS_OK, "lowers traced but not untraced"
        return
    assert run.status == STATUS_OK, run.error
    traced = coverage.trace.kernel_source(run) or ""
    if target == "c" and traced != untraced and traced.splitlines()[1:] == untraced.splitlines()[1:]:
        # Known and open: under the recorder, the C backend's first line (a comment naming the
        # target) omits the target's host; the code itself is identical. Reproduced outside the
        # suite (plain, traced, plain in one process); the cause in the codegen hook is not found.
        pytest.xfail("C target: the header comment omits the host under the recorder (open bug)")
    if traced != untraced and _without_workspace_numbers(traced) == _without_workspace_numbers(untraced):
        # Known and open: flash attention on hip has two workspace buffers whose names
        # (workspace, workspace_1) were seen to swap when the recorder was attached, though not
        # between plain lowerings; the code is otherwise identical. See docs/ci.md.
        pytest.xfail("workspace buffer names swapped under the recorder (open bug, docs/ci.md)")
    assert traced == untraced
    assert run.source_sha256 == text_sha256(untraced)
