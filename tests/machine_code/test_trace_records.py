"""The ``machine`` and ``bench`` records: self-contained after a run's ``end`` (a reader that skips
them sees each run as it ended), checked like every other record."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from msgspec.structs import replace

from irtrace.base.errors import TraceFormatError
from irtrace.trace.model import PHASE_MACHINE
from irtrace.trace.reader import load_trace, parse_trace_lines

from .conftest import Recorded

pytestmark = pytest.mark.slow


def test_without_machine_records_each_run_is_as_it_ended(recorded: Recorded) -> None:
    lines = recorded.path.read_text().splitlines()
    kinds = [json.loads(line)["record"] for line in lines]
    assert "machine" in kinds
    # every machine record comes after its run's end
    ended: set[int] = set()
    for line in lines:
        record = json.loads(line)
        if record["record"] == "end":
            ended.add(record["run"])
        elif record["record"] == "machine":
            assert record["run"] in ended
    stripped = parse_trace_lines([line for line in lines if json.loads(line)["record"] != "machine"])
    for full, plain in zip(recorded.trace.runs, stripped.runs, strict=True):
        lowering = tuple(p for p in full.passes if p.phase != PHASE_MACHINE)
        assert plain == replace(full, passes=lowering, resources=())


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("registers", -1, "'registers' must be an integer"),
        ("spill_stores", "0", "'spill_stores' must be an integer"),
        ("dynamic_smem", 1.5, "'dynamic_smem' must be an integer"),
        ("arch", None, "'arch' must be a string"),
    ],
)
def test_mistyped_resources_are_a_format_error(
    recorded: Recorded, tmp_path: Path, field: str, value: object, message: str
) -> None:
    lines = recorded.path.read_text().splitlines()
    number = next(i for i, line in enumerate(lines) if json.loads(line)["record"] == "machine")
    record = json.loads(lines[number])
    function = next(iter(record["resources"]))
    record["resources"][function][field] = value
    lines[number] = json.dumps(record)
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join(lines) + "\n")
    with pytest.raises(TraceFormatError, match=message):
        load_trace(bad)


def test_bench_record_round_trip(recorded: Recorded, tmp_path: Path) -> None:
    from irtrace.trace.resources import BenchResult
    from irtrace.trace.writer import TraceWriter

    run = recorded.trace.runs[0]
    bench = BenchResult(0.0123, "NVIDIA H200", run.source_sha256, "tvm_ffi", 25, 100)
    path = tmp_path / "bench.jsonl"
    with TraceWriter(path) as writer:
        copied = writer.add_run(replace(run, bench=bench), recorded.trace.texts)
    (loaded,) = load_trace(path).runs
    assert loaded.bench == bench == copied.bench
    assert loaded.resources == run.resources
