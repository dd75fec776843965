"""``irtrace check`` and ``irtrace bless`` on real lowerings.

A baseline and a trace that differ by one pass config (``tl.disable_wgmma`` on sm_90: the same
passes, different IR) must be caught at the pass a plain synchronous TVM instrument sees first
differ, with exit code 1 under a policy that gates IR changes; an independent rerun must exit 0
under a policy that gates everything. The JUnit file is validated against the JUnit schema CI
systems read.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from msgspec.structs import replace

from irtrace.base.errors import UsageError
from irtrace.ci.check import check_traces
from irtrace.ci.policy import PASS_TIME, PERF_KINDS, TOTAL_TIME, Policy, load_policy
from irtrace.cli.main import main
from irtrace.trace.model import Trace
from irtrace.trace.reader import load_trace

from ..conftest import DATA, EXAMPLES, ROOT, SMALL_GEMM, record_to_file

RMSNORM = f"{EXAMPLES / 'rmsnorm.py'}::rms_norm()"
TARGET = "cuda:sm_90"
CONFIG = "tl.disable_wgmma"
"""Same pass list with and without it on sm_90; the GEMM's IR differs from tl.LowerTileOp on."""

GATE_EVERYTHING = """
[fail]
removed = true
added = true
newly_failing = true
failure_changed = true
pass_list = true
ir = true
source = true

[metrics]
ir_lines = 0.0
source_lines = 0.0
shared_bytes = 0.0
syncs = 0.0
barriers = 0.0
"""


@dataclass
class Traces:
    baseline: Path
    rerun: Path
    """The same kernels recorded again, independently."""
    changed: Path
    """The same kernels with ``CONFIG`` on."""


@pytest.fixture(scope="module")
def traces(tmp_path_factory: pytest.TempPathFactory) -> Traces:
    folder = tmp_path_factory.mktemp("check")
    paths = Traces(folder / "baseline.jsonl", folder / "rerun.jsonl", folder / "changed.jsonl")
    record_to_file(paths.baseline, [SMALL_GEMM, RMSNORM], [TARGET])
    record_to_file(paths.rerun, [SMALL_GEMM, RMSNORM], [TARGET])
    record_to_file(paths.changed, [SMALL_GEMM, RMSNORM], [TARGET], **{CONFIG: True})
    return paths


def irtrace(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``irtrace ARGS`` run in ``cwd``, in this process (``main``): these commands' answers are
    the point, not a process boundary (a Python start less for each)."""
    out, err = io.StringIO(), io.StringIO()
    before = Path.cwd()
    os.chdir(cwd)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main([str(arg) for arg in args])
            except SystemExit as exit:  # --help, as the process would have ended
                code = exit.code if isinstance(exit.code, int) else int(exit.code is not None)
    finally:
        os.chdir(before)
    return subprocess.CompletedProcess(["irtrace", *map(str, args)], code, out.getvalue(), err.getvalue())


def _policy(folder: Path, text: str) -> Path:
    path = folder / "policy.toml"
    path.write_text(text, encoding="utf-8")
    return path


@dataclass
class OraclePass:
    label: str
    """``name#N``, N counting the passes of that name in the order they started."""
    parent: str | None
    """The label of the pass it ran inside."""
    before: str
    after: str = ""


def _finish_order_oracle(configs: dict[str, Any]) -> list[OraclePass]:
    """Every pass of the small GEMM on sm_90 in the order passes finished, as a plain TVM
    instrument printing synchronously sees them."""
    import tilelang
    import tvm
    from tvm.ir.instrument import pass_instrument

    from irtrace.lowering.tvm_targets import make_tvm_target
    from irtrace.targets.backends import get_target

    from ..passdiff.oracle import load_kernel_module

    finished: list[OraclePass] = []
    running: list[OraclePass] = []
    counts: dict[str, int] = {}

    @pass_instrument
    class SynchronousPrint:
        def run_before_pass(self, mod: Any, info: Any) -> None:
            name = str(info.name)
            counts[name] = counts.get(name, 0) + 1
            parent = running[-1].label if running else None
            running.append(OraclePass(f"{name}#{counts[name]}", parent, str(mod)))

        def run_after_pass(self, mod: Any, info: Any) -> None:
            entry = running.pop()
            entry.after = str(mod)
            finished.append(entry)

    target = make_tvm_target(get_target(TARGET))
    with target:
        func = load_kernel_module(EXAMPLES / "gemm.py").matmul(256, 256, 256)
    with tvm.transform.PassContext(opt_level=3, config=configs, instruments=[SynchronousPrint()]), target:
        tilelang.lower(func, target=target)
    return finished


def test_one_pass_config_is_caught_at_the_first_changed_pass(traces: Traces, tmp_path: Path) -> None:
    plain = _finish_order_oracle({})
    changed = _finish_order_oracle({CONFIG: True})
    assert [p.label for p in plain] == [p.label for p in changed], "the config keeps the passes"
    first = next(a for a, b in zip(plain, changed, strict=True) if a.after != b.after)
    other = next(b for b in changed if b.label == first.label)
    expected = first.label

    policy = _policy(tmp_path, "[fail]\nir = true\n")
    report = tmp_path / "check.json"
    done = irtrace(
        "check",
        traces.changed,
        "--baseline",
        traces.baseline,
        "--policy",
        policy,
        "--json",
        report,
        cwd=tmp_path,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    document = json.loads(report.read_text())
    runs = {(run["kernel"], run["target"]): run for run in document["runs"]}
    gemm = runs[("matmul", TARGET)]
    assert gemm["outcome"] == "changed" and gemm["gated"]
    assert gemm["first_changed_pass"] == expected
    if first.before != other.before:  # the pass it ran inside had changed its input already
        assert gemm["first_change"] == f"input differs: changed inside {first.parent} before it ran"
    else:
        assert gemm["first_change"] == "output differs"
    assert gemm["passes_added"] == gemm["passes_removed"] == []
    assert any(f["kind"] == "ir" and f["gated"] for f in gemm["findings"])
    assert f"FAIL matmul on {TARGET}" in done.stdout and expected in done.stdout

    # The same change under the default policy is reported, not gated.
    default = irtrace("check", traces.changed, "--baseline", traces.baseline, cwd=tmp_path)
    assert default.returncode == 0, default.stderr
    assert expected in default.stdout and "FAIL" not in default.stdout


def test_kernel_source_change_matches_the_traces_sources(traces: Traces) -> None:
    baseline, changed = load_trace(traces.baseline), load_trace(traces.changed)
    report = check_traces(changed, baseline, Policy())
    for run in report.runs:
        old, new = baseline.find_run(run.kernel, run.target), changed.find_run(run.kernel, run.target)
        assert run.source_changed == (baseline.kernel_source(old) != changed.kernel_source(new))


def test_unchanged_rerun_exits_0(traces: Traces, tmp_path: Path) -> None:
    policy = _policy(tmp_path, GATE_EVERYTHING)
    markdown, junit = tmp_path / "summary.md", tmp_path / "junit.xml"
    done = irtrace(
        "check", traces.rerun, "--baseline", traces.baseline, "--policy", policy,
        "--markdown", markdown, "--junit", junit, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 kernel x target pair(s): 2 unchanged" in done.stdout
    assert "Every kernel lowers exactly as in the baseline" in markdown.read_text()
    _validate_junit(junit)


def test_removed_kernel_fails_by_default_and_bless_makes_it_the_baseline(
    traces: Traces, tmp_path: Path
) -> None:
    only_gemm = tmp_path / "only-gemm.jsonl"
    done = irtrace("bless", traces.rerun, "--baseline", only_gemm, "-k", "matmul", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert [run.kernel for run in load_trace(only_gemm).runs] == ["matmul"]

    junit, markdown = tmp_path / "junit.xml", tmp_path / "summary.md"
    done = irtrace(
        "check",
        only_gemm,
        "--baseline",
        traces.baseline,
        "--junit",
        junit,
        "--markdown",
        markdown,
        cwd=tmp_path,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"FAIL rms_norm on {TARGET}: removed" in done.stdout
    cases = _validate_junit(junit)
    assert cases[(f"irtrace.{TARGET}", "rms_norm")] == "failure"
    assert cases[(f"irtrace.{TARGET}", "matmul")] == "passed"
    assert "| ❌ | `rms_norm` |" in markdown.read_text()

    # Blessing the smaller trace makes it the baseline: checking it again is clean.
    blessed = tmp_path / "baseline.jsonl"
    blessed.write_bytes(traces.baseline.read_bytes())
    assert irtrace("bless", only_gemm, "--baseline", blessed, cwd=tmp_path).returncode == 0
    assert irtrace("check", only_gemm, "--baseline", blessed, cwd=tmp_path).returncode == 0


def test_bless_with_a_kernel_replaces_only_its_runs(traces: Traces, tmp_path: Path) -> None:
    blessed = tmp_path / "baseline.jsonl"
    blessed.write_bytes(traces.baseline.read_bytes())
    done = irtrace("bless", traces.changed, "--baseline", blessed, "-k", "matmul", cwd=tmp_path)
    assert done.returncode == 0 and "1 run(s) replaced, 0 added, 1 kept" in done.stdout, done.stderr
    result, baseline, changed = load_trace(blessed), load_trace(traces.baseline), load_trace(traces.changed)
    assert result.find_run("matmul", TARGET).source_sha256 == changed.find_run("matmul", TARGET).source_sha256
    assert result.find_run("rms_norm", TARGET).passes == baseline.find_run("rms_norm", TARGET).passes
    gate_ir = _policy(tmp_path, "[fail]\nir = true\n")
    assert (
        irtrace("check", traces.changed, "--baseline", blessed, "--policy", gate_ir, cwd=tmp_path).returncode
        == 0
    )


def _validate_junit(path: Path) -> dict[tuple[str, str], str]:
    """Validate against the JUnit schema; ``(classname, name) -> failure/skipped/passed``."""
    import xml.etree.ElementTree as ElementTree

    import xmlschema

    xmlschema.XMLSchema(str(DATA / "junit.xsd")).validate(str(path))
    root = ElementTree.parse(path).getroot()
    cases: dict[tuple[str, str], str] = {}
    for suite in root.iter("testsuite"):
        suite_cases = suite.findall("testcase")
        assert int(suite.get("tests", "-1")) == len(suite_cases)
        assert int(suite.get("failures", "-1")) == sum(
            case.find("failure") is not None for case in suite_cases
        )
        for case in suite_cases:
            kind = next((k for k in ("failure", "skipped") if case.find(k) is not None), "passed")
            cases[(case.get("classname", ""), case.get("name", ""))] = kind
    assert int(root.get("tests", "-1")) == len(cases)
    return cases


def test_time_gates_use_the_policy_thresholds_and_ignore_noise(traces: Traces) -> None:
    baseline = load_trace(traces.baseline)
    run = baseline.find_run("matmul", TARGET)
    slowest = max(run.passes, key=lambda p: p.self_s)
    slower = replace(
        run,
        total_s=(run.total_s or 0) * 3,
        passes=tuple(replace(p, self_s=p.self_s * 4) if p.index == slowest.index else p for p in run.passes),
    )
    new = Trace((slower, baseline.find_run("rms_norm", TARGET)), baseline.texts, path="slower.jsonl")
    gated = check_traces(new, baseline, Policy(total_ratio=2.0, pass_ratio=2.0, min_seconds=0.0))
    findings = {f.kind for r in gated.runs for f in r.findings if f.gated}
    assert findings == {TOTAL_TIME, PASS_TIME} and gated.gated
    (gemm,) = [r for r in gated.runs if r.kernel == "matmul"]
    assert gemm.total is not None and gemm.total.ratio == pytest.approx(3.0)
    assert gemm.pass_times[0].ratio == pytest.approx(4.0)
    # Times under min_seconds in both traces are noise, and a ratio of 0 reports without gating.
    noise = check_traces(new, baseline, Policy(total_ratio=2.0, pass_ratio=2.0, min_seconds=1e6))
    assert not noise.gated
    assert not check_traces(new, baseline, Policy()).gated


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "[fail]\nir_changed = true\n",
            " [fail]: unknown key 'ir_changed'; known keys: removed, added, newly_failing, ",
        ),
        ("[fail]\nir = 1\n", " [fail] ir: expected true or false, not 1"),
        ("fail = 3\n", " [fail]: expected a table, not 3"),
        ("nope = 1\n", ": unknown key 'nope'; known keys: fail, time, metrics"),
        (
            "[time]\ntotal_ratio = 0.5\n",
            " [time] total_ratio: 0.5 would fail on times under the baseline's; give 0 (off) or >= 1",
        ),
        ("[time]\nmin_seconds = -1\n", " [time] min_seconds: expected a number >= 0, not -1"),
        ("[time]\npass_ratio = inf\n", " [time] pass_ratio: expected a number >= 0, not inf"),
        ('[time]\ntotal_ratio = "2"\n', " [time] total_ratio: expected a number >= 0, not '2'"),
        ("[metrics]\nregister = 0.1\n", " [metrics]: unknown key 'register'; known keys: ir_lines, "),
        ("[metrics]\nsyncs = true\n", " [metrics] syncs: expected a number >= 0, not True"),
    ],
)
def test_policy_file_errors_are_usage_errors(tmp_path: Path, text: str, expected: str) -> None:
    path = _policy(tmp_path, text)
    with pytest.raises(UsageError) as raised:
        load_policy(path)
    assert raised.value.message.startswith(f"{path}{expected}")


def test_policy_file_values_are_read(tmp_path: Path) -> None:
    text = "[fail]\nremoved = false\nsource = true\n[time]\ntotal_ratio = 2\nmin_seconds = 0\n"
    text += "[metrics]\nsyncs = 0.5\n"
    policy = load_policy(_policy(tmp_path, text))
    assert policy.fail_on == {"newly_failing", "source", *PERF_KINDS} and policy.metric_limits == {
        "syncs": 0.5
    }
    assert (policy.total_ratio, policy.pass_ratio, policy.min_seconds) == (2.0, 0.0, 0.0)
    assert load_policy(_policy(tmp_path, "")) == Policy(path=str(tmp_path / "policy.toml"))


def test_usage_and_input_errors_exit_2(traces: Traces, tmp_path: Path) -> None:
    missing = irtrace("check", traces.baseline, "--baseline", tmp_path / "nope.jsonl", cwd=tmp_path)
    assert missing.returncode == 2 and "does not exist" in missing.stderr
    corrupt = tmp_path / "corrupt.jsonl"
    corrupt.write_text("not a trace\n")
    assert irtrace("check", corrupt, "--baseline", traces.baseline, cwd=tmp_path).returncode == 2
    bad_policy = _policy(tmp_path, "[fail]\nnope = true\n")
    done = irtrace(
        "check", traces.baseline, "--baseline", traces.baseline, "--policy", bad_policy, cwd=tmp_path
    )
    assert done.returncode == 2 and "unknown key 'nope'" in done.stderr
    assert irtrace("check", traces.baseline, cwd=tmp_path).returncode == 2  # --baseline is required
    help_text = irtrace("check", "--help", cwd=tmp_path).stdout
    assert (
        "0  no change that the policy fails on" in help_text
        and "1  a change the policy fails on" in help_text
    )


def test_implicit_policy_file_in_the_current_folder(traces: Traces, tmp_path: Path) -> None:
    (tmp_path / "irtrace-policy.toml").write_text("[fail]\nir = true\n", encoding="utf-8")
    done = irtrace("check", traces.changed, "--baseline", traces.baseline, cwd=tmp_path)
    assert done.returncode == 1 and "irtrace-policy.toml" in done.stdout


def test_check_help_names_every_kind_the_default_policy_fails_on() -> None:
    """The help said the default failed "on removed and newly failing kernels only"; it gates
    latency and resources too. Oracle: ``Policy()`` deciding each kind."""
    from irtrace.ci.policy import CHANGE_KINDS

    done = irtrace("check", "--help", cwd=ROOT)
    assert done.returncode == 0, done.stderr
    section = done.stdout.split("\npolicy: ", 1)[1].split("\n\n", 1)[0]
    named = {kind for kind in CHANGE_KINDS if kind in section.replace(",", " ").split()}
    assert named == {kind for kind in CHANGE_KINDS if Policy().fails(kind)}
    assert {"latency", "registers"} <= named and "only" not in section
