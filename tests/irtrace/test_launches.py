"""What a captured program passes at each launch, and ``--bench`` at those sizes (issue 36).

The script (``tests/data/launch_sizes_script.py``) compiles a kernel from plain numbers, whose
row count and ``num_chunks`` exist only in its launches, launches it three times on the CPU and
prints what it passed: the oracle. The bench runs as ``irtrace run --bench`` does, TileLang
compiling the kernel for real, with only the GPU step (``launch_bench``) stubbed to report the plan.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from irtrace.trace.reader import load_trace

from ..conftest import DATA, ROOT

SCRIPT = DATA / "launch_sizes_script.py"
DRIVER = Path(__file__).resolve().parent / "bench_at_launch_sizes.py"


def _line(output: str, tag: str) -> list:
    (line,) = [line for line in output.splitlines() if line.startswith(tag + " ")]
    return json.loads(line[len(tag) + 1 :])


def test_launch_signatures_are_recorded_shown_and_benched_with_no_bench_shape(tmp_path: Path) -> None:
    trace = tmp_path / "launches.jsonl"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, str(DRIVER), str(SCRIPT), str(trace)],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    passed = _line(done.stdout, "PASSED")
    # the oracle: each launch as the script printed it, counted
    expected = Counter((tuple(a), tuple(strides), tuple(b), n) for a, strides, b, n in passed)

    (run,) = load_trace(str(trace)).runs
    got = Counter()
    for signature in run.launches:
        a, b, chunks = signature.args
        assert (a.param, b.param, chunks.param) == ("A_handle", "B_handle", "num_chunks")
        assert a.dtype == b.dtype == "float32"
        got[(tuple(a.shape), tuple(a.strides), tuple(b.shape), chunks.value)] += signature.count
    assert got == expected
    assert [s.count for s in run.launches] == sorted((s.count for s in run.launches), reverse=True)

    # --bench: the most launched signature's sizes and scalar, with no --bench-shape
    (benched,) = _line(done.stdout, "BENCHED")
    (a, _, b, chunks), _count = expected.most_common(1)[0]
    assert benched["compiled"] == "JITKernel"  # TileLang compiled it; only the launch was stubbed
    assert benched["shape"] == {"rows": a[0]} and benched["shape_from"] == "captured"
    assert benched["inputs"] == [["A", list(a)], ["B", list(b)], ["num_chunks", chunks]]

    # irtrace instances and irtrace show --json show them
    irtrace = [str(Path(sys.executable).parent / "irtrace")]
    instances = subprocess.run(
        [*irtrace, "instances", "--json", str(trace)], capture_output=True, text=True, env=env, check=True
    )
    (instance,) = json.loads(instances.stdout)["instances"]
    assert sum(s["count"] for s in instance["launches"]) == len(passed)
    listing = subprocess.run(
        [*irtrace, "instances", str(trace)], capture_output=True, text=True, env=env, check=True
    )
    assert (
        "launch:    ×2 A_handle float32[96, 64]/[64, 1], B_handle float32[96, 64]/[64, 1], num_chunks=3"
        in (listing.stdout)
    )
    shown = subprocess.run(
        [*irtrace, "show", "--json", str(trace)], capture_output=True, text=True, env=env, check=True
    )
    assert json.loads(shown.stdout)["runs"][0]["launches"] == instance["launches"]


@pytest.mark.sweep  # 25 s; its sibling above covers the launches, this the merge of IRTRACE= parts
def test_launches_under_irtrace_survive_the_merge_of_parts(tmp_path: Path) -> None:
    """``IRTRACE=``: each process writes a part, merged at the end; the launches come along."""
    from .test_autocapture import hooked_env

    trace = tmp_path / "auto.jsonl"
    done = subprocess.run(
        [sys.executable, str(SCRIPT)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=hooked_env(tmp_path, IRTRACE=str(trace)),
    )
    assert done.returncode == 0, done.stderr[-3000:]
    passed = _line(done.stdout, "PASSED")
    expected = Counter((tuple(a), tuple(strides), tuple(b), n) for a, strides, b, n in passed)
    (run,) = load_trace(str(trace)).runs
    got = Counter()
    for signature in run.launches:
        a, b, chunks = signature.args
        got[(tuple(a.shape), tuple(a.strides), tuple(b.shape), chunks.value)] += signature.count
    assert got == expected


OFFSETS_SCRIPT = DATA / "launch_offsets_script.py"


def test_bench_solves_a_dimension_of_n_plus_one_and_launches_with_the_programs_offsets(
    tmp_path: Path,
) -> None:
    """A varlen kernel: ``batch`` is only ``cu_seqlens``'s length minus one, and random offsets would
    read out of bounds, so the bench takes both from the launch (the script prints what it passed)."""
    trace = tmp_path / "offsets.jsonl"
    done = subprocess.run(
        [sys.executable, str(DRIVER), str(OFFSETS_SCRIPT), str(trace)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    passed = _line(done.stdout, "PASSED")
    offsets = passed["cu_seqlens"]
    (benched,) = _line(done.stdout, "BENCHED")
    assert benched["shape"] == {"total": offsets[-1], "batch": len(offsets) - 1}
    assert benched["shape_from"] == "captured"
    assert benched["launched"] == {"cu_seqlens": offsets}  # the float tensors stay random


@pytest.mark.parametrize(
    ("build", "size", "python"),
    [
        (lambda n: n + 1, 5, lambda v: v + 1),
        (lambda n: n * 2, 8, lambda v: v * 2),
        (lambda n: n * 3 + 2, 14, lambda v: v * 3 + 2),
        (lambda n: (n + 1) * 4, 20, lambda v: (v + 1) * 4),
        (lambda n: n * 2, 7, None),  # no integer n gives 7
        (lambda n: n * n, 9, None),  # not affine: 0 and 1 give slope 1, and 9 * 9 is not 9
    ],
)
def test_solve_dimension_gives_only_a_value_that_substitutes_back(build, size, python) -> None:  # type: ignore[no-untyped-def]
    from tilelang import tvm

    from irtrace.lowering.bench import solve_dimension

    tirx = tvm.tirx

    n = tirx.Var("n", "int32")
    solved = solve_dimension(build(n), size)
    if python is None:
        assert solved is None
    else:
        assert solved is not None and solved[0] == "n"
        assert python(solved[1]) == size  # the oracle: Python's arithmetic, not TVM's


def test_solve_dimension_leaves_bare_and_several_variable_dimensions() -> None:
    from tilelang import tvm

    from irtrace.lowering.bench import solve_dimension

    tirx = tvm.tirx

    n, m = tirx.Var("n", "int32"), tirx.Var("m", "int32")
    assert solve_dimension(n, 4) is None  # a bare variable is read directly
    assert solve_dimension(n + m, 4) is None
    assert solve_dimension(tirx.IntImm("int32", 4), 4) is None


def test_a_calls_tensor_of_n_plus_one_sizes_n_too() -> None:
    """The same rule for the sizes an eager call's tensors gave (``instance.tensors``), on a kernel
    built by TileLang's frontend: ``batch`` is the offsets' length minus one."""
    import tilelang.language as T

    from irtrace.lowering.bench import captured_sizes
    from irtrace.trace.schema import Instance, TensorArg

    batch = T.dynamic("batch")

    @T.prim_func
    def firsts(cu_seqlens: T.Tensor((batch + 1,), T.int32), Y: T.Tensor((batch,), T.int32)):
        with T.Kernel(batch) as b:
            Y[b] = cu_seqlens[b]

    offsets = [0, 3, 10, 12, 20]
    instance = Instance(
        process="pid 1", pid=1, tensors={"cu_seqlens": TensorArg(shape=[len(offsets)], dtype="int32")}
    )
    assert captured_sizes(firsts, instance) == {"batch": len(offsets) - 1}
