"""``irtrace bisect``: the pass options that change a kernel, and the release that does.

Oracles: plain ``tilelang.lower`` with and without each option (the sources), and a plain TVM
instrument keeping ``str(mod)`` after every pass (where the two lowerings' IR first parts).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from irtrace.base.errors import ExitCode
from irtrace.cli.main import main
from irtrace.trace.model import text_sha256

from ..conftest import EXAMPLES, ROOT, SMALL_GEMM

OPTIONS = ("tl.disable_warp_specialized", "tl.disable_tma_lower")


def oracle_lowering(configs: dict[str, Any]) -> tuple[str, list[tuple[str, str]]]:
    """The GEMM's source for sm_90 and ``(name#N, str(mod))`` after each pass, in pipeline order."""
    import tilelang
    import tvm
    from tilelang.backend.target import determine_target

    sys.path.insert(0, str(EXAMPLES))
    try:
        from gemm import matmul
    finally:
        sys.path.remove(str(EXAMPLES))
    seen: Counter[str] = Counter()
    after: list[tuple[str, str]] = []

    @tvm.instrument.pass_instrument
    class KeepText:
        def run_after_pass(self, mod: Any, info: Any) -> None:
            seen[info.name] += 1
            after.append((f"{info.name}#{seen[info.name]}", str(mod)))

    target = determine_target({"kind": "cuda", "arch": "sm_90"}, return_object=True)
    with tvm.transform.PassContext(opt_level=3, config=configs, instruments=[KeepText()]), target:
        source = tilelang.lower(matmul(256, 256, 256), target=target).kernel_source
    return str(source), after


def first_parting(a: list[tuple[str, str]], b: list[tuple[str, str]]) -> tuple[str, list[str]]:
    """The first pass both ran whose IR after it differs, and the passes only ``a`` ran that
    changed its IR since the last pass both ran with equal IR (one of them is then the cause)."""
    texts_b = dict(b)
    only_a: list[str] = []
    previous = ""
    for label, text in a:
        if label not in texts_b:
            if text != previous:
                only_a.append(label)
        elif texts_b[label] != text:
            return label, only_a
        else:
            only_a = []
        previous = text
    raise AssertionError("the two lowerings never part")


def test_bisect_configs_finds_the_warp_specialization_switch(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["bisect", "configs", SMALL_GEMM, "-t", "cuda:sm_90", "--json"]
    assert main([*argv, *(word for option in OPTIONS for word in ("--option", option))]) == ExitCode.OK
    document = json.loads(capsys.readouterr().out)
    assert document["changing"] == ["tl.disable_warp_specialized"]
    rows = {row["option"]: row for row in document["options"]}

    base_source, base_passes = oracle_lowering({})
    no_ws_source, no_ws_passes = oracle_lowering({"tl.disable_warp_specialized": True})
    assert base_source != no_ws_source
    assert document["base"]["source_sha256"] == text_sha256(base_source)
    ws = rows["tl.disable_warp_specialized"]
    assert (ws["value"], ws["change"]) == (True, "source")
    assert ws["source_sha256"] == text_sha256(no_ws_source)
    shared, only_base = first_parting(base_passes, no_ws_passes)
    assert ws["first_pass"] in [*only_base, shared]
    assert "WarpSpecialized" in ws["first_pass"]
    tma = rows["tl.disable_tma_lower"]
    assert tma["change"] is None and tma["source_sha256"] == document["base"]["source_sha256"]


def test_bisect_configs_text_and_errors(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["bisect", "configs", SMALL_GEMM, "-t", "cuda:sm_90"]
    assert main([*argv, "--option", "tl.no_such_option"]) == ExitCode.USAGE
    assert "not an on/off pass option" in capsys.readouterr().err
    missing = ["bisect", "configs", "no_such_file.py::k", "-t", "cuda:sm_90", "--option", OPTIONS[0]]
    assert main(missing) == ExitCode.INPUT
    assert main(["bisect", "versions", SMALL_GEMM, "-t", "cuda:sm_90", "--python", sys.executable]) == (
        ExitCode.USAGE
    )
    assert main(
        ["bisect", "versions", SMALL_GEMM, "-t", "cuda:sm_90", "--python", "nope", "--python", "x"]
    ) == (ExitCode.INPUT)


def version_envs() -> list[str]:
    """The per-release environments ``make test-versions`` makes (out/versions/tilelang-*)."""
    return sorted(str(path) for path in (ROOT / "out" / "versions").glob("tilelang-*/bin/python"))


@pytest.mark.sweep
def test_bisect_versions_reports_the_release_that_changes_the_source(tmp_path: Path) -> None:
    envs = version_envs()
    if len(envs) < 1:
        pytest.skip("no out/versions environments: run make test-versions once")
    pythons = [envs[-1], sys.executable]  # the newest made release, and this one
    command = [sys.executable, "-m", "irtrace.cli", "bisect", "versions", SMALL_GEMM, "-t", "cuda:sm_90"]
    command += [word for python in pythons for word in ("--python", python)]
    done = subprocess.run(
        [*command, "--json", "-o", str(tmp_path)], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    assert not document["not_recorded"], document["not_recorded"]
    versions = [env["tilelang_version"] for env in document["environments"]]
    assert versions == sorted(versions) and len(set(versions)) == 2
    # the oracle: each environment's own trace, read back
    from irtrace.trace.reader import load_trace

    shas = {load_trace(path).runs[0].source_sha256 for path in tmp_path.glob("env-*.jsonl")}
    if len(shas) == 1:
        assert document["first_change"] is None
    else:
        assert document["first_change"]["to"] == versions[1]
        assert document["first_change"]["source_diff"]
