"""Shared fixtures: real traces recorded from the bundled examples, once per test session."""

from __future__ import annotations

from pathlib import Path

import pytest

from irtrace.core.specs import parse_spec
from irtrace.core.trace import Trace, TraceWriter, load_trace
from irtrace.recording.api import RecordRequest, record_kernels

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
DATA = Path(__file__).resolve().parent / "data"


def record_to_file(path: Path, specs: list[str], targets: list[str], **configs: object) -> Trace:
    """Lower ``specs`` for ``targets`` through the real pipelines into ``path``."""
    requests = [RecordRequest(parse_spec(spec), tuple(targets), dict(configs)) for spec in specs]
    with TraceWriter(path) as writer:
        errors = record_kernels(requests, writer).errors
    assert not errors, errors
    return load_trace(path)


SMALL_GEMM = f"{EXAMPLES / 'gemm.py'}::matmul(256, 256, 256)"


@pytest.fixture(scope="session")
def gemm_trace(tmp_path_factory: pytest.TempPathFactory) -> Trace:
    """The example GEMM (256^3) lowered for cuda:sm_90 and hip:gfx942."""
    path = tmp_path_factory.mktemp("traces") / "gemm.jsonl"
    return record_to_file(path, [SMALL_GEMM], ["cuda:sm_90", "hip:gfx942"])
