"""PTX lines mapped to the kernel source (the ``machine`` record's ``line_maps``) and, through the
kernel source's map, to Python lines: the GEMM on sm_90a recorded with ``--machine-code
--source-map``, checked two ways computed here. (1) The PTX's own ``.loc`` directives read by a few
lines of regex: an instruction under a ``.loc`` in the kernel source, or inlined at a line of it,
has that line. (2) nvcc itself: TileLang's source with its ``#line`` directives (``tilelang.lower``
with ``tl.emit_line_directives``, repeated before every line so that none counts on from the one
above) compiled here with ``-lineinfo``: its PTX has the same instructions as the recorded PTX,
and its ``.loc`` directives name Python lines; every instruction the trace maps to a Python line
must be located there by nvcc too.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from irtrace.facts.source_map import LineQuery, generated_lines, kernel_source_map
from irtrace.lowering.machine_code import find_cuda_tools
from irtrace.trace.model import Trace
from irtrace.trace.reader import load_trace

from ..conftest import EXAMPLES
from .conftest import oracle_nvcc, record_machine_code, tilelang_includes

pytestmark = pytest.mark.sweep  # nvcc twice (about 10 s of CPU): with the other machine-code tests

CASE = ("gemm.py::matmul(1024, 1024, 1024)", "cuda:sm_90a")
FILE = re.compile(r'\s*\.file\s+(\d+)\s+"([^"]*)"')
LOC = re.compile(r"\s*\.loc\s+(\d+)\s+(\d+)\s+\d+(?:,.*inlined_at\s+(\d+)\s+(\d+)\s+\d+)?")
INSTRUCTION = re.compile(r"\s*[a-z@].*;\s*")


def located(ptx: str, wanted: set[str]) -> dict[int, tuple[str, int]]:
    """The test's own reading: PTX line -> (file, line) of the ``.loc`` above it, when that names one
    of the ``wanted`` files directly or as the place it was inlined at (one level)."""
    files = {int(m[1]): m[2] for line in ptx.split("\n") if (m := FILE.fullmatch(line))}
    found: dict[int, tuple[str, int]] = {}
    where = None
    for number, line in enumerate(ptx.split("\n"), start=1):
        loc = LOC.match(line)
        if loc:
            where = None
            if files.get(int(loc[1])) in wanted and int(loc[2]) > 0:
                where = (files[int(loc[1])], int(loc[2]))
            elif loc[3] and files.get(int(loc[3])) in wanted and int(loc[4]) > 0:
                where = (files[int(loc[3])], int(loc[4]))
        elif where is not None and INSTRUCTION.fullmatch(line):
            found[number] = where
        elif line.startswith((".visible", ".entry", ".func")):
            where = None
    return found


def instructions(ptx: str) -> list[tuple[int, str]]:
    return [(n, line) for n, line in enumerate(ptx.split("\n"), start=1) if INSTRUCTION.fullmatch(line)]


@pytest.fixture(scope="module")
def recorded_gemm(tmp_path_factory: pytest.TempPathFactory) -> Trace:
    oracle_nvcc()
    path, _, _ = record_machine_code(tmp_path_factory.mktemp("ptxlines"), [CASE], "--source-map")
    return load_trace(path)


def test_ptx_lines_follow_the_loc_directives(recorded_gemm: Trace) -> None:
    (run,) = recorded_gemm.runs
    line_map = next(m for m in run.machine_lines if m.stage == "ptx")
    ptx = recorded_gemm.text(line_map.ir)
    assert line_map.stage == "ptx" and line_map.source == run.source_sha256
    mapped = dict(line_map.lines)
    oracle = located(ptx, {"tvm_kernels.cu"})
    assert len(oracle) > 500
    for number, (_, line) in oracle.items():
        assert mapped.get(number) == line, number
    # the rest came through longer inlining chains; still lines of the source, on instructions
    source_lines = recorded_gemm.text(run.source_sha256).count("\n") + 1
    assert all(1 <= line <= source_lines for line in mapped.values())
    assert set(mapped) <= {n for n, _ in instructions(ptx)}


@dataclass
class DirectiveBuild:
    """TileLang's source with its ``#line`` directives, compiled here by nvcc."""

    ptx: str
    cubin: Path


@pytest.fixture(scope="module")
def directive_build(tmp_path_factory: pytest.TempPathFactory) -> DirectiveBuild:
    import tilelang
    import tvm

    from irtrace.lowering.api import RecordRequest, prepare_request
    from irtrace.targets.specs import parse_spec

    spec, target = CASE
    (prepared,) = prepare_request(RecordRequest(parse_spec(f"{EXAMPLES / spec}"), (target,), {}))
    assert prepared.built is not None
    config = {**prepared.pass_configs, "tl.emit_line_directives": True}
    with tvm.transform.PassContext(opt_level=3, config=config), prepared.tvm_target:
        annotated = str(tilelang.lower(prepared.built.func, target=prepared.tvm_target).kernel_source)
    # one directive before every line after the first, so no line counts on from the one above
    every_line: list[str] = []
    current = None
    for line in annotated.split("\n"):
        if line.startswith("#line "):
            current = line
            continue
        every_line += [current, line] if current else [line]
    folder = tmp_path_factory.mktemp("directives")
    source = folder / "kernel.cu"
    source.write_text("\n".join(every_line))
    cubin = folder / "kernel.cubin"
    command = [
        oracle_nvcc(),
        "--cubin",
        "-O3",
        "-lineinfo",
        "-arch=sm_90a",
        "-std=c++20",
        *tilelang_includes(),
    ]
    command += ["-keep", f"--keep-dir={folder}", "-o", str(cubin), str(source)]
    subprocess.run(command, check=True, capture_output=True, cwd=folder)
    return DirectiveBuild(next(folder.glob("*.ptx")).read_text(), cubin)


def test_python_lines_in_the_ptx_agree_with_nvcc_through_tilelang_s_line_directives(
    recorded_gemm: Trace, directive_build: DirectiveBuild
) -> None:
    (run,) = recorded_gemm.runs
    nvcc_ptx = directive_build.ptx
    line_map = next(m for m in run.machine_lines if m.stage == "ptx")
    ptx = recorded_gemm.text(line_map.ir)
    ours, theirs = instructions(ptx), instructions(nvcc_ptx)
    assert [text for _, text in ours] == [text for _, text in theirs], "#line changed the code"
    record = kernel_source_map(run)
    assert record is not None
    python_files = set(record.files)
    by_nvcc = located(nvcc_ptx, python_files)
    source_to_python: dict[int, set[tuple[str, int]]] = {}
    for source_line, file, line in record.lines:
        source_to_python.setdefault(source_line, set()).add((record.files[file], line))
    checked = 0
    mapped = dict(line_map.lines)
    for (our_line, _), (their_line, _) in zip(ours, theirs, strict=True):
        claimed = source_to_python.get(mapped.get(our_line, 0), set())
        if claimed and their_line in by_nvcc:
            assert by_nvcc[their_line] in claimed, our_line
            checked += 1
    assert checked > 100

    store_c = next(
        n for n, t in enumerate((EXAMPLES / "gemm.py").read_text().splitlines(), 1) if "T.copy(C_local" in t
    )
    lines = generated_lines(recorded_gemm, run, LineQuery(store_c))
    assert lines.ptx and all(
        by_nvcc.get(theirs[i][0]) == (str(EXAMPLES / "gemm.py"), store_c)
        for i, (n, _) in enumerate(ours)
        if n in lines.ptx and theirs[i][0] in by_nvcc
    )
    assert any("st.global" in ptx.split("\n")[n - 1] for n in lines.ptx), "T.copy into C stores to global"


SASS_INFO = re.compile(r'\t//## File "([^"]*)", line (\d+)')
SASS_INSTRUCTION = re.compile(r"\s*/\*[0-9a-f]{4,}\*/\s.*;.*")


def test_python_lines_in_the_sass_agree_with_nvdisasm_on_tilelang_s_line_directives(
    recorded_gemm: Trace, directive_build: DirectiveBuild
) -> None:
    """The SASS of the source with directives (compiled by the test above) is the recorded SASS, and
    ``nvdisasm --print-line-info`` (innermost locations, another mode than the recorder reads)
    locates in a Python file every instruction the trace maps there, where it locates it in one."""

    (run,) = recorded_gemm.runs
    tool = find_cuda_tools().disassembler
    assert Path(tool).name == "nvdisasm"
    cubin = directive_build.cubin
    listing = subprocess.run(
        [tool, "--print-code", "--print-line-info", str(cubin)], capture_output=True, text=True
    )
    plain = [line for line in listing.stdout.split("\n") if not SASS_INFO.fullmatch(line)]
    by_nvdisasm: list[tuple[str, int] | None] = []
    where = None
    for line in listing.stdout.split("\n"):
        info = SASS_INFO.fullmatch(line)
        if info:
            where = (info[1], int(info[2]))
        elif SASS_INSTRUCTION.fullmatch(line):
            by_nvdisasm.append(where)
    sass_map = next(m for m in run.machine_lines if m.stage == "sass")
    sass = recorded_gemm.text(sass_map.ir)
    assert "\n".join(plain) == sass, "#line changed the SASS"
    record = kernel_source_map(run)
    assert record is not None
    source_to_python: dict[int, set[tuple[str, int]]] = {}
    for source_line, file, line in record.lines:
        source_to_python.setdefault(source_line, set()).add((record.files[file], line))
    mapped = dict(sass_map.lines)
    ours = [n for n, line in enumerate(sass.split("\n"), start=1) if SASS_INSTRUCTION.fullmatch(line)]
    checked = 0
    for number, theirs in zip(ours, by_nvdisasm, strict=True):
        claimed = source_to_python.get(mapped.get(number, 0), set())
        if claimed and theirs is not None and theirs[0] in set(record.files):
            assert theirs in claimed, number
            checked += 1
    assert checked > 50
    store_c = next(
        n for n, t in enumerate((EXAMPLES / "gemm.py").read_text().splitlines(), 1) if "T.copy(C_local" in t
    )
    lines = generated_lines(recorded_gemm, run, LineQuery(store_c)).sass
    assert any("STG" in sass.split("\n")[n - 1] for n in lines), "T.copy into C stores to global memory"
