"""The GitHub Actions workflows: this project's own (.github/workflows/irtrace.yml) and the one
docs/ci.md shows. Every irtrace command in them must parse with irtrace's own command line, torch
must be installed (CPU build) before the project, and the project's check must pass on what the
examples lower to today."""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

import pytest
import yaml

from irtrace.ci.check import check_traces
from irtrace.ci.policy import load_policy
from irtrace.cli.main import build_parser
from irtrace.trace.reader import load_trace

from ..conftest import ROOT
from .conftest import Coverage

WORKFLOW = ROOT / ".github" / "workflows" / "irtrace.yml"
DOC = ROOT / "docs" / "ci.md"


def _doc_workflow(name: str = "irtrace check") -> dict[str, Any]:
    blocks = re.findall(r"```yaml\n(.*?)```", DOC.read_text(encoding="utf-8"), re.DOTALL)
    (block,) = [b for b in blocks if b.startswith(f"name: {name}\n")]
    return yaml.safe_load(block)  # type: ignore[no-any-return]


WORKFLOWS = {"project": lambda: yaml.safe_load(WORKFLOW.read_text(encoding="utf-8")), "docs": _doc_workflow}


def _commands(workflow: dict[str, Any], shard: int = 1) -> list[tuple[str, list[str]]]:
    """``(job, argv)`` of every ``irtrace`` command the workflow runs, with the matrix (``shard``)
    and env values filled in and the shard list of the merge step spelled out."""
    shards = int(workflow.get("env", {}).get("SHARDS", 1))
    found = []
    for name, job in workflow["jobs"].items():
        for step in job["steps"]:
            script = step.get("run", "").replace("\\\n", " ")
            script = script.replace("${{ matrix.shard }}", str(shard)).replace(
                "${{ env.SHARDS }}", str(shards)
            )
            script = re.sub(
                r"\$\(for i in \$\(seq 1 \"\$SHARDS\"\); do echo \"([^\"]*)\$i([^\"]*)\"; done\)",
                lambda m: " ".join(f"{m.group(1)}{i}{m.group(2)}" for i in range(1, shards + 1)),
                script,
            )
            for line in script.splitlines():
                line = line.split("||")[0].strip()
                if line.startswith("irtrace "):
                    found.append((name, shlex.split(line)[1:]))
    return found


@pytest.mark.parametrize("which", WORKFLOWS)
def test_every_irtrace_command_of_the_workflow_parses(which: str) -> None:
    workflow = WORKFLOWS[which]()
    commands = _commands(workflow)
    used = {argv[0] for _, argv in commands}
    assert used == {"record", "merge", "check"}
    parser = build_parser()
    for _, argv in commands:
        args = parser.parse_args(argv)  # argparse exits on a bad option
        if args.command == "record":
            assert args.shard == "1/4" and args.jobs == 2 and args.target == ["all"]
        if args.command == "merge":
            assert args.traces == [f"shards/shard-{i}.jsonl.gz" for i in (1, 2, 3, 4)]
        if args.command == "check":
            assert args.junit and args.markdown and args.json and args.policy
    assert workflow["jobs"]["record"]["strategy"]["matrix"]["shard"] == [1, 2, 3, 4]
    assert workflow["jobs"]["check"]["needs"] == "record"


@pytest.mark.parametrize("which", WORKFLOWS)
def test_torch_cpu_is_installed_before_the_project(which: str) -> None:
    workflow = WORKFLOWS[which]()
    for job in workflow["jobs"].values():
        installs = [step["run"] for step in job["steps"] if "pip install" in step.get("run", "")]
        assert installs, "every job installs irtrace"
        script = installs[0]
        torch = script.index("torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu")
        project = max(script.find("-e ."), script.find("install tilelang-devtools"))
        assert 0 <= torch < project


def test_the_workflow_summary_and_junit_steps_run_even_when_the_check_fails() -> None:
    steps = yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))["jobs"]["check"]["steps"]
    summary = next(s for s in steps if "GITHUB_STEP_SUMMARY" in s.get("run", ""))
    junit = next(s for s in steps if "junit" in str(s.get("with", {})))
    assert summary["if"] == junit["if"] == "always()"


def test_the_projects_check_passes_on_what_the_examples_lower_to_today(coverage: Coverage) -> None:
    """The baseline and policy the project's workflow uses accept the current lowering of every
    example on every target (bless the baseline when a change is meant)."""
    policy = load_policy(ROOT / "irtrace-policy.toml")
    baseline = load_trace(ROOT / "ci" / "examples.baseline.jsonl.gz")
    report = check_traces(coverage.trace, baseline, policy)
    gated = [f"{run.title}: {f.kind}: {f.message}" for run in report.runs for f in run.findings if f.gated]
    assert not gated, "irtrace bless the new lowering into ci/examples.baseline.jsonl.gz if it is meant"
    assert {run.key for run in baseline.runs} == {run.key for run in coverage.trace.runs}


def test_documented_paths_exist() -> None:
    for path in ("ci/examples.baseline.jsonl.gz", "irtrace-policy.toml", "examples/irtrace.toml"):
        assert (ROOT / path).is_file(), path
    assert Path(ROOT / "bench" / "record_scale.py").is_file()


def test_the_gpu_workflow_records_machine_code_and_latency_and_checks_them(tmp_path: Path) -> None:
    """docs/ci.md's self-hosted GPU job: its irtrace commands parse, record with --machine-code and
    --bench, and check with a policy file whose performance gates load."""
    import tomllib

    from irtrace.ci.policy import LATENCY, OCCUPANCY, SPILLS, load_policy

    workflow = _doc_workflow("irtrace performance")
    (job,) = workflow["jobs"].values()
    assert "self-hosted" in job["runs-on"] and "gpu" in job["runs-on"]
    parser = build_parser()
    commands = {argv[0]: parser.parse_args(argv) for _, argv in _commands(workflow)}
    assert set(commands) == {"record", "check"}
    assert commands["record"].machine_code and commands["record"].bench
    assert commands["check"].junit and commands["check"].markdown and commands["check"].policy
    text = DOC.read_text(encoding="utf-8")
    (policy_text,) = [
        b
        for b in re.findall(r"```toml\n(.*?)```", text, re.DOTALL)
        if "latency_percent" in b and "[metrics]" not in b
    ]
    tomllib.loads(policy_text)
    path = tmp_path / commands["check"].policy
    path.write_text(policy_text, encoding="utf-8")
    policy = load_policy(path)
    assert {LATENCY, SPILLS, OCCUPANCY} <= policy.fail_on and policy.perf.latency_percent == 5.0


SMALL_MANIFEST = f"""
[[kernel]]
spec = "{ROOT / "examples" / "gemm.py"}::matmul(256, 256, 256)"
targets = ["cuda:sm_90", "hip:gfx942"]

[[kernel]]
spec = "{ROOT / "examples" / "rmsnorm.py"}::rms_norm(256, 256)"
targets = ["cuda:sm_90", "metal"]
"""


def test_the_four_shard_matrix_merges_into_one_recording_and_checks_clean(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The project's workflow run as its jobs run it, in this process: each matrix shard's record
    command, the artifacts gathered into ``shards/``, the merge and the check. Two things are
    swapped to keep it fast: a manifest of two bundled examples on two targets each (the
    workflow's targets, ``-t all``, dropped for the manifest's), and as the baseline the same
    manifest recorded once without shards, which the merged shards must equal."""
    from irtrace.cli.main import main as irtrace_main

    workflow = WORKFLOWS["project"]()
    shards = int(workflow["env"]["SHARDS"])
    assert shards == 4 and workflow["jobs"]["record"]["strategy"]["matrix"]["shard"] == [1, 2, 3, 4]
    manifest = tmp_path / "small.toml"
    manifest.write_text(SMALL_MANIFEST, encoding="utf-8")
    monkeypatch.chdir(tmp_path)

    def small(argv: list[str]) -> list[str]:
        out: list[str] = []
        skip = False
        for k, arg in enumerate(argv):
            if skip:
                skip = False
            elif arg == "-t" and argv[k + 1] == "all":
                skip = True
            elif k and argv[k - 1] == "--manifest":
                out.append(str(manifest))
            else:
                out.append(arg)
        return out

    (tmp_path / "shards").mkdir()
    for shard in range(1, shards + 1):
        ((_, record),) = [(job, argv) for job, argv in _commands(workflow, shard) if argv[0] == "record"]
        assert irtrace_main(small(record)) in (0, 5)
        (tmp_path / f"shard-{shard}.jsonl.gz").rename(
            tmp_path / "shards" / f"shard-{shard}.jsonl.gz"
        )  # upload
    assert irtrace_main(["record", "--manifest", str(manifest), "-q", "-o", "reference.jsonl.gz"]) == 0

    later = {argv[0]: argv for _, argv in _commands(workflow) if argv[0] != "record"}
    assert irtrace_main(later["merge"]) == 0
    check = [
        "reference.jsonl.gz" if arg == "ci/examples.baseline.jsonl.gz" else arg for arg in later["check"]
    ]
    check = [str(ROOT / arg) if arg == "irtrace-policy.toml" else arg for arg in check]
    code = irtrace_main(check)

    merged, reference = load_trace("examples.jsonl.gz"), load_trace("reference.jsonl.gz")
    assert [run.key for run in merged.runs] == [run.key for run in reference.runs] and len(merged.runs) == 4
    for got, want in zip(merged.runs, reference.runs, strict=True):
        assert [(p.name, p.ir_after) for p in got.passes] == [(p.name, p.ir_after) for p in want.passes]
    assert code == 0, Path("check.md").read_text(encoding="utf-8")
    assert Path("junit.xml").read_text(encoding="utf-8").count("<testcase ") == 4
