"""Real traces for passdiff: the small GEMM lowered with and without warp specialization."""

from __future__ import annotations

from pathlib import Path

import pytest

from irtrace.trace.model import Trace

from ..conftest import SMALL_GEMM, record_to_file


@pytest.fixture(scope="session")
def gemm_path(gemm_trace: Trace) -> Path:
    assert gemm_trace.path is not None
    return Path(gemm_trace.path)


@pytest.fixture(scope="session")
def no_ws_path(gemm_no_ws_trace: Trace) -> Path:
    assert gemm_no_ws_trace.path is not None
    return Path(gemm_no_ws_trace.path)


@pytest.fixture(scope="session")
def gemm_sm80_ascend_trace(tmp_path_factory: pytest.TempPathFactory) -> Trace:
    """The GEMM on cuda:sm_80 (whose passes rename buffers, ``C_local_3`` to ``C_local_2``) and on
    Ascend, whose pipeline fails in a semantic check."""
    path = tmp_path_factory.mktemp("traces") / "gemm_sm80_ascend.jsonl"
    return record_to_file(path, [SMALL_GEMM], ["cuda:sm_80", "ascend"])
