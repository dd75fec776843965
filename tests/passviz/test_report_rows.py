"""The report's Pipelines table puts passes on rows by place in the pipeline, as passdiff aligns them.

The oracle is passdiff's tree alignment of the two runs, computed here with ``align_passes``, and
the pipelines' own nesting (each pass's parent); the trace is the bundled GEMM lowered by the real
CUDA (sm_90a) and HIP (gfx942) pipelines.
"""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from irtrace.diff import align_passes
from irtrace.trace.model import KernelRun, PassRecord, Trace
from passviz.report import pass_anchor, report_html
from passviz.report_grid import aligned_rows
from tests.conftest import ROOT, SMALL_GEMM, record_to_file

CUDA, HIP = "cuda:sm_90a", "hip:gfx942"


@pytest.fixture(scope="module")
def cuda_hip(tmp_path_factory: pytest.TempPathFactory) -> Trace:
    return record_to_file(tmp_path_factory.mktemp("rows") / "gemm.jsonl", [SMALL_GEMM], [CUDA, HIP])


def _parent_name(run: KernelRun, record: PassRecord) -> str | None:
    return next((p.name for p in run.passes if p.index == record.parent), None)


def test_rows_are_passdiffs_alignment_and_keep_each_pass_in_its_parent(cuda_hip: Trace) -> None:
    cuda, hip = cuda_hip.find_run("matmul", CUDA), cuda_hip.find_run("matmul", HIP)
    rows = aligned_rows([cuda, hip]).rows
    truth = align_passes(cuda, hip)
    assert [tuple(r.index if r else None for r in row.records) for row in rows] == [
        (pair.a.index if pair.a else None, pair.b.index if pair.b else None) for pair in truth
    ]
    assert [row.depth for row in rows] == [pair.depth for pair in truth]
    assert sorted(row.records[0].index for row in rows if row.records[0]) == [p.index for p in cuda.passes]
    assert sorted(row.records[1].index for row in rows if row.records[1]) == [p.index for p in hip.passes]
    for row in rows:
        a, b = row.records
        if a is not None and b is not None:
            assert a.name == b.name and _parent_name(cuda, a) == _parent_name(hip, b), row.label

    # The cases of the issue: CUDA's tl.Simplify inside tl.LowerTileOp faces HIP's nested one,
    # never a top-level tl.Simplify; the two tirx.BindTarget share a row.
    nested = next(
        p for p in cuda.passes if p.name == "tl.Simplify" and _parent_name(cuda, p) == "tl.LowerTileOp"
    )
    row = next(row for row in rows if row.records[0] is nested)
    assert row.records[1] is not None and _parent_name(hip, row.records[1]) == "tl.LowerTileOp"
    binds = [row for row in rows if any(r is not None and r.name == "tirx.BindTarget" for r in row.records)]
    assert len(binds) == 1 and all(r is not None for r in binds[0].records)


CELL = re.compile(r"<td(?: class='(?P<kind>[cfu])')?>(?:<a href='#(?P<anchor>[^']*)'>)?")


def test_the_pages_table_shows_those_rows(cuda_hip: Trace) -> None:
    """The HTML itself: each row's cells link to the passes passdiff pairs there, folds in between."""
    cuda, hip = cuda_hip.find_run("matmul", CUDA), cuda_hip.find_run("matmul", HIP)
    page = report_html(cuda_hip)
    grid = re.search(r"<div class='grid'>.*?</table></div>", page, re.S)
    assert grid is not None
    shown = []
    for tr in re.findall(r"<tr( class='fold')?>(.*?)</tr>", grid.group(0).split("<tbody>")[1]):
        folded, inner = tr
        if folded:
            shown.append(("fold", int(re.search(r"'p'>(\d+) pass", inner).group(1))))  # type: ignore[union-attr]
        else:
            shown.append(
                ("row", tuple(m.group("anchor") or m.group("kind") or "" for m in CELL.finditer(inner)))
            )

    def cell(run: KernelRun, record: PassRecord | None) -> str:
        if record is None:
            return ""
        return pass_anchor(run, record) if record.changed or record.failed else "u"

    expected: list[tuple[str, object]] = []
    for pair in align_passes(cuda, hip):
        cells = (cell(cuda, pair.a), cell(hip, pair.b))
        if any(c not in ("", "u") for c in cells):
            expected.append(("row", cells))
        elif expected and expected[-1][0] == "fold":
            expected[-1] = ("fold", int(expected[-1][1]) + 1)  # type: ignore[call-overload]
        else:
            expected.append(("fold", 1))
    assert shown == expected


BIG_REPORT = """
import sys, time
sys.path.insert(0, {root!r})
from tests.passdiff.test_long_alignment import TEXTS, make_run, pipeline_tree
from irtrace.trace.model import Trace
from passviz.report import report_html
tree = pipeline_tree(500)
other = list(tree)
other[0] = ("tl.First", None)
cuda, hip = make_run(tree, changing=5), make_run(other, "hip:gfx942", changing=5)
trace = Trace((cuda, hip), dict(TEXTS), "2026-12-03T00:00:00Z", None)
started = time.perf_counter()
page = report_html(trace)
print(len(cuda.passes), len(page), time.perf_counter() - started)
"""


def test_a_20k_pass_runs_report_builds_in_seconds() -> None:
    done = subprocess.run(
        [sys.executable, "-c", BIG_REPORT.format(root=str(ROOT))],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    passes, size, seconds = done.stdout.split()
    assert int(passes) == 20_000 and int(size) > 0
    assert float(seconds) < 20, done.stdout  # a generous bound: ~11 s before on 20k passes
