"""Layouts compared between runs (``irtrace.diff.layouts``), checked against TileLang's live fragments.

The oracle lowers the same kernel with ``tilelang.lower`` and reads the ``Fragment`` objects of the
module after ``tl.LayoutInference`` (``layout_oracle``): their thread count, elements per thread,
thread range, and where TVM's own evaluation puts an element. Hostile layout records (absurd
shapes, replication, expressions) give a bounded answer that says what was not compared.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
import time
from pathlib import Path

import msgspec
import pytest

from irtrace.diff.layouts import DIFFERS, NOT_COMPARED, SAME, compare_layouts, compare_mapping
from irtrace.trace.model import Trace
from irtrace.trace.schema import BufferLayout

from ..conftest import EXAMPLES, ROOT
from .layout_oracle import live_fragment

GEMM = EXAMPLES / "gemm.py"
GEMM_ARGS = (256, 256, 256)


def _layout(trace: Trace, target: str, buffer: str) -> BufferLayout:
    run = trace.find_run("matmul", target)
    return next(layout for layout in run.layouts[0].layouts if layout.buffer == buffer)


def test_sm90_vs_gfx942_accumulator_matches_tilelang_fragments(gemm_trace: Trace) -> None:
    comparison = compare_layouts(
        gemm_trace.find_run("matmul", "cuda:sm_90"),
        gemm_trace.find_run("matmul", "hip:gfx942"),
        "sm_90",
        "gfx942",
    )
    buffers = {buffer.buffer: buffer for buffer in comparison.buffers}
    c_local = buffers["C_local"]
    sm90 = live_fragment(GEMM, "matmul", GEMM_ARGS, "cuda:sm_90", "C_local")
    gfx942 = live_fragment(GEMM, "matmul", GEMM_ARGS, "hip:gfx942", "C_local")

    changes = {change.name: (change.a, change.b) for change in c_local.changes}
    expected_pair = (f"{sm90.threads} x {sm90.per_thread}", f"{gfx942.threads} x {gfx942.per_thread}")
    assert ("threads x elems" in changes) == (expected_pair[0] != expected_pair[1])
    ranges = tuple(f"{f.thread_offset}..{f.thread_offset + f.threads - 1}" for f in (sm90, gfx942))
    assert changes.get("thread range", ranges) == ranges
    assert (ranges[0] != ranges[1]) == ("thread range" in changes)

    mapping = c_local.mapping
    assert mapping is not None and mapping.status == DIFFERS and not mapping.sampled
    element = mapping.element
    assert element is not None
    # TVM's own evaluation differs at the element reported, and at no element before it (row-major).
    assert sm90.placement(element) != gfx942.placement(element)
    assert mapping.placement_a == (sm90.placement(element),)
    assert mapping.placement_b == (gfx942.placement(element),)
    shape = (128, 128)
    ordinal = element[0] * shape[1] + element[1]
    for earlier in range(ordinal):
        coords = divmod(earlier, shape[1])
        assert sm90.placement(coords) == gfx942.placement(coords), coords
    sentence = c_local.sentence(*comparison.where)
    assert sentence.startswith("C_local: ") and "on sm_90" in sentence and "on gfx942" in sentence
    assert f"element [{element[0]}, {element[1]}]" in sentence


def test_warp_specialization_moves_the_thread_range_not_the_mapping(
    gemm_path: Path, no_ws_path: Path
) -> None:
    """``passdiff runs``: the same kernel and target under another pass config."""
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "passdiff.cli",
            "runs",
            str(gemm_path),
            str(no_ws_path),
            "-t",
            "cuda:sm_90",
            "-f",
            "json",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert done.returncode == 1, done.stderr
    document = json.loads(done.stdout)
    layouts = document["comparisons"][0]["layouts"]
    buffers = {buffer["buffer"]: buffer for buffer in layouts["buffers"]}
    plain = live_fragment(GEMM, "matmul", GEMM_ARGS, "cuda:sm_90", "C_local")
    no_ws = live_fragment(
        GEMM, "matmul", GEMM_ARGS, "cuda:sm_90", "C_local", {"tl.disable_warp_specialized": True}
    )
    c_local = buffers["C_local"]
    expected = [
        {"property": "thread range", "a": f"{f.thread_offset}..{f.thread_offset + f.threads - 1}"}
        for f in (plain, no_ws)
    ]
    assert plain.thread_offset != no_ws.thread_offset
    assert c_local["changes"] == [{"property": "thread range", "a": expected[0]["a"], "b": expected[1]["a"]}]
    # The same thread (within the range) and local index for every element, as TVM says for a sample.
    assert c_local["mapping"]["status"] == SAME and not c_local["mapping"]["sampled"]
    for element in ((0, 0), (5, 77), (127, 127), (64, 3)):
        assert plain.placement(element) == no_ws.placement(element)
    assert "in old vs" in c_local["sentence"] and "in new" in c_local["sentence"]
    assert all(buffer["presence"] == "both" for buffer in layouts["buffers"])


# ----------------------------------------------------------------------------- hostile records


def _hostile(base: BufferLayout, **changes: object) -> BufferLayout:
    return msgspec.structs.replace(base, **changes)


def test_absurd_shape_is_compared_on_a_bounded_sample(gemm_trace: Trace) -> None:
    base = _layout(gemm_trace, "cuda:sm_90", "C_local")
    huge = [2**31 - 1, 2**31 - 1, 2**31 - 1]
    a = _hostile(base, input_shape=huge, forward_vars=["_i", "_j", "_k"], forward_index=["_k % 128"])
    b = _hostile(a, forward_index=["(_k + 0) % 128"])
    started = time.monotonic()
    check = compare_mapping(a, b, budget=200_000)
    assert time.monotonic() - started < 10
    assert check.status == SAME and check.sampled
    assert check.total == math.prod(huge) and 0 < check.compared < check.total
    assert "an even sample of" in check.words("on a", "on b", fragment=True)


@pytest.mark.parametrize(
    ("field", "text", "reason"),
    [
        ("forward_thread", "__import__('os').system('true')", "cannot be evaluated"),
        ("forward_thread", "_i // 0", "division by zero"),
        ("forward_thread", "_nope + 1", "unknown name"),
        ("forward_thread", "(" * 5000 + "_i" + ")" * 5000, "cannot be evaluated"),
        ("forward_thread", "-" * 50_000 + "_i", "cannot be evaluated"),
        ("forward_index", "_i _j", "not an expression"),
    ],
)
def test_bad_expressions_are_not_compared_and_say_why(
    gemm_trace: Trace, field: str, text: str, reason: str
) -> None:
    base = _layout(gemm_trace, "cuda:sm_90", "C_local")
    bad = _hostile(base, **{field: [text] if field == "forward_index" else text})
    check = compare_mapping(base, bad)
    assert check.status == NOT_COMPARED
    assert check.reason is not None and reason in check.reason


def test_absurd_replication_is_refused(gemm_trace: Trace) -> None:
    base = _layout(gemm_trace, "cuda:sm_90", "C_local")
    check = compare_mapping(base, _hostile(base, replicate=2**31 - 1, replicate_var="_rep"))
    assert check.status == NOT_COMPARED and check.reason is not None and "replication" in check.reason


def test_many_buffers_share_one_budget(gemm_trace: Trace) -> None:
    """Thousands of costly buffers cannot make one comparison run for minutes."""
    base = _layout(gemm_trace, "cuda:sm_90", "C_local")
    changed = _hostile(base, forward_index=[f"{base.forward_index[0]} + 0"])
    run_a = gemm_trace.find_run("matmul", "cuda:sm_90")
    many_a = [_hostile(base, buffer=f"b{n}") for n in range(2000)]
    many_b = [_hostile(changed, buffer=f"b{n}") for n in range(2000)]
    record_a = msgspec.structs.replace(run_a.layouts[0], layouts=many_a)
    record_b = msgspec.structs.replace(run_a.layouts[0], layouts=many_b)
    started = time.monotonic()
    comparison = compare_layouts(
        msgspec.structs.replace(run_a, layouts=(record_a,)),
        msgspec.structs.replace(run_a, layouts=(record_b,)), "a", "b", budget=100_000,
        total_budget=1_000_000,
    )  # fmt: skip
    assert time.monotonic() - started < 20
    statuses = [buffer.mapping.status for buffer in comparison.buffers if buffer.mapping is not None]
    assert statuses[0] == SAME and statuses[-1] == NOT_COMPARED
    assert comparison.buffers[-1].mapping is not None
    assert "budget" in (comparison.buffers[-1].mapping.reason or "")


def test_hostile_trace_through_the_cli_gives_a_bounded_answer(gemm_path: Path, tmp_path: Path) -> None:
    """A trace whose layout records hold absurd shapes and a hostile expression: ``passdiff
    targets`` still answers in bounded time (exit 1, differences), saying what it sampled and what
    it could not evaluate, with no traceback."""
    huge = [2**31 - 1] * 3
    edited = []
    for line in gemm_path.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        if record.get("record") == "layout":
            for layout in record["layouts"]:
                if layout["buffer"] == "C_local" and record["run"] == 1:  # the second run only
                    layout["forward_thread"] = "__import__('os').getcwd()"
                if layout["buffer"] == "A_shared":
                    address = "_k % 256" if record["run"] == 0 else "(_k + 0) % 256"
                    layout.update(
                        input_shape=huge,
                        forward_vars=["_i", "_j", "_k"],
                        forward_index=["0", "_j % 16", address],
                        output_shape=[1, 16, 256],
                    )
        edited.append(json.dumps(record))
    hostile = tmp_path / "hostile.jsonl"
    hostile.write_text("\n".join(edited) + "\n", encoding="utf-8")
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "passdiff.cli", "targets", str(hostile), "cuda:sm_90", "hip:gfx942",
         "-f", "json"],
        capture_output=True, text=True, cwd=ROOT, timeout=120,
    )  # fmt: skip
    assert time.monotonic() - started < 60
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    layouts = json.loads(done.stdout)["comparisons"][0]["layouts"]
    buffers = {buffer["buffer"]: buffer for buffer in layouts["buffers"]}
    a_shared = buffers["A_shared"]["mapping"]
    assert a_shared["total"] == math.prod(huge)
    if a_shared["status"] == NOT_COMPARED:  # a loaded machine: the wall-clock bound cut it, and says so
        assert "took longer than" in a_shared["reason"]
    else:
        assert a_shared["status"] == SAME and a_shared["sampled"]
    c_local = buffers["C_local"]
    assert c_local["mapping"]["status"] == NOT_COMPARED
    assert "mapping not compared: an expression cannot be evaluated" in c_local["sentence"]
