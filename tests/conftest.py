"""Shared fixtures: real traces recorded from the bundled examples, once per test session; how the
suite is split (markers) and spread over cores (xdist groups)."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from irtrace.lowering.api import RecordRequest, record_kernels
from irtrace.targets.specs import parse_spec
from irtrace.trace.model import Trace
from irtrace.trace.reader import load_trace
from irtrace.trace.writer import TraceWriter

collect_ignore_glob = ["data/*"]
"""Test data: kernel files and a project's own test suite (``no_gpu_suite``) that tests run, never
collect."""

# A suite started in the background (`make test &`) inherits an ignored SIGINT, and so would every
# command a test starts: the Ctrl-C tests need it as a terminal has it.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
DATA = Path(__file__).resolve().parent / "data"


def record_to_file(
    path: Path, specs: list[str], targets: list[str], *, source_map: bool = False, **configs: object
) -> Trace:
    """Lower ``specs`` for ``targets`` through the real pipelines into ``path``."""
    requests = [
        RecordRequest(parse_spec(spec), tuple(targets), dict(configs), source_map=source_map)
        for spec in specs
    ]
    with TraceWriter(path) as writer:
        errors = record_kernels(requests, writer).errors
    assert not errors, errors
    return load_trace(path)


SMALL_GEMM = f"{EXAMPLES / 'gemm.py'}::matmul(256, 256, 256)"


@pytest.fixture(scope="session")
def gemm_trace(tmp_path_factory: pytest.TempPathFactory) -> Trace:
    """The example GEMM (256^3) lowered for cuda:sm_90 and hip:gfx942, with source maps."""
    path = tmp_path_factory.mktemp("traces") / "gemm.jsonl"
    return record_to_file(path, [SMALL_GEMM], ["cuda:sm_90", "hip:gfx942"], source_map=True)


@pytest.fixture(scope="session")
def gemm_no_ws_trace(tmp_path_factory: pytest.TempPathFactory) -> Trace:
    """The GEMM on cuda:sm_90 with ``tl.disable_warp_specialized=True``: another pass config
    (passdiff's run-to-run tests and passviz's --compare share this one recording)."""
    path = tmp_path_factory.mktemp("traces") / "gemm_no_ws.jsonl"
    return record_to_file(path, [SMALL_GEMM], ["cuda:sm_90"], **{"tl.disable_warp_specialized": True})


SWEEP_FIXTURES = ("coverage", "recorded")
"""Fixtures that lower every bundled example on every target (``coverage``), or every CUDA
example through nvcc (``recorded``, machine code): a test using one is a ``sweep`` (``make
test-sweeps`` and its own CI job; the quick ``make test`` leaves it out). Measured with -n 2 on
the shared 2-core machine, the machine-code group alone took over 400 s of one worker."""
SHARED_GROUPS = {"coverage": "coverage", "recorded": "machine-code"}
"""Session fixtures too costly to make twice (every example on every target; nvcc on each CUDA
run): every test using one runs in the same xdist worker, which makes it once."""


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook reads the groups
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark sweeps, and give each test an xdist group for ``--dist loadgroup``: the costly shared
    fixture it uses, else its file (module-scoped fixtures, such as a language server per
    module, are then started once)."""
    for item in items:
        fixtures = getattr(item, "fixturenames", ())
        if any(name in fixtures for name in SWEEP_FIXTURES):
            item.add_marker(pytest.mark.sweep)
        if item.get_closest_marker("xdist_group") is None:
            group = next((g for name, g in SHARED_GROUPS.items() if name in fixtures), None)
            item.add_marker(pytest.mark.xdist_group(group or item.nodeid.split("::")[0]))
