"""Traces for the passviz tests: the example GEMM lowered by the real pipelines, once per session."""

from __future__ import annotations

import re
from dataclasses import replace

import pytest
from msgspec.structs import replace as replace_struct
from textual.reactive import reactive
from textual.widgets import Input

from irtrace.trace.model import Trace
from tests.conftest import EXAMPLES, SMALL_GEMM, record_to_file


def with_fixed_times(trace: Trace) -> Trace:
    """A copy for stable screenshots: pass times a fixed function of the pass index, and the
    facts that change from recording to recording (date, machine, the kernel file's folder) fixed."""
    runs = []
    for run in trace.runs:
        passes = tuple(
            replace_struct(
                p,
                start_s=p.index * 0.001,
                wall_s=0.0005 * (1 + p.index % 7),
                self_s=0.0005 * (1 + p.index % 7),
            )
            for p in run.passes
        )
        spec = re.sub(r"^.*[/\\](?=[^/\\]+::)", "", run.spec)
        host = {"hostname": "host", "platform": "Linux", "python": "3"}
        runs.append(replace_struct(run, passes=passes, total_s=0.1, spec=spec, host=host))
    return replace(trace, runs=tuple(runs), created="2025-01-01T00:00:00+00:00")


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


@pytest.fixture(scope="session")
def no_ws_trace(gemm_no_ws_trace: Trace) -> Trace:
    """The example GEMM on cuda:sm_90 with ``tl.disable_warp_specialized``: the same kernel with
    one pass config changed, for --compare (recorded once for the session, tests/conftest.py)."""
    return gemm_no_ws_trace


@pytest.fixture(scope="session")
def factory_failure_trace(tmp_path_factory: pytest.TempPathFactory) -> Trace:
    """RMSNorm whose factory raises (threads must be a power of two), then the GEMM that lowers."""
    path = tmp_path_factory.mktemp("passviz") / "factory_failure.jsonl"
    return record_to_file(
        path, [f"{EXAMPLES / 'rmsnorm.py'}::rms_norm(threads=100)", SMALL_GEMM], ["cuda:sm_90"]
    )


FLASH = f"{EXAMPLES / 'flash_attention.py'}::flash_attention_fwd"


@pytest.fixture(scope="session")
def layouts_trace(tmp_path_factory: pytest.TempPathFactory) -> Trace:
    path = tmp_path_factory.mktemp("traces") / "layouts.jsonl"
    return record_to_file(path, [SMALL_GEMM, FLASH], ["cuda:sm_90", "hip:gfx942"])
