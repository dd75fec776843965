"""``irtrace check`` gates on layout changes: the same GEMM on sm_90 recorded with and without
``tl.disable_wgmma`` keeps its kernel name, target and passes, but layout inference gives its
accumulator another fragment. TileLang's live fragments say where the two differ; the check must
name that buffer, exit 1 under ``[fail] layout = true`` and 0 under the default policy."""

from __future__ import annotations

import json
import subprocess
import sys
import xml.etree.ElementTree as ElementTree
from dataclasses import dataclass
from pathlib import Path

import pytest

from ..conftest import EXAMPLES, ROOT, SMALL_GEMM, record_to_file
from ..passdiff.layout_oracle import live_fragment

TARGET = "cuda:sm_90"
CONFIG = "tl.disable_wgmma"


@dataclass
class Pair:
    baseline: Path
    changed: Path


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Pair:
    folder = tmp_path_factory.mktemp("check_layouts")
    paths = Pair(folder / "baseline.jsonl", folder / "changed.jsonl")
    record_to_file(paths.baseline, [SMALL_GEMM], [TARGET])
    record_to_file(paths.changed, [SMALL_GEMM], [TARGET], **{CONFIG: True})
    return paths


def _check(pair: Pair, cwd: Path, *extra: str | Path) -> subprocess.CompletedProcess[str]:
    import os

    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.run(
        [sys.executable, "-m", "irtrace.cli", "check", str(pair.changed), "--baseline", str(pair.baseline),
         *map(str, extra)],
        capture_output=True, text=True, cwd=cwd, env=env,
    )  # fmt: skip


def test_layout_gate_fails_on_a_changed_fragment_and_default_reports(pair: Pair, tmp_path: Path) -> None:
    plain = live_fragment(EXAMPLES / "gemm.py", "matmul", (256, 256, 256), TARGET, "C_local")
    no_wgmma = live_fragment(
        EXAMPLES / "gemm.py", "matmul", (256, 256, 256), TARGET, "C_local", {CONFIG: True}
    )

    policy = tmp_path / "policy.toml"
    policy.write_text("[fail]\nlayout = true\n", encoding="utf-8")
    report, markdown, junit = tmp_path / "check.json", tmp_path / "summary.md", tmp_path / "junit.xml"
    done = _check(
        pair, tmp_path, "--policy", policy, "--json", report, "--markdown", markdown, "--junit", junit
    )
    assert done.returncode == 1, done.stdout + done.stderr

    run = json.loads(report.read_text())["runs"][0]
    assert run["gated"] and [f["kind"] for f in run["findings"] if f["gated"]] == ["layout"]
    layouts = {layout["buffer"]: layout for layout in run["layouts"]}
    assert set(layouts) == {"C_local"}, "only the accumulator's layout changes"
    c_local = layouts["C_local"]
    element = tuple(c_local["mapping"]["element"])
    # TileLang's own evaluation differs at the element reported, and agrees on the placements.
    assert plain.placement(element) != no_wgmma.placement(element)
    assert c_local["mapping"]["a"] == [list(plain.placement(element))]
    assert c_local["mapping"]["b"] == [list(no_wgmma.placement(element))]
    same_summary = (plain.threads, plain.per_thread) == (no_wgmma.threads, no_wgmma.per_thread)
    assert same_summary == (not any(c["property"] == "threads x elems" for c in c_local["changes"]))

    assert "x layout: C_local:" in done.stdout and "FAIL matmul on cuda:sm_90" in done.stdout
    table = markdown.read_text()
    assert "| layouts |" in table and "changed: `C_local`" in table
    case = ElementTree.parse(junit).getroot().find(".//testcase")
    assert case is not None
    failure = case.find("failure")
    assert failure is not None and failure.get("type") == "layout" and "C_local" in (failure.text or "")

    # The same change under the default policy is reported, not gated.
    default = _check(pair, tmp_path)
    assert default.returncode == 0, default.stdout + default.stderr
    assert "- layout: C_local:" in default.stdout and "FAIL" not in default.stdout


def test_layout_gate_is_a_known_policy_key(tmp_path: Path, pair: Pair) -> None:
    """``layout = "yes"`` is a bad value (exit 2), never a silent default."""
    policy = tmp_path / "policy.toml"
    policy.write_text('[fail]\nlayout = "yes"\n', encoding="utf-8")
    done = _check(pair, tmp_path, "--policy", policy)
    assert done.returncode == 2 and "layout" in done.stderr and "Traceback" not in done.stderr
