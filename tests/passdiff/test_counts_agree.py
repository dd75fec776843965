"""Every tool gives the same +/- for every pass of every bundled example (issue 24), and a stage
whose output is another language (codegen: TIR in, kernel source out) is a "new stage" with no
counts in all of them.

The examples of ``examples/irtrace.toml`` are lowered once per module on one target per dialect.
Oracles by other routes: ``difflib`` (no junk heuristic) on the two texts, normalized the way
passdiff documents, computed here; the net count is the texts' line counts; and the language of
each text, told by TVMScript's own header line.
"""

from __future__ import annotations

import difflib
import fnmatch
import io
import json
from contextlib import redirect_stdout
from dataclasses import replace
from pathlib import Path

import pytest

from irtrace.cli import main as irtrace_main
from irtrace.diff import NormalizeRules, normalize_ir, report_document
from irtrace.diff.summary import MODE_PASS, DiffReport, pass_diff
from irtrace.lowering.api import record_kernels
from irtrace.lowering.manifest import load_manifest
from irtrace.trace.model import Trace
from irtrace.trace.reader import load_trace
from irtrace.trace.writer import TraceWriter
from passdiff.cli import main as passdiff_main
from passviz.model import line_counts
from tests.conftest import EXAMPLES

pytestmark = pytest.mark.sweep
"""With the sweeps: the module's fixture records the manifest on three targets (13 s on 2 cores),
which make test's 10 minutes cannot hold; every pass's count is checked there."""

TARGETS = ("cuda:sm_90", "hip:gfx942", "metal")
"""One target per GPU dialect."""
TVMSCRIPT_HEADER = "# from tvm.script import"
"""The first line TVM prints for a module or function: a text without it is not TIR."""


@pytest.fixture(scope="module")
def examples(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Trace]:
    """The manifest's kernels on those of ``TARGETS`` each lists (failed runs kept)."""
    requests = []
    for request in load_manifest(EXAMPLES / "irtrace.toml"):
        targets = tuple(t for t in TARGETS if any(fnmatch.fnmatch(t, p) for p in request.targets))
        if targets:
            requests.append(replace(request, targets=targets))
    path = tmp_path_factory.mktemp("counts") / "examples.jsonl"
    with TraceWriter(path) as writer:
        assert not record_kernels(requests, writer).errors
    return path, load_trace(path)


def _show_json(path: Path) -> dict[tuple[str, str, int], dict[str, object]]:
    out = io.StringIO()
    with redirect_stdout(out):
        assert irtrace_main(["show", str(path), "--json"]) == 0
    document = json.loads(out.getvalue())
    return {
        (run["kernel"], run["target"], row["index"]): row for run in document["runs"] for row in run["passes"]
    }


def _oracle(before: str, after: str) -> tuple[int, int]:
    """Lines added and removed by difflib's matcher on the normalized texts."""
    old = normalize_ir(before, NormalizeRules()).splitlines()
    new = normalize_ir(after, NormalizeRules()).splitlines()
    matcher = difflib.SequenceMatcher(None, old, new, autojunk=False)
    equal = sum(block.size for block in matcher.get_matching_blocks())
    return (len(new) - equal, len(old) - equal)


def test_show_passdiff_and_passviz_count_every_pass_alike(examples: tuple[Path, Trace]) -> None:
    path, trace = examples
    shown = _show_json(path)
    checked = new_stages = 0
    assert {run.target for run in trace.runs} == set(TARGETS)
    for run in trace.runs:
        browser = line_counts(trace, run)
        for record, label in zip(run.passes, run.occurrence_names(), strict=True):
            row = shown[(run.kernel, run.target, record.index)]
            item = pass_diff(trace, run, label, label)
            document = report_document(DiffReport(MODE_PASS, NormalizeRules(), pass_diffs=(item,)))
            passdiff_row = document["pass_diffs"][0]
            where = f"{run.kernel} on {run.target}, {label}"
            if record.ir_after is None:  # a failed pass: no output to count
                continue
            before, after = trace.text(record.ir_before), trace.text(record.ir_after)
            crosses = (TVMSCRIPT_HEADER in before) != (TVMSCRIPT_HEADER in after)
            if crosses:
                new_stages += 1
                assert row["new_stage"] is True and row["lines_added"] is None, where
                assert passdiff_row["new_stage"] is True and passdiff_row["added"] is None, where
                assert browser[record.index] is None, where
                continue
            counts = (row["lines_added"], row["lines_removed"])
            assert row["new_stage"] is False and passdiff_row["new_stage"] is False, where
            assert counts == (passdiff_row["added"], passdiff_row["removed"]) == browser[record.index], where
            if record.changed:
                assert counts == _oracle(before, after), where
                assert counts[0] - counts[1] == len(after.splitlines()) - len(before.splitlines()), where
            else:
                assert counts == (0, 0), where
            checked += 1
    # every run that reached codegen has one new stage; the rest are hundreds of real passes
    assert new_stages == sum(
        any(p.phase == "codegen" and p.depth == 0 for p in run.passes) for run in trace.runs
    )
    assert new_stages >= 15 and checked > 1000


def test_codegen_is_a_new_stage_in_every_output(
    examples: tuple[Path, Trace], capsys: pytest.CaptureFixture[str]
) -> None:
    path, trace = examples
    run = trace.find_run("matmul", "cuda:sm_90")
    codegen = next(p for p in run.passes if p.phase == "codegen" and p.depth == 0)
    label = dict(zip((p.index for p in run.passes), run.occurrence_names(), strict=True))[codegen.index]
    common = [str(path), "-k", "matmul", "-t", "cuda:sm_90", "-p", label]
    assert passdiff_main(["pass", *common, "-f", "unified"]) == 1
    unified = capsys.readouterr().out
    assert unified.startswith("#") and "new stage" in unified and "+++" not in unified
    assert passdiff_main(["pass", *common]) == 1
    terminal = capsys.readouterr().out
    assert "new stage" in terminal and "__global__" not in terminal  # the CUDA source is not diffed
    assert irtrace_main(["show", str(path), "-k", "matmul", "-t", "cuda:sm_90"]) == 0
    row = next(
        line
        for line in capsys.readouterr().out.splitlines()
        if line.split()[:2] == [str(codegen.index), "codegen"]
    )
    assert "new stage" in row and "+" not in row
