"""SASS instructions per Python line, by class (``irtrace ir --line``, ``irtrace show --lines``, the
``machine`` record's ``costs``), against nvdisasm's own line table read here: the test compiles the
trace's kernel source itself with TileLang's flags (its SASS must be the recorded SASS), lists the
cubin with ``nvdisasm --print-code --print-line-info-inline``, takes each instruction's outermost
frame (the kernel function's own line), classifies the opcode by its own table, and goes to Python
lines through the kernel source's ``#line`` map (checked against TileLang's directives in
tests/irtrace/test_source_map_kernel_source.py). Real kernels: the GEMM on sm_90a (wgmma, TMA) and
sm_80 (mma, cp.async), the row reduction on sm_80.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections import Counter
from pathlib import Path

import pytest

from irtrace.cli.main import main
from irtrace.facts.instruction_classes import CLASSES, run_line_costs
from irtrace.facts.source_map import kernel_source_map, machine_line_map
from irtrace.lowering.machine_code import find_cuda_tools
from irtrace.trace.model import KernelRun, Trace
from irtrace.trace.reader import load_trace

from ..conftest import DATA, EXAMPLES
from .conftest import oracle_nvcc, record_machine_code, tilelang_includes

pytestmark = pytest.mark.sweep  # nvcc on three kernels: with the other machine-code tests

CASES = [
    ("gemm.py::matmul(1024, 1024, 1024)", "cuda:sm_90a"),
    ("gemm.py::matmul(1024, 1024, 1024)", "cuda:sm_80"),
    (f"{DATA / 'row_reduce.py'}::row_reduce()", "cuda:sm_80"),
]

# The test's own reading of nvdisasm: its line-info comments and instruction lines.
FRAME = re.compile(r'\t//## File "([^"]*)", line (\d+)(?: inlined at "([^"]*)", line (\d+))?')
INSTRUCTION = re.compile(r"\s*/\*[0-9a-f]{4,}\*/\s+(.*?);.*")
# The test's own classes, written from the opcode names NVIDIA's CUDA binary utilities document.
TEST_CLASSES = {
    "mma": {"HMMA", "HGMMA", "IMMA", "QGMMA", "UTCHMMA", "UTCQMMA"},
    "global_memory": {"LDG", "STG", "LDGSTS", "UTMALDG", "UTMASTG", "RED", "ATOMG", "REDG", "UBLKCP"},
    "shared_memory": {"LDS", "STS", "LDSM", "STSM", "ATOMS"},
    "barrier": {"BAR", "MEMBAR", "DEPBAR", "LDGDEPBAR", "SYNCS", "WARPGROUP", "WARPSYNC", "FENCE", "ARRIVES"},
}


def classify(instruction: str) -> str:
    words = instruction.split()
    if words and words[0].startswith("@"):
        words = words[1:]
    opcode = words[0].split(".")[0]
    return next((name for name, opcodes in TEST_CLASSES.items() if opcode in opcodes), "other")


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Trace]:
    oracle_nvcc()
    path, _, _ = record_machine_code(tmp_path_factory.mktemp("costs"), CASES, "--source-map")
    return path, load_trace(path)


def nvdisasm_costs(
    trace: Trace, run: KernelRun, folder: Path
) -> tuple[dict[tuple[str, int], Counter[str]], Counter[str], Counter[str]]:
    """Per (file, Python line), on no Python line, and in all: the classes' counts, by the test."""
    source = trace.text(run.source_sha256)
    folder.mkdir(parents=True)
    (folder / "kernel.cu").write_text(source)
    arch = run.resources[0].arch
    command = [
        oracle_nvcc(),
        "--cubin",
        "-O3",
        "-lineinfo",
        f"-arch={arch}",
        "-std=c++20",
        *tilelang_includes(),
    ]
    subprocess.run([*command, "-o", "kernel.cubin", "kernel.cu"], check=True, capture_output=True, cwd=folder)
    nvdisasm = find_cuda_tools().disassembler
    assert Path(nvdisasm).name == "nvdisasm"
    plain = subprocess.run(
        [nvdisasm, "--print-code", "kernel.cubin"], capture_output=True, text=True, cwd=folder
    )
    sass_map = machine_line_map(run, "sass")
    assert sass_map is not None
    assert plain.stdout == trace.text(sass_map.ir), "the test's compile is not the recorded SASS"
    listing = subprocess.run(
        [nvdisasm, "-gi", "--print-code", "kernel.cubin"], capture_output=True, text=True, cwd=folder
    ).stdout
    record = kernel_source_map(run)
    assert record is not None
    python: dict[int, set[tuple[str, int]]] = {}
    for cu_line, file, line in record.lines:
        python.setdefault(cu_line, set()).add((record.files[file], line))
    per_line: dict[tuple[str, int], Counter[str]] = {}
    unplaced: Counter[str] = Counter()
    every: Counter[str] = Counter()
    cu_line = None
    for text in listing.split("\n"):
        frame = FRAME.fullmatch(text)
        if frame:  # innermost first: the last one before an instruction is the kernel's own frame
            file, line = (frame[3], frame[4]) if frame[3] else (frame[1], frame[2])
            cu_line = int(line) if file.endswith("kernel.cu") else None
            continue
        instruction = INSTRUCTION.fullmatch(text)
        if instruction is None:
            if text.startswith(("//--", "\t.section")):
                cu_line = None
            continue
        kind = classify(instruction[1])
        every[kind] += 1
        lines = python.get(cu_line or 0, set())
        if not lines:
            unplaced[kind] += 1
        for key in lines:
            per_line.setdefault(key, Counter())[kind] += 1
    return per_line, unplaced, every


def as_counter(counts: object) -> Counter[str]:
    return Counter({name: getattr(counts, name) for name in CLASSES if getattr(counts, name)})


@pytest.mark.parametrize(("spec", "target"), CASES)
def test_counts_per_line_are_nvdisasm_s_line_table(
    recorded: tuple[Path, Trace], spec: str, target: str, tmp_path: Path
) -> None:
    path, trace = recorded
    kernel = spec.split("::")[1].split("(")[0]
    run = trace.find_run(kernel, target)
    stored = machine_line_map(run, "sass")
    assert stored is not None and stored.costs is not None, "the trace stores the counts"
    per_line, unplaced, every = nvdisasm_costs(trace, run, tmp_path / "oracle")
    ours = {(item.file, item.line): as_counter(item.counts) for item in stored.costs.lines}
    assert ours == per_line
    assert as_counter(stored.costs.unplaced) == unplaced
    assert as_counter(stored.costs.total) == every
    if target == "cuda:sm_80" and kernel == "matmul":  # every mma lands on a line of TileLang's macro
        assert sum(c["mma"] for c in per_line.values()) == every["mma"] > 0

    # the views say the same: ir --line (JSON) for each line of the kernel's file, show --lines
    kernel_file = str(EXAMPLES / "gemm.py") if kernel == "matmul" else str(DATA / "row_reduce.py")
    own = {line: counts for (file, line), counts in per_line.items() if file == kernel_file}
    assert own, "some instruction comes from a line of the kernel's own file"
    for line, counts in own.items():
        document = run_cli(["ir", str(path), "-k", kernel, "-t", target, "--line", str(line), "--json"])
        machine = document["machine_code"]
        assert {k: v for k, v in machine.items() if k != "total" and v} == dict(counts)
        assert machine["total"] == sum(counts.values())
    (table,) = run_cli(["show", str(path), "--lines", kernel, "-t", target, "--json"])["runs"]
    rows = {(row["file"], row["line"]): row for row in table["lines"]}
    assert {key: Counter({n: row[n] for n in CLASSES if row[n]}) for key, row in rows.items()} == per_line
    own_rows = [row["line"] for row in table["lines"] if row["kernel_file"]]
    assert own_rows == sorted(own) and table["lines"][: len(own)] == [
        rows[(kernel_file, n)] for n in own_rows
    ]


def run_cli(argv: list[str]) -> dict[str, object]:
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(argv) == 0
    return json.loads(out.getvalue())  # type: ignore[no-any-return]


def test_a_trace_written_before_the_counts_were_stored_gives_the_same_counts(
    recorded: tuple[Path, Trace], tmp_path: Path
) -> None:
    """Old traces stay readable: without ``costs`` in the machine record, the counts come from the
    stored SASS and maps, the same as stored."""
    path, trace = recorded
    old = tmp_path / "old.jsonl"
    lines = []
    for text in path.read_text().splitlines():
        if '"record":"machine"' in text:
            record = json.loads(text)
            for item in record["line_maps"]:
                item.pop("costs", None)
            text = json.dumps(record)
        lines.append(text)
    old.write_text("\n".join(lines) + "\n")
    assert '"costs"' not in old.read_text()
    before = load_trace(old)
    for run in trace.runs:
        again = before.find_run(run.kernel, run.target)
        assert machine_line_map(again, "sass").costs is None  # type: ignore[union-attr]
        assert run_line_costs(before, again) == run_line_costs(trace, run)


def test_the_table_shows_every_counted_line_and_hostile_names_stay_text(
    recorded: tuple[Path, Trace],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    path, trace = recorded
    assert main(["show", str(path), "--lines", "matmul", "-t", "cuda:sm_80"]) == 0
    out = capsys.readouterr().out
    run = trace.find_run("matmul", "cuda:sm_80")
    costs = run_line_costs(trace, run)
    assert costs is not None
    source = (EXAMPLES / "gemm.py").read_text().splitlines()
    for item in costs.lines:
        if item.file == str(EXAMPLES / "gemm.py"):
            (row,) = [r for r in out.splitlines() if r.split()[:1] == [str(item.line)]]
            assert source[item.line - 1].strip()[:40] in row
            assert str(sum(getattr(item.counts, n) for n in CLASSES)) in row.split()
    # a trace whose counts name a file with terminal escapes and markup: printed as text
    hostile = tmp_path / "hostile.jsonl"
    lines = []
    for text in path.read_text().splitlines():
        if '"record":"machine"' in text and '"costs"' in text:
            record = json.loads(text)
            for item in record["line_maps"]:
                for row in (item.get("costs") or {}).get("lines", []):
                    row["file"] = "\x1b[2J[bold]evil.py"
            text = json.dumps(record)
        lines.append(text)
    hostile.write_text("\n".join(lines) + "\n")
    assert main(["show", str(hostile), "--lines", "matmul", "-t", "cuda:sm_80"]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "[bold]evil.py" in out


def test_the_report_panel_names_each_line_s_instructions(
    recorded: tuple[Path, Trace], tmp_path: Path
) -> None:
    """The report's page data holds nvdisasm's counts for each kernel line."""
    from passviz.report import report_html

    _, trace = recorded
    run = trace.find_run("matmul", "cuda:sm_80")
    per_line, _, _ = nvdisasm_costs(trace, run, tmp_path / "oracle")
    gemm = str(EXAMPLES / "gemm.py")
    own = {line: counts for (file, line), counts in per_line.items() if file == gemm}
    page = report_html(trace, [run])
    found = re.search(rf"class='pymap' data-run='run{run.run_id}'>([^<]*)</script>", page)
    assert found is not None
    sass = json.loads(found[1])["sass"]
    assert sass["classes"] == ["MMA", "global", "shared", "barrier", "other"]
    assert {
        int(line): Counter({n: c for n, c in zip(CLASSES, row, strict=False) if c})
        for line, row in sass["lines"].items()
    } == own


def test_clicking_a_line_in_the_report_shows_its_instructions(
    recorded: tuple[Path, Trace], tmp_path: Path
) -> None:
    """In Chromium, a click on a line puts nvdisasm's counts for it at the top of the panel."""
    from passviz.report import write_report
    from tests.passviz.test_report_browser import choose_python_line, chromium_path, playwright_api

    _, trace = recorded
    run = trace.find_run("matmul", "cuda:sm_80")
    per_line, _, _ = nvdisasm_costs(trace, run, tmp_path / "oracle")
    gemm = str(EXAMPLES / "gemm.py")
    own = {line: counts for (file, line), counts in per_line.items() if file == gemm}
    path = chromium_path()
    if path is None:
        pytest.skip("no Chromium found (install one or set PASSVIZ_CHROMIUM)")
    report = write_report(trace, tmp_path / "report.html", [run])
    line = max(own, key=lambda n: own[n]["global_memory"])
    with playwright_api.sync_playwright() as driver:
        browser = driver.chromium.launch(executable_path=path, args=["--no-sandbox"])
        page_view = browser.new_page(viewport={"width": 1280, "height": 900})
        page_view.goto(report.as_uri())
        page_view.wait_for_selector("body[data-ready='1']")
        choose_python_line(page_view, line, shows=".pythrough .pysass")
        shown = page_view.locator(".pythrough .pysass").inner_text()
        browser.close()
    counts = own[line]
    assert shown == (
        f"SASS instructions: {counts['mma']} MMA, {counts['global_memory']} global, "
        f"{counts['shared_memory']} shared, {counts['barrier']} barrier, {counts['other']} other "
        f"({sum(counts.values())} in all)"
    )
