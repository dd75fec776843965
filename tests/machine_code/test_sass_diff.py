"""A SASS diff between two runs that differ in one pass config (``tl.disable_warp_specialized``):
passdiff shows it, and it is the difference of what nvcc makes of the two plain sources."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from irtrace.lowering.machine_code import find_cuda_tools
from irtrace.trace.reader import load_trace

from .conftest import (
    CASES,
    Recorded,
    finish_plain_lower,
    oracle_resources,
    ptxas_verbose,
    record_machine_code,
    start_plain_lower,
)

pytestmark = pytest.mark.slow

CONFIG = "tl.disable_warp_specialized"
_ADDRESS = re.compile(r"/\*[0-9a-f]{4,}\*/")


def instruction_lines(sass: str) -> list[str]:
    """The instruction lines of a disassembly, addresses dropped."""
    return [_ADDRESS.sub("", line).strip() for line in sass.splitlines() if _ADDRESS.search(line)]


def test_sass_diff_between_two_pass_configs(recorded: Recorded, tmp_path: Path) -> None:
    spec, target = CASES[0]
    oracle = start_plain_lower([(spec, target)], {CONFIG: True})
    other, _, _ = record_machine_code(tmp_path, [(spec, target)], "-c", f"{CONFIG}=true")
    plain_other = finish_plain_lower(oracle)[("matmul", target)]
    plain_base = recorded.plain[("matmul", target)]

    # the oracle: nvcc and the disassembler on both plain sources
    tools = find_cuda_tools()
    arch = json.loads(load_trace(other).runs[0].target_detail)["arch"]
    texts, resources = [], []
    for name, plain in (("base", plain_base), ("other", plain_other)):
        log, cubin = ptxas_verbose(str(plain["source"]), arch, tmp_path / name)
        resources.append(oracle_resources(log))
        sass = subprocess.run(
            tools.disassemble_command(cubin), capture_output=True, text=True, check=True
        ).stdout
        texts.append(sass)
    base_lines, other_lines = instruction_lines(texts[0]), instruction_lines(texts[1])
    assert base_lines != other_lines, "the config changes no instruction: pick another config"

    passdiff = Path(sys.executable).with_name("passdiff")
    done = subprocess.run(
        [str(passdiff), "runs", str(recorded.path), str(other), "-k", "matmul", "-t", target, "-f", "json"],
        capture_output=True,
        text=True,
        env={**os.environ, "NO_COLOR": "1"},
    )
    assert done.returncode == 1, done.stderr
    (comparison,) = json.loads(done.stdout)["comparisons"]
    sass_diff = comparison["machine"]["sass"]
    assert not sass_diff["equal"]
    # a line diff: added - removed is the change in length, and no fewer lines than the multisets differ
    whole_a, whole_b = texts[0].splitlines(), texts[1].splitlines()
    assert sass_diff["added"] - sass_diff["removed"] == len(whole_b) - len(whole_a)
    assert sass_diff["added"] >= sum((Counter(other_lines) - Counter(base_lines)).values())
    assert sass_diff["removed"] >= sum((Counter(base_lines) - Counter(other_lines)).values())
    # warp specialization's register reallocation is in the SASS of one run only
    assert any("SETMAXREG" in line for line in base_lines) != any("SETMAXREG" in line for line in other_lines)
    assert "-" in sass_diff["unified"] and "+" in sass_diff["unified"]

    # and the runs' resources are ptxas's for each source
    (run_other,) = load_trace(other).runs
    (run_base,) = recorded.trace.select("matmul", target)
    for run, expected in ((run_base, resources[0]), (run_other, resources[1])):
        assert {r.function: r.registers for r in run.resources} == {
            f: v["registers"] for f, v in expected.items()
        }
