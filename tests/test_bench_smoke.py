"""Every bench script runs in CI: `make bench-smoke` lists each one, each takes ``--smoke`` and ends
with its RESULT line, and CI runs the target; a new bench without a smoke mode fails here."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from tests.conftest import ROOT

BENCH = ROOT / "bench"


def bench_smoke_scripts() -> list[str]:
    """The scripts the Makefile's ``BENCH_SMOKE`` lists (paths relative to the repository)."""
    makefile = (ROOT / "Makefile").read_text()
    listed = re.search(r"^BENCH_SMOKE := ((?:.*\\\n)*.*)$", makefile, re.MULTILINE)
    assert listed, "the Makefile has no BENCH_SMOKE list"
    recipe = re.search(r"^bench-smoke:.*\n((?:\t.*\n)+)", makefile, re.MULTILINE)
    assert recipe and "$(BENCH_SMOKE)" in recipe[1] and "--smoke" in recipe[1], "bench-smoke runs no --smoke"
    return listed[1].replace("\\\n", " ").split()


def takes_smoke_flag(script: Path) -> bool:
    """Whether the script's argument parser has a ``--smoke`` option (read, not run)."""
    for node in ast.walk(ast.parse(script.read_text(), str(script))):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "add_argument"
            and any(isinstance(arg, ast.Constant) and arg.value == "--smoke" for arg in node.args)
        ):
            return True
    return False


def test_make_bench_smoke_lists_every_bench_script() -> None:
    listed = bench_smoke_scripts()
    on_disk = sorted(f"bench/{script.name}" for script in BENCH.glob("*.py"))
    missing = [script for script in on_disk if script not in listed]
    assert not missing, f"add these to BENCH_SMOKE in the Makefile (with a --smoke mode): {missing}"
    assert len(listed) == len(set(listed)), "a script is listed twice"


@pytest.mark.parametrize("listed", bench_smoke_scripts())
def test_each_listed_bench_takes_smoke_and_prints_a_result_line(listed: str) -> None:
    script = ROOT / listed
    assert script.exists(), f"{listed} is listed for bench-smoke but is not in bench/"
    assert takes_smoke_flag(script), f"{listed} has no --smoke option"
    assert "RESULT " in script.read_text(), f"{listed} prints no RESULT line"


def test_ci_runs_bench_smoke() -> None:
    assert re.search(r"^for target in .*\bbench-smoke\b", (ROOT / ".ci" / "run").read_text(), re.MULTILINE)
    assert "run: make bench-smoke" in (ROOT / ".github" / "workflows" / "tests.yml").read_text()
