"""passdiff's wording (issue 24): which run is a and which is b, passes of one target's pipeline
named as such (not "removed"), and a misspelt pass name answered with "did you mean"."""

from __future__ import annotations

from pathlib import Path

import pytest

from irtrace.base.errors import ExitCode
from irtrace.cli import main as irtrace_main
from irtrace.trace.model import Trace
from passdiff.cli import main

SM90, GFX942 = "cuda:sm_90", "hip:gfx942"


def run_cli(capsys: pytest.CaptureFixture[str], *argv: object) -> tuple[int, str, str]:
    code = main([str(arg) for arg in argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_targets_names_each_targets_own_passes_and_which_is_a(
    capsys: pytest.CaptureFixture[str], gemm_trace: Trace, gemm_path: Path
) -> None:
    cuda, hip = gemm_trace.find_run(None, SM90), gemm_trace.find_run(None, GFX942)
    only_cuda = {p.name for p in cuda.passes} - {p.name for p in hip.passes}
    only_hip = {p.name for p in hip.passes} - {p.name for p in cuda.passes}
    assert only_cuda  # the oracle: pass names the other pipeline never runs
    code, out, _ = run_cli(capsys, "targets", gemm_path, SM90, GFX942)
    assert code == 1
    assert f"a: {SM90}   b: {GFX942}" in out
    assert "removed passes" not in out and "added passes" not in out
    line_a = next(line for line in out.splitlines() if f"passes only on {SM90}:" in line)
    assert all(name in line_a for name in only_cuda)
    if only_hip:
        line_b = next(line for line in out.splitlines() if f"passes only on {GFX942}:" in line)
        assert all(name in line_b for name in only_hip)


def test_runs_says_which_trace_is_a_and_b(
    capsys: pytest.CaptureFixture[str], gemm_path: Path, no_ws_path: Path, tmp_path: Path
) -> None:
    code, out, _ = run_cli(capsys, "runs", gemm_path, no_ws_path, "-t", SM90)
    assert code == 1 and f"a: {gemm_path}   b: {no_ws_path}" in out
    assert "removed passes (only in a)" in out  # the old trace ran it, the new one does not
    page = tmp_path / "runs.html"
    run_cli(capsys, "runs", gemm_path, no_ws_path, "-t", SM90, "-f", "html", "-o", page)
    assert f"a: {gemm_path}   b: {no_ws_path}" in page.read_text()


@pytest.mark.parametrize("typo", ["tl.LayoutInferense", "LayoutInfrence", "tl.layoutinference"])
def test_a_misspelt_pass_gets_did_you_mean_not_every_name(
    capsys: pytest.CaptureFixture[str], gemm_trace: Trace, gemm_path: Path, typo: str
) -> None:
    run = gemm_trace.find_run(None, SM90)
    assert "tl.LayoutInference" in {p.name for p in run.passes} and typo not in {p.name for p in run.passes}
    code, _, err = run_cli(capsys, "pass", gemm_path, "-t", SM90, "-p", typo)
    assert code == ExitCode.NOT_FOUND and err.count("\n") == 1
    assert "did you mean tl.LayoutInference" in err
    listed = sum(p in err for p in {p.name for p in run.passes})
    assert listed <= 3, err  # not the run's whole list of passes
    assert irtrace_main(["ir", str(gemm_path), "-t", SM90, "-p", typo]) == ExitCode.NOT_FOUND
    assert "did you mean tl.LayoutInference" in capsys.readouterr().err


def test_nothing_close_points_to_the_list_and_too_high_a_number_says_how_many(
    capsys: pytest.CaptureFixture[str], gemm_trace: Trace, gemm_path: Path
) -> None:
    run = gemm_trace.find_run(None, SM90)
    code, _, err = run_cli(capsys, "pass", gemm_path, "-t", SM90, "-p", "Quux")
    assert code == ExitCode.NOT_FOUND and f"irtrace show TRACE -k {run.kernel} -t {SM90}" in err
    simplify = sum(p.name == "tl.Simplify" for p in run.passes)
    code, _, err = run_cli(capsys, "pass", gemm_path, "-t", SM90, "-p", f"tl.Simplify#{simplify + 1}")
    assert code == ExitCode.NOT_FOUND and f"ran {simplify} time(s)" in err and f"#{simplify}" in err
