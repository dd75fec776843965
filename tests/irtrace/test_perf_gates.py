"""``irtrace check``'s performance gates on recorded numbers.

Resources are real: the bundled RMSNorm lowered for sm_90a in two configurations (128 threads and
4.5 KiB of shared memory; 256 threads, four rows and 20 KiB) and compiled by nvcc through
``--machine-code``'s compiler. Latencies are benchmark records with chosen repetitions written
through the ``TraceWriter`` API, as ``--bench`` writes them. Occupancy is checked against a hand
computation in the test (the CUDA occupancy rules, counted block by block) for two architectures.
"""

from __future__ import annotations

import math
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest
from msgspec.structs import replace

from irtrace.base.errors import UsageError
from irtrace.ci.check import check_traces
from irtrace.ci.check_report import render_junit, render_markdown, render_text, report_document
from irtrace.ci.policy import LATENCY, OCCUPANCY, REGISTERS, SMEM, Policy, load_policy
from irtrace.perf.occupancy import ARCH_LIMITS, occupancy
from irtrace.targets.specs import parse_spec
from irtrace.trace.model import KernelRun, Trace
from irtrace.trace.reader import load_trace
from irtrace.trace.resources import BenchResult
from irtrace.trace.writer import TraceWriter

from ..conftest import DATA, EXAMPLES

SMALL = f"{EXAMPLES / 'rmsnorm.py'}::rms_norm()"
WIDE = f"{EXAMPLES / 'rmsnorm.py'}::rms_norm(blk_m=4, threads=256)"
TARGET = "cuda:sm_90a"
BASELINE_SAMPLES = (1.00, 1.01, 1.02, 1.03, 1.05)
"""Five repetitions (ms): median 1.02, spread 1.00-1.05."""


@dataclass
class Recorded:
    trace: Trace
    small: KernelRun
    wide: KernelRun


@pytest.fixture(scope="module")
def machine(tmp_path_factory: pytest.TempPathFactory) -> Recorded:
    if shutil.which("nvcc") is None:
        pytest.skip("no nvcc on PATH")
    from irtrace.lowering.api import RecordRequest, record_kernels
    from irtrace.lowering.machine_code import machine_code_for

    path = tmp_path_factory.mktemp("perf") / "machine.jsonl"
    requests = [RecordRequest(parse_spec(spec), (TARGET,), {}) for spec in (SMALL, WIDE)]
    with TraceWriter(path) as writer, machine_code_for(writer, True) as compiler:
        assert compiler is not None
        assert not record_kernels(requests, writer, after_run=compiler.after_run).errors
    trace = load_trace(path)
    small, wide = trace.runs
    assert small.resources and wide.resources, "nvcc gave no resources"
    return Recorded(trace, small, wide)


def bench(samples: tuple[float, ...], **fields: object) -> BenchResult:
    ordered = sorted(samples)
    median = ordered[len(ordered) // 2]
    values: dict[str, object] = {"latency_ms": median, "device": "NVIDIA H200", "samples_ms": samples}
    values.update(fields)
    return BenchResult(**values)  # type: ignore[arg-type]


def write(path: Path, trace: Trace, run: KernelRun, result: BenchResult | None) -> Trace:
    """``run`` alone, with ``result`` as its benchmark, in a trace file of its own."""
    with TraceWriter(path) as writer:
        writer.add_run(replace(run, bench=result), trace.texts)
    return load_trace(path)


# ----------------------------------------------------------------------------- occupancy


_GUIDE = {  # CUDA Programming Guide, technical specifications: warps, blocks, smem per SM, per block
    "sm_80": (64, 32, 164 * 1024, 163 * 1024),
    "sm_90": (64, 32, 228 * 1024, 227 * 1024),
}


def hand_occupancy(arch: str, registers: int, smem: int, threads: int) -> tuple[int, float]:
    """Blocks per SM counted up one at a time until a resource runs out; (blocks, fraction)."""
    max_warps, max_blocks, smem_per_sm, smem_per_block = _GUIDE[arch]
    warps = math.ceil(threads / 32)
    regs_per_warp = math.ceil(registers * 32 / 256) * 256
    block_smem = math.ceil((smem + 1024) / 128) * 128  # 1 KiB reserved per block from sm_80 on
    assert block_smem <= smem_per_block + 1024
    blocks = 0
    while True:
        n = blocks + 1
        quarters = [0, 0, 0, 0]  # a warp's registers come from one of four sub-partitions
        for warp in range(n * warps):
            quarters[warp % 4] += regs_per_warp
        if (
            n * warps > max_warps
            or n > max_blocks
            or max(quarters) > 65536 // 4
            or n * block_smem > smem_per_sm
        ):
            return blocks, blocks * warps / max_warps
        blocks = n


def test_occupancy_matches_a_hand_computation_on_two_archs(machine: Recorded) -> None:
    for run in (machine.small, machine.wide):
        source = machine.trace.kernel_source(run)
        assert source is not None
        (item,) = run.resources
        match = re.search(r"__launch_bounds__\((\d+)", source)
        assert match is not None
        threads = int(match[1])
        for arch in _GUIDE:
            found = occupancy(ARCH_LIMITS[arch], item.registers, item.smem, threads)
            blocks, fraction = hand_occupancy(arch, item.registers, item.smem, threads)
            assert (found.blocks, found.fraction) == (blocks, fraction), (arch, item)
    # the wide configuration fits fewer warps than the small one on Hopper (registers or smem)
    small, wide = (
        occupancy(ARCH_LIMITS["sm_90"], r.resources[0].registers, r.resources[0].smem, t)
        for r, t in ((machine.small, 128), (machine.wide, 256))
    )
    assert wide.fraction < small.fraction


def test_a_block_that_does_not_fit_has_no_occupancy() -> None:
    assert occupancy(ARCH_LIMITS["sm_80"], 255, 0, 1024).blocks == 0  # 255 x 1024 > 64K registers
    assert occupancy(ARCH_LIMITS["sm_86"], 32, 100 * 1024, 128).blocks == 0  # over 99 KiB per block
    assert occupancy(ARCH_LIMITS["sm_90"], 32, 0, 2048).blocks == 0  # over 1024 threads


# ----------------------------------------------------------------------------- resource gates


def test_resource_growth_is_gated_by_default_and_a_policy_file_allows_it(
    machine: Recorded, tmp_path: Path
) -> None:
    trace = machine.trace
    baseline = write(tmp_path / "base.jsonl", trace, machine.small, None)
    new = write(tmp_path / "new.jsonl", trace, machine.wide, None)
    old_item, new_item = machine.small.resources[0], machine.wide.resources[0]
    report = check_traces(new, baseline, Policy())
    (run,) = report.runs
    kinds = {finding.kind: finding for finding in run.findings}
    assert kinds[SMEM].gated and f"{new_item.smem // 1024}.0 KiB" in kinds[SMEM].message
    assert kinds[OCCUPANCY].gated
    if new_item.registers > old_item.registers:
        assert kinds[REGISTERS].gated
    assert report.gated
    # the same growth within thresholds a policy file gives is reported, not failed
    allowed = tmp_path / "policy.toml"
    allowed.write_text(
        "[perf]\n"
        f"registers = {max(0, new_item.registers - old_item.registers)}\n"
        f"smem_bytes = {new_item.smem - old_item.smem}\n"
        "occupancy_points = 100\n"
    )
    lenient = check_traces(new, baseline, load_policy(allowed))
    assert not lenient.gated and {f.kind for f in lenient.runs[0].findings} >= {SMEM, OCCUPANCY}
    # the other way round (fewer resources) is no regression
    assert not check_traces(baseline, new, Policy()).gated


# ----------------------------------------------------------------------------- latency and noise


@pytest.mark.parametrize(
    ("samples", "gated", "why"),
    [
        # +6.9% (median 1.09 ms) but the fastest new repetition (1.04) beats the baseline's slowest (1.05)
        ((1.04, 1.06, 1.09, 1.10, 1.12), False, "within the noise"),
        # +5.9% (median 1.08) and every repetition slower than every baseline one
        ((1.06, 1.07, 1.08, 1.10, 1.12), True, "outside the noise"),
        # outside the noise but +3.9% (median 1.06): under the 5% threshold
        ((1.055, 1.06, 1.06, 1.06, 1.07), False, None),
        # the same kernel measured again: no finding
        ((1.01, 1.02, 1.02, 1.03, 1.04), False, None),
        # much faster: reported, never failed
        ((0.50, 0.51, 0.52, 0.53, 0.54), False, "faster"),
    ],
)
def test_latency_gate_allows_for_noise(
    machine: Recorded, tmp_path: Path, samples: tuple[float, ...], gated: bool, why: str | None
) -> None:
    trace = machine.trace
    baseline = write(tmp_path / "base.jsonl", trace, machine.small, bench(BASELINE_SAMPLES))
    new = write(tmp_path / "new.jsonl", trace, machine.small, bench(samples))
    (run,) = check_traces(new, baseline, Policy()).runs
    latency = [finding for finding in run.findings if finding.kind == LATENCY]
    assert run.gated is gated
    if why is None:
        assert not latency
    else:
        assert len(latency) == 1 and why in latency[0].message and latency[0].gated is gated
    assert run.perf is not None and run.perf.latency is not None
    ordered = sorted(samples)
    assert run.perf.latency.percent == pytest.approx((ordered[2] - 1.02) / 1.02 * 100)


def test_latency_threshold_and_switch_come_from_the_policy_file(machine: Recorded, tmp_path: Path) -> None:
    trace = machine.trace
    baseline = write(tmp_path / "base.jsonl", trace, machine.small, bench(BASELINE_SAMPLES))
    slower = write(tmp_path / "new.jsonl", trace, machine.small, bench((1.10, 1.12, 1.13, 1.14, 1.20)))
    assert check_traces(slower, baseline, Policy()).gated  # +10.8%, outside the noise
    path = tmp_path / "policy.toml"
    path.write_text("[perf]\nlatency_percent = 15\n")
    assert not check_traces(slower, baseline, load_policy(path)).runs[0].findings  # under 15%
    path.write_text("[fail]\nlatency = false\n")
    report = check_traces(slower, baseline, load_policy(path))
    assert not report.gated and any(f.kind == LATENCY for f in report.runs[0].findings)  # reported


def test_single_measurements_and_other_gpus(machine: Recorded, tmp_path: Path) -> None:
    trace = machine.trace
    once = write(tmp_path / "once.jsonl", trace, machine.small, bench((1.0,)))
    slower_once = write(tmp_path / "slower.jsonl", trace, machine.small, bench((1.2,)))
    report = check_traces(slower_once, once, Policy())
    assert report.gated and "no spread measured" in report.runs[0].findings[0].message
    elsewhere = write(tmp_path / "a100.jsonl", trace, machine.small, bench((2.0, 2.1), device="NVIDIA A100"))
    report = check_traces(elsewhere, once, Policy())
    assert not report.gated and "different GPUs" in report.runs[0].findings[0].message
    failing = BenchResult(latency_ms=None, device="NVIDIA H200", error="CUDA error: illegal address")
    broken = write(tmp_path / "broken.jsonl", trace, machine.small, failing)
    report = check_traces(broken, once, Policy())
    assert report.gated and "fails now: CUDA error: illegal address" in report.runs[0].findings[0].message


# ----------------------------------------------------------------------------- reports


def test_markdown_junit_and_json_carry_the_performance_gates(machine: Recorded, tmp_path: Path) -> None:
    import xml.etree.ElementTree as ElementTree

    import xmlschema

    trace = machine.trace
    baseline = write(tmp_path / "base.jsonl", trace, machine.small, bench(BASELINE_SAMPLES))
    new = write(tmp_path / "new.jsonl", trace, machine.wide, bench((1.20, 1.21, 1.22, 1.23, 1.30)))
    report = check_traces(new, baseline, Policy())
    markdown = render_markdown(report)
    assert "### Performance: the baseline → the new trace" in markdown
    assert "`latency`: latency 1.020 ms [1.000–1.050] -> 1.220 ms [1.200–1.300] (+19.6%)" in markdown
    assert "latency +19.6%" in markdown and "❌ `occupancy`" in markdown
    junit = tmp_path / "junit.xml"
    junit.write_text(render_junit(report))
    xmlschema.XMLSchema(str(DATA / "junit.xsd")).validate(str(junit))
    failure = ElementTree.parse(junit).getroot().find(".//failure")
    assert failure is not None and failure.get("type") == LATENCY
    assert failure.text is not None and "occupancy: rmsnorm_kernel" in failure.text
    assert "x latency: latency 1.020 ms" in render_text(report)
    document = report_document(report)
    perf = document["runs"][0]["perf"]
    assert perf["latency_percent"] == pytest.approx(19.608, abs=1e-3) and perf["outside_noise"] is True
    assert perf["functions"][0]["new"]["registers"] == machine.wide.resources[0].registers
    assert document["policy"]["perf"]["latency_percent"] == 5.0


# ----------------------------------------------------------------------------- hostile policies


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "[perf]\nlatency_percent = -5\n",
            "[perf] latency_percent: expected a number of percent >= 0, not -5",
        ),
        (
            "[perf]\nlatency_percent = nan\n",
            "[perf] latency_percent: expected a number of percent >= 0, not nan",
        ),
        (
            '[perf]\nlatency_percent = "5"\n',
            "[perf] latency_percent: expected a number of percent >= 0, not '5'",
        ),
        ("[perf]\nregisters = -1\n", "[perf] registers: expected a whole number >= 0, not -1"),
        ("[perf]\nregisters = 1.5\n", "[perf] registers: expected a whole number >= 0, not 1.5"),
        ("[perf]\nspill_bytes = true\n", "[perf] spill_bytes: expected a whole number >= 0, not True"),
        (
            "[perf]\noccupancy_points = 150\n",
            "[perf] occupancy_points: expected percentage points from 0 to 100",
        ),
        ("[perf]\nlatency = 5\n", "[perf]: unknown key 'latency'; known keys: latency_percent, registers"),
        ("[fail]\nlatency = 1\n", "[fail] latency: expected true or false, not 1"),
    ],
)
def test_hostile_policy_values_are_one_line_errors(tmp_path: Path, text: str, expected: str) -> None:
    path = tmp_path / "policy.toml"
    path.write_text(text)
    with pytest.raises(UsageError) as raised:
        load_policy(path)
    assert raised.value.message.startswith(f"{path} {expected}"), raised.value.message
    assert "\n" not in raised.value.message


# ----------------------------------------------------------------------------- views


def test_show_passviz_and_report_give_latency_and_occupancy(
    machine: Recorded, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import io

    from rich.console import Console

    from irtrace.cli.main import main
    from passviz.report import report_html
    from passviz.widgets.run_info import run_facts

    trace = write(tmp_path / "t.jsonl", machine.trace, machine.wide, bench(BASELINE_SAMPLES))
    (run,) = trace.runs
    item = run.resources[0]
    expected = occupancy(ARCH_LIMITS["sm_90"], item.registers, item.smem, 256)
    latency = "1.020 ms median, 1.000–1.050 over 5 repetitions, on NVIDIA H200"
    assert main(["show", str(trace.path)]) == 0
    shown = capsys.readouterr().out
    assert f"latency: {latency}" in " ".join(shown.split())
    assert f"256 threads, occupancy {expected.fraction:.0%}" in " ".join(shown.split())
    console = Console(width=400, record=True, file=io.StringIO())
    console.print(run_facts(trace, run))
    pane = console.export_text()
    assert latency in pane and expected.describe() in pane
    page = report_html(trace)
    assert f"Latency: {latency}" in page and f"<td>{expected.describe()}</td>" in page
    assert "1.020 ms [1.000–1.050]" in page  # the runs table: median and range
