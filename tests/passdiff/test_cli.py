"""The `passdiff` command on real traces: every format, exit codes, one-line errors, patch."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from irtrace.base.errors import ExitCode
from irtrace.diff import DiffOutcome, NormalizeRules, compare_runs, diff_pass
from irtrace.trace.model import Trace
from irtrace.trace.summary import is_new_stage
from passdiff.cli import main
from passdiff.render import terminal_lines

SM90 = "cuda:sm_90"
HUNK_OLD_RANGE = re.compile(r"^@@ -(\d+)(?:,(\d+))? ", re.M)
GFX = "hip:gfx942"


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_help_documents_exit_codes(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["runs", "--help"])
    out = capsys.readouterr().out
    for code in (0, 1, 2, 3, 6, 8):
        assert f"\n  {code:>3}  " in out
    assert "diff(1)" in out


def test_unified_pass_diff_turns_what_irtrace_ir_writes_before_into_after(
    capsys: pytest.CaptureFixture[str], gemm_trace: Trace, gemm_path: Path, tmp_path: Path
) -> None:
    """The documented round trip, for every pass that changed the IR, hunks on the last line included."""
    from irtrace.cli.main import main as irtrace_main

    run = gemm_trace.find_run("matmul", SM90)
    labels = dict(zip((p.index for p in run.passes), run.occurrence_names(), strict=True))
    touching_last = 0
    for record in run.passes:
        if not record.changed or record.failed or is_new_stage(record):  # codegen: not diffed
            continue
        label = labels[record.index]
        files = {}
        for which, extra in (("before", ["--before"]), ("after", [])):
            assert irtrace_main(["ir", str(gemm_path), "-t", SM90, "-p", label, *extra]) == 0
            files[which] = capsys.readouterr().out
        before = tmp_path / "before.py"
        before.write_text(files["before"])
        code, out, _ = run_cli(capsys, "pass", gemm_path, "-t", SM90, "-p", label, "-f", "unified", "--raw")
        assert code == DiffOutcome.DIFFERENT, label
        assert out.startswith(f"--- a/matmul/cuda:sm_90/before-{label}\n")
        last_line = len(files["before"].splitlines())
        touching_last += any(
            int(start) + int(length or 1) - 1 == last_line for start, length in HUNK_OLD_RANGE.findall(out)
        )
        subprocess.run(["patch", "-s", str(before)], input=out, text=True, check=True)
        assert before.read_text() == files["after"], label
    assert touching_last >= 3


def test_pass_that_changes_nothing_exits_zero(
    capsys: pytest.CaptureFixture[str], gemm_trace: Trace, gemm_path: Path
) -> None:
    run = gemm_trace.find_run("matmul", SM90)
    unchanged = next(p for p in run.passes if not p.changed and p.depth == 0)
    label = run.occurrence_names()[run.passes.index(unchanged)]
    code, out, _ = run_cli(capsys, "pass", gemm_path, "-t", SM90, "-p", label, "-f", "unified")
    assert (code, out) == (DiffOutcome.SAME, "")


def test_json_summary_of_run_to_run(
    capsys: pytest.CaptureFixture[str],
    gemm_trace: Trace,
    gemm_no_ws_trace: Trace,
    gemm_path: Path,
    no_ws_path: Path,
) -> None:
    code, out, _ = run_cli(capsys, "runs", gemm_path, no_ws_path, "--format", "json")
    assert code == DiffOutcome.DIFFERENT
    document = json.loads(out)
    assert (document["format"], document["schema"], document["mode"]) == ("passdiff", 1, "runs")
    assert document["rules"] == NormalizeRules().enabled()
    assert document["different"] is True
    by_target = {c["target_a"] or c["target_b"]: c for c in document["comparisons"]}
    assert by_target[GFX]["presence"] == "only_a"
    both = by_target[SM90]
    run_a, run_b = gemm_trace.find_run("matmul", SM90), gemm_no_ws_trace.find_run("matmul", SM90)
    first = both["first_difference"]
    library = compare_runs(gemm_trace, run_a, gemm_no_ws_trace, run_b)
    assert library.first_difference is not None and library.diff is not None
    assert first["label"] == library.first_difference.label == "tl.ProducerConsumerWarpSpecialized#1"
    assert (first["status"], first["label_a"], first["label_b"]) == ("only_a", first["label"], None)
    assert first["compared_with"] == "tl.VerifyBufferInit#1"
    assert first["unified"].startswith(f"--- a/matmul/cuda:sm_90/{first['label']}")
    assert (first["added"], first["removed"]) == (library.diff.added, library.diff.removed)
    assert set(both["removed_passes"]) == set(library.removed_passes)
    assert "tl.ProducerConsumerWarpSpecialized#1" in both["removed_passes"]
    assert both["moved_passes"] == [] and both["unreached_passes"] == []
    assert all(label.split("#")[0] in {p.name for p in run_b.passes} for label in both["added_passes"])
    assert both["source"]["equal"] is False and both["passes_a"] == len(run_a.passes)


def test_same_trace_is_no_difference(capsys: pytest.CaptureFixture[str], gemm_path: Path) -> None:
    code, out, _ = run_cli(capsys, "runs", gemm_path, gemm_path, "-f", "json")
    assert code == DiffOutcome.SAME
    assert json.loads(out)["different"] is False


def test_rich_format_is_plain_when_not_a_terminal(
    capsys: pytest.CaptureFixture[str], gemm_path: Path
) -> None:
    code, out, _ = run_cli(capsys, "targets", gemm_path, SM90, GFX)
    assert code == DiffOutcome.DIFFERENT
    assert "\x1b[" not in out
    assert "normalization: mask_targets, mask_addresses, mask_metadata" in out
    assert "matmul on cuda:sm_90 vs hip:gfx942" in out
    assert "first differing pass: " in out and "kernel source" in out
    code, out, _ = run_cli(capsys, "targets", gemm_path, SM90, GFX, "--raw", "--rename-vars")
    assert "normalization: rename_vars" in out


def test_terminal_view_highlights_changed_words(gemm_trace: Trace) -> None:
    from rich.console import Console

    run = gemm_trace.find_run("matmul", SM90)
    diff = diff_pass(gemm_trace, run, "tl.MaterializeKernelLaunch")
    console = Console(record=True, force_terminal=True, color_system="truecolor", width=300)
    for line in terminal_lines(diff):
        console.print(line)
    exported = console.export_text(styles=True)
    assert "\x1b[" in exported
    highlighted = [
        line.plain[span.start : span.end]
        for line in terminal_lines(diff)
        for span in line.spans
        if "bold" in str(span.style)
    ]
    assert highlighted, "no word-level highlight"
    # A highlight covers a changed fragment, never a whole long line.
    assert all(len(fragment) < 60 for fragment in highlighted)


def test_html_is_one_self_contained_file(
    capsys: pytest.CaptureFixture[str], gemm_path: Path, tmp_path: Path
) -> None:
    output = tmp_path / "diff.html"
    code, _, err = run_cli(capsys, "targets", gemm_path, SM90, GFX, "-f", "html", "-o", output)
    assert code == DiffOutcome.DIFFERENT and str(output) in err
    page = output.read_text()
    assert page.startswith("<!DOCTYPE html>") and "<style>" in page
    assert "<script" not in page and "<link" not in page and "http" not in page.split("<body>")[1]
    assert 'class="diff"' in page and "<ins>" in page and "<del>" in page
    assert "normalization: mask_targets" in page


def test_unknown_kernel_target_and_pass_list_what_the_trace_holds(
    capsys: pytest.CaptureFixture[str], gemm_path: Path
) -> None:
    code, _, err = run_cli(capsys, "pass", gemm_path, "-k", "nope", "-t", SM90, "-p", "tl.LayoutInference")
    assert code == ExitCode.NOT_FOUND
    assert err.count("\n") == 1 and "matmul on cuda:sm_90; matmul on hip:gfx942" in err

    code, _, err = run_cli(capsys, "targets", gemm_path, SM90, "metal")
    assert code == ExitCode.NOT_FOUND and "matmul on hip:gfx942" in err

    code, _, err = run_cli(capsys, "pass", gemm_path, "-t", SM90, "-p", "tl.NoSuchPass")
    assert code == ExitCode.NOT_FOUND and "irtrace show" in err and err.count("\n") == 1

    code, _, err = run_cli(
        capsys, "pass", gemm_path, "-t", SM90, "-p", "tl.LowerTileOp", "--to", "tl.Simplify"
    )
    assert code == ExitCode.USAGE and "runs before" in err


def test_newer_schema_and_missing_trace(
    capsys: pytest.CaptureFixture[str], gemm_path: Path, tmp_path: Path
) -> None:
    lines = gemm_path.read_text().splitlines(keepends=True)
    header = json.loads(lines[0])
    header["schema"] = 99
    newer = tmp_path / "newer.jsonl"
    newer.write_text(json.dumps(header) + "\n" + "".join(lines[1:]))
    code, _, err = run_cli(capsys, "runs", gemm_path, newer)
    assert code == ExitCode.TRACE_FORMAT and "schema 99" in err and err.count("\n") == 1

    code, _, err = run_cli(capsys, "runs", gemm_path, tmp_path / "missing.jsonl")
    assert code == ExitCode.INPUT and "does not exist" in err


def test_runs_names_the_removed_pass_and_no_reordered_simplify(
    capsys: pytest.CaptureFixture[str], gemm_path: Path, no_ws_path: Path
) -> None:
    code, out, _ = run_cli(capsys, "runs", gemm_path, no_ws_path, "-t", SM90)
    assert code == DiffOutcome.DIFFERENT
    assert "first differing pass: tl.ProducerConsumerWarpSpecialized#1 (only run a ran it" in out
    assert "tl.LowerBlackwell2SM" not in out.split("IR after")[0]
    assert "another point" not in out and "reordered" not in out


def test_failed_pass_says_so_shows_its_error_and_exits_5(
    capsys: pytest.CaptureFixture[str], gemm_sm80_ascend_trace: Trace
) -> None:
    assert gemm_sm80_ascend_trace.path is not None
    run = gemm_sm80_ascend_trace.find_run("matmul", "ascend")
    failed = next(p for p in run.passes if p.failed)
    assert failed.error
    code, out, _ = run_cli(capsys, "pass", gemm_sm80_ascend_trace.path, "-t", "ascend", "-p", failed.name)
    assert code == ExitCode.LOWERING == 5
    assert f"{failed.name}#1 failed" in out and failed.error.splitlines()[0] in out
    assert "did not change" not in out
    code, out, _ = run_cli(
        capsys, "pass", gemm_sm80_ascend_trace.path, "-t", "ascend", "-p", failed.name, "-f", "json"
    )
    document = json.loads(out)["pass_diffs"][0]
    assert code == 5 and document["failed_pass"] == f"{failed.name}#1" and document["error"] == failed.error
    # A span ending in the failed pass says so too, and still shows what came before.
    first = run.passes[3].name
    code, out, _ = run_cli(
        capsys, "pass", gemm_sm80_ascend_trace.path, "-t", "ascend", "-p", first, "--to", failed.name
    )
    assert code == 5 and "failed" in out and "@@" not in out  # rich view: no unified hunks
    with pytest.raises(SystemExit):
        main(["pass", "--help"])
    assert "\n    5  passdiff pass: the pass" in capsys.readouterr().out


def test_a_short_name_of_two_namespaces_is_an_error_listing_both(
    capsys: pytest.CaptureFixture[str], gemm_trace: Trace, gemm_path: Path
) -> None:
    run = gemm_trace.find_run("matmul", SM90)
    assert {"tl.Simplify", "tirx.Simplify"} <= {p.name for p in run.passes}
    code, _, err = run_cli(capsys, "pass", gemm_path, "-t", SM90, "-p", "Simplify#2")
    assert code == ExitCode.NOT_FOUND and err.count("\n") == 1
    assert "tl.Simplify" in err and "tirx.Simplify" in err and "ambiguous" in err
    # A short name of one namespace still works.
    code, _, _ = run_cli(capsys, "pass", gemm_path, "-t", SM90, "-p", "LayoutInference", "-f", "json")
    assert code == DiffOutcome.DIFFERENT


def test_html_side_by_side_gives_the_width_to_the_code_columns(
    capsys: pytest.CaptureFixture[str], gemm_path: Path, tmp_path: Path
) -> None:
    output = tmp_path / "pass.html"
    code, _, _ = run_cli(
        capsys, "pass", gemm_path, "-t", SM90, "-p", "tl.LayoutInference", "-f", "html", "-o", output
    )
    assert code == DiffOutcome.DIFFERENT
    page = output.read_text()
    # A fixed table layout takes its column widths from the first row, which may be a gap row
    # spanning all four columns; the widths are set by <col> elements instead.
    table = page[page.index('<table class="diff">') :]
    assert table.index("<colgroup>") < table.index("<tr")
    assert table.count('<col class="no">') == 2 and table.count('<col class="code">') == 2
    assert "col.no { width: 4.5em; }" in page


_COMPILING_SCRIPT = """
import sys
sys.path.insert(0, sys.argv[1])
import tilelang
from misbehaving import copy
tilelang.compile(copy(8192, 128), target={"kind": "cuda", "arch": "sm_90a"})
"""


@pytest.mark.sweep  # a script through nvcc, then two recordings: about 30 s, with the sweeps
def test_targets_on_a_captured_run_leaves_its_host_wrapper_out_of_the_pipelines_passes(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """``irtrace run -t hip:gfx942`` on a program that compiles a kernel: the captured CUDA run
    also compiled the host wrapper, the HIP run is lowered to its device kernel only. The passes
    only on CUDA must be the pipeline's, the same as between two runs ``irtrace record`` lowered
    (the oracle, by another route); the host wrapper's passes are named as such."""
    from ..conftest import DATA

    script = tmp_path / "compile_copy.py"
    script.write_text(_COMPILING_SCRIPT)
    irtrace = [sys.executable, "-m", "irtrace.cli"]
    ran = subprocess.run(
        [*irtrace, "run", "-t", GFX, "-o", "run.jsonl", "-q", "--", "python", str(script), str(DATA)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert ran.returncode == 0, ran.stderr
    spec = f"{DATA / 'misbehaving.py'}::copy(8192, 128)"
    recorded = subprocess.run(
        [*irtrace, "record", spec, "-t", "cuda:sm_90a", "-t", GFX, "-o", "record.jsonl", "-q"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert recorded.returncode == 0, recorded.stderr

    def only_on_cuda(trace: str) -> tuple[str, str]:
        code, out, _ = run_cli(capsys, "targets", tmp_path / trace, "cuda:sm_90a", GFX)
        assert code in (0, 1), out
        lines = [line.strip() for line in out.splitlines()]
        return next((line for line in lines if line.startswith("passes only on cuda")), ""), out

    captured, captured_out = only_on_cuda("run.jsonl")
    expected, _ = only_on_cuda("record.jsonl")
    assert captured == expected
    assert "host codegen" not in captured
    assert "also compiled its program's host wrapper" in captured_out and "host codegen" in captured_out
