"""The `passdiff` command on real traces: every format, exit codes, one-line errors, patch."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from irtrace.errors import ExitCode
from irtrace.trace import Trace
from passdiff import DiffOutcome, NormalizeRules, diff_pass
from passdiff.cli import main
from passdiff.render import terminal_lines

SM90 = "cuda:sm_90"
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


def test_unified_pass_diff_is_accepted_by_patch(
    capsys: pytest.CaptureFixture[str], gemm_trace: Trace, gemm_path: Path, tmp_path: Path
) -> None:
    run = gemm_trace.find_run("matmul", SM90)
    record = run.find_pass("tl.LowerTileOp")
    before = tmp_path / "before.py"
    before.write_text(gemm_trace.ir_before(record))
    code, out, _ = run_cli(
        capsys, "pass", gemm_path, "-t", SM90, "-p", "tl.LowerTileOp", "--format", "unified", "--raw"
    )
    assert code == DiffOutcome.DIFFERENT
    assert out.startswith("--- a/matmul/cuda:sm_90/before-tl.LowerTileOp#1\n")
    subprocess.run(["patch", "-s", str(before)], input=out, text=True, check=True)
    assert before.read_text() == gemm_trace.ir_after(record)


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
    labels_a, labels_b = run_a.occurrence_names(), run_b.occurrence_names()
    outputs_b = dict(zip(labels_b, (gemm_no_ws_trace.ir_after(p) for p in run_b.passes), strict=True))
    expected = next(
        label
        for label, p in zip(labels_a, run_a.passes, strict=True)
        if label in outputs_b and gemm_trace.ir_after(p) != outputs_b[label]
    )
    first = both["first_difference"]
    assert first["label"] == expected and first["pass"] == expected.split("#")[0]
    assert first["unified"].startswith(f"--- a/matmul/cuda:sm_90/{expected}")
    assert first["added"] > 0 or first["removed"] > 0
    assert set(both["removed_passes"]) == set(labels_a) - set(labels_b)
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
    assert code == ExitCode.NOT_FOUND and "tl.LayoutInference" in err and err.count("\n") == 1

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
