"""Traces for the passviz tests: the example GEMM lowered by the real pipelines, once per session."""

from __future__ import annotations

import pytest
from textual.reactive import reactive
from textual.widgets import Input

from irtrace.trace import Trace
from passviz.model import with_fixed_times
from tests.conftest import SMALL_GEMM, record_to_file

TARGETS = ["cuda:sm_90", "hip:gfx942", "ascend"]
"""Two backends that lower the GEMM and one (Ascend) whose semantic check rejects it."""


@pytest.fixture(scope="session")
def three_target_trace(tmp_path_factory: pytest.TempPathFactory) -> Trace:
    """The example GEMM (256^3) on CUDA, HIP and Ascend; the Ascend run fails in a pass."""
    path = tmp_path_factory.mktemp("passviz") / "gemm3.jsonl"
    return record_to_file(path, [SMALL_GEMM], TARGETS)


@pytest.fixture(scope="session")
def snapshot_trace(three_target_trace: Trace) -> Trace:
    """The same runs with pass times replaced by a fixed function of the pass index.

    Recorded times vary run to run; the IR does not (lowering is deterministic), so screenshots
    of this trace are stable while still showing the time bars.
    """
    return with_fixed_times(three_target_trace)


@pytest.fixture(autouse=True)
def no_cursor_blink(monkeypatch: pytest.MonkeyPatch) -> None:
    """A blinking cursor would make screenshots depend on timing."""
    steady: reactive[bool] = reactive(False, init=False)
    steady.__set_name__(Input, "cursor_blink")
    monkeypatch.setattr(Input, "cursor_blink", steady)
