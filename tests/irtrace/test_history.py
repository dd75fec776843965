"""A trace depends on the kernel, its arguments, target and pass configs only: not on what the
process lowered before, ``--jobs`` or target order.

Oracles: the same recording made another way (targets reversed, worker processes, the kernel
alone in a fresh process), and TileLang's own untraced lowering in a fresh process.
"""

from __future__ import annotations

import re
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from irtrace.lowering.api import RecordRequest, record_kernels
from irtrace.lowering.manifest import load_manifest
from irtrace.targets.backends import resolve_targets
from irtrace.trace.model import Trace
from irtrace.trace.reader import load_trace
from irtrace.trace.writer import TraceWriter

from ..conftest import DATA, EXAMPLES, ROOT
from .test_parallel import irtrace

AUTOTUNED = f"{EXAMPLES / 'autotune_gemm.py'}::matmul_relu(1024, 1024, 1024)"
GEMM = f"{EXAMPLES / 'gemm.py'}::matmul(256, 256, 256)"
TWO_WORKSPACES = f"{DATA / 'two_workspaces.py'}::row_stats()"
TARGETS = ("cuda:sm_90", "hip:gfx942")


def by_run(trace: Trace) -> dict[tuple[str, str], tuple[Any, ...]]:
    """What a trace says about each run, times and host aside, with the texts themselves."""
    return {
        (run.kernel, run.target): (
            run.spec,
            run.status,
            run.error,
            run.pass_configs,
            run.args,
            trace.texts.get(run.input_ir or ""),
            trace.kernel_source(run),
            [
                (p.index, p.name, p.parent, p.changed, p.status, trace.texts.get(p.ir_after or ""))
                for p in run.passes
            ],
        )
        for run in trace.runs
    }


def record(*args: str, cwd: Path, name: str) -> Trace:
    done = irtrace("record", *args, "-q", "-o", name, cwd=cwd)
    assert done.returncode == 0, done.stderr
    return load_trace(cwd / name)


@pytest.mark.sweep  # 25 s; the default suite keeps the in-process case below
def test_target_order_jobs_and_company_do_not_change_a_run(tmp_path: Path) -> None:
    # matmul_relu is @autotune: TileLang's jit cache hands one PrimFunc out for every target,
    # and lowering renames its thread variable in place (tx -> thread_binding)
    targets = [arg for target in TARGETS for arg in ("-t", target)]
    reversed_targets = [arg for target in reversed(TARGETS) for arg in ("-t", target)]
    plain = by_run(record(GEMM, AUTOTUNED, *targets, cwd=tmp_path, name="plain.jsonl"))
    assert by_run(record(GEMM, AUTOTUNED, *reversed_targets, cwd=tmp_path, name="rev.jsonl")) == plain
    assert by_run(record(GEMM, AUTOTUNED, *targets, "--jobs", "2", cwd=tmp_path, name="j2.jsonl")) == plain
    alone = by_run(record(AUTOTUNED, "-t", TARGETS[-1], cwd=tmp_path, name="alone.jsonl"))
    assert alone == {key: plain[key] for key in alone}


def test_in_process_recording_builds_a_fresh_kernel_for_each_target() -> None:
    # the --bench path lowers in this process, one target after the other
    from irtrace.targets.specs import parse_spec

    def in_process(targets: tuple[str, ...]) -> dict[tuple[str, str], tuple[Any, ...]]:
        writer = TraceWriter()
        recording = record_kernels([RecordRequest(parse_spec(AUTOTUNED), targets)], writer)
        assert not recording.errors
        return by_run(writer.trace())

    assert in_process(TARGETS) == in_process(tuple(reversed(TARGETS)))


_UNTRACED = """
import sys, tilelang, tvm
sys.path.insert(0, sys.argv[1])
from two_workspaces import row_stats
from irtrace.lowering.tvm_targets import make_tvm_target
from irtrace.targets.backends import resolve_targets
(target,) = resolve_targets((sys.argv[2],), "tilelang")
with make_tvm_target(target) as tvm_target:
    sys.stdout.write(tilelang.lower(row_stats(), target=tvm_target).kernel_source)
"""


@pytest.mark.parametrize("target", [pytest.param(t, marks=pytest.mark.sweep) for t in TARGETS])
def test_two_workspaces_are_named_as_tilelang_names_them(target: str, tmp_path: Path) -> None:
    untraced = subprocess.run(
        [sys.executable, "-c", _UNTRACED, str(DATA), target],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )
    assert untraced.returncode == 0, untraced.stderr
    assert re.search(r"workspace_1\b", untraced.stdout), "the kernel no longer has two workspaces"
    # after another kernel on another target, as a recording of a library would
    trace = record(GEMM, TWO_WORKSPACES, "-t", "cuda:sm_80", "-t", target, cwd=tmp_path, name="ws.jsonl")
    assert trace.kernel_source(trace.find_run("row_stats", target)) == untraced.stdout


# --------------------------------------------------------------------------- every example


ADDRESS_DEPENDENT = {
    ("flash_attention_fwd", "hip:gfx90a"),
    ("flash_attention_fwd", "hip:gfx942"),
    ("flash_attention_fwd", "hip:gfx950"),
}
"""Runs whose source TileLang itself names by heap address (tests/data/workspace_order.py)."""


def _without_workspace_numbers(value: Any) -> Any:
    return re.sub(r"\bworkspace(_\d+)?\b", "workspace", repr(value))


@pytest.mark.sweep
def test_every_example_on_every_target_records_the_same_any_way() -> None:
    requests = list(load_manifest(EXAMPLES / "irtrace.toml"))

    def recorded(requests: list[RecordRequest], jobs: int) -> dict[tuple[str, str], tuple[Any, ...]]:
        writer = TraceWriter()
        recording = record_kernels(requests, writer, jobs=jobs)
        assert not recording.errors
        return by_run(writer.trace())

    def reverse(request: RecordRequest) -> RecordRequest:
        if len(request.targets) == 1 and "*" not in request.targets[0]:
            return request
        targets = resolve_targets(request.targets, "tilelang")
        return replace(request, targets=tuple(target.name for target in reversed(targets)))

    one = recorded(requests, 1)
    others = {
        "--jobs 2": recorded(requests, 2),
        "reversed targets": recorded([reverse(r) for r in requests], 1),
    }
    for way, other in others.items():
        assert other.keys() == one.keys(), way
        differ = sorted(key for key in one if other[key] != one[key])
        assert set(differ) <= ADDRESS_DEPENDENT, f"{way}: {differ}"
        for key in differ:  # TileLang's own doing: only the workspaces' numbers may differ
            assert _without_workspace_numbers(other[key]) == _without_workspace_numbers(one[key]), (way, key)
