"""``irtrace record --jobs N``, ``--shard I/N`` and ``--repeat N`` through the real command.

Shards recorded separately and joined with ``irtrace merge`` must hold the same runs, in the same
order, as one unsharded recording, and a recording by worker processes the same as one in
process: every pass, every IR text and every kernel source.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from msgspec.structs import replace

from irtrace.cli.main import main
from irtrace.lowering.api import Shard, WorkItem, fastest_times
from irtrace.trace.model import KernelRun, Trace
from irtrace.trace.reader import load_trace
from irtrace.trace.writer import TraceWriter

from ..conftest import DATA, EXAMPLES, ROOT, SMALL_GEMM, record_to_file

RMSNORM = f"{EXAMPLES / 'rmsnorm.py'}::rms_norm()"
SPECS = [SMALL_GEMM, RMSNORM]
TARGETS = ["-t", "cuda:sm_90", "-t", "hip:gfx942"]


def irtrace(
    *args: str | Path, cwd: Path, extra_env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.update(extra_env or {})
    return subprocess.run(
        [sys.executable, "-m", "irtrace.cli", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
    )


def content(trace: Trace) -> list[tuple[Any, ...]]:
    """What a recording says about each run, times and hosts aside."""
    return [
        (
            run.kernel,
            run.target,
            run.spec,
            run.status,
            run.pass_configs,
            run.args,
            run.input_ir,
            run.source_sha256,
            [(p.index, p.name, p.parent, p.changed, p.ir_before, p.ir_after, p.status) for p in run.passes],
        )
        for run in trace.runs
    ]


@pytest.fixture(scope="module")
def unsharded(tmp_path_factory: pytest.TempPathFactory) -> Trace:
    """The same specs and targets recorded in this process, one run after the other: the reference
    every sharded or worker recording must equal (no extra Python start for it)."""
    path = tmp_path_factory.mktemp("unsharded") / "full.jsonl"
    return record_to_file(path, SPECS, TARGETS[1::2])


@pytest.mark.sweep  # 15 s on 2 cores: with the sweeps (workers against one process stays in make test)
def test_sharded_records_merged_equal_one_unsharded_record(unsharded: Trace, tmp_path: Path) -> None:
    # shard 1 with two worker processes, shard 2 in process: both routes are compared
    first = irtrace(
        "record", *SPECS, *TARGETS, "-q", "--shard", "1/2", "--jobs", "2", "-o", "s1.jsonl", cwd=tmp_path
    )
    second = irtrace("record", *SPECS, *TARGETS, "-q", "--shard", "2/2", "-o", "s2.jsonl", cwd=tmp_path)
    assert first.returncode == 0 and second.returncode == 0, first.stderr + second.stderr
    assert len(load_trace(tmp_path / "s1.jsonl").runs) == len(load_trace(tmp_path / "s2.jsonl").runs) == 2
    merged = irtrace("merge", "s1.jsonl", "s2.jsonl", "-o", "merged.jsonl", cwd=tmp_path)
    assert merged.returncode == 0, merged.stderr
    result = load_trace(tmp_path / "merged.jsonl")
    assert content(result) == content(unsharded)
    for run in result.runs:  # the texts themselves, not only their keys
        assert result.kernel_source(run) == unsharded.kernel_source(
            unsharded.find_run(run.kernel, run.target)
        )


def test_worker_processes_record_what_one_process_records(unsharded: Trace, tmp_path: Path) -> None:
    # workers take the runs in reverse plan order (longest first by this trace's times): same trace
    previous = TraceWriter(tmp_path / "reversed.jsonl")
    for seconds, run in enumerate(unsharded.runs, start=1):
        previous.add_run(replace(run, total_s=float(seconds)), unsharded.texts)
    previous.close()
    done = irtrace(
        "record",
        *SPECS,
        *TARGETS,
        "--jobs",
        "2",
        "--order-from",
        "reversed.jsonl",
        "-o",
        "jobs.jsonl.gz",  # compressed: a worker once wrote its gzip trailer into the parent's file
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert content(load_trace(tmp_path / "jobs.jsonl.gz")) == content(unsharded)
    assert "trace written to jobs.jsonl.gz" in done.stdout


def test_a_crash_in_a_worker_fails_that_run_only(tmp_path: Path) -> None:
    misbehaving = DATA / "misbehaving.py"
    done = irtrace(
        "record",
        f"{misbehaving}::copy",
        SMALL_GEMM,
        "-t",
        "cuda:sm_90",
        "--jobs",
        "2",
        "-o",
        "crash.jsonl",
        cwd=tmp_path,
        extra_env={"IRTRACE_TEST_MISBEHAVE": "segv:LowerTileOp"},
    )
    assert done.returncode == 5, done.stderr  # a run failed; the trace was written
    trace = load_trace(tmp_path / "crash.jsonl")
    crashed, gemm = trace.find_run("copy", "cuda:sm_90"), trace.find_run("matmul", "cuda:sm_90")
    assert crashed.status == "failed" and crashed.stopped_by == "crash"
    assert crashed.running == "tl.LowerTileOp" and "SIGSEGV" in (crashed.error or "")
    assert gemm.status == "ok" and gemm.source_sha256 is not None
    assert [run.kernel for run in trace.runs] == ["copy", "matmul"]  # in plan order


# In process (main): what is checked here is the command's answer, not a process boundary.
def test_an_empty_shard_still_writes_a_trace_to_merge(tmp_path: Path) -> None:
    output = tmp_path / "empty.jsonl"
    code = main(["record", SMALL_GEMM, "-t", "cuda:sm_90", "-q", "--shard", "1/2", "-o", str(output)])
    assert code == 0
    assert load_trace(output).runs == ()


@pytest.mark.parametrize("value", ["0/2", "3/2", "a/b"])
def test_bad_shards_are_usage_errors(value: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["record", SMALL_GEMM, "--shard", value, "-o", str(tmp_path / "x.jsonl")])
    assert code == 2 and "--shard" in capsys.readouterr().err
    assert not (tmp_path / "x.jsonl").exists()


def test_shards_cover_every_item_once_in_order() -> None:
    items = [WorkItem(error=None) for _ in range(7)]
    for count in (1, 2, 3, 7, 9):
        slices = [Shard(i, count).take(items) for i in range(1, count + 1)]
        assert [id(item) for part in slices for item in part] == [id(item) for item in items]
        assert max(map(len, slices)) - min(map(len, slices)) <= 1


def test_repeat_keeps_the_fastest_time_of_each_pass(tmp_path: Path) -> None:
    from irtrace.lowering.api import RecordRequest, record_kernels
    from irtrace.targets.specs import parse_spec

    runs: list[KernelRun] = []
    for _ in range(3):
        writer = TraceWriter()
        recording = record_kernels([RecordRequest(parse_spec(RMSNORM), ("cuda:sm_90",))], writer)
        assert not recording.errors
        runs += recording.runs
    kept = fastest_times(runs[-1], runs)
    assert [p.ir_after for p in kept.passes] == [p.ir_after for p in runs[-1].passes]
    for record in kept.passes:
        assert record.self_s == min(run.passes[record.index].self_s for run in runs)
        assert record.wall_s == min(run.passes[record.index].wall_s for run in runs)
    assert kept.total_s == min(run.total_s or 0 for run in runs)

    # the command, in process (main): its answer is the point, not a process boundary
    output = tmp_path / "r.jsonl"
    assert main(["record", RMSNORM, "-t", "cuda:sm_90", "-q", "--repeat", "2", "-o", str(output)]) == 0
    (repeated,) = load_trace(output).runs
    assert [p.ir_after for p in repeated.passes] == [p.ir_after for p in runs[-1].passes]
