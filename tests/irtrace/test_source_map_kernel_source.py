"""The kernel source's map (the ``srcmap`` record after codegen, placed by TileLang's ``#line``
directives on a copy of the module) against TileLang's own lowering run here with
``tl.emit_line_directives`` on: its source without the directives must be the trace's source byte
for byte, and every kernel-source line the map names must be one the directive above it in
TileLang's own output names (the map leaves out more: lines of statements without a span, closing
braces). The tile operations' lines are checked by what the source prints there."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from irtrace.base.errors import ExitCode
from irtrace.cli.main import main
from irtrace.facts.source_map import LineQuery, generated_lines, kernel_source_map
from irtrace.lowering.kernel_source_spans import place_line_directives
from irtrace.trace.model import Trace

from ..conftest import EXAMPLES, SMALL_GEMM

GEMM_FILE = EXAMPLES / "gemm.py"
DIRECTIVE = re.compile(r'#line (\d+) "(.*)"')


def line_of(text: str) -> int:
    lines = GEMM_FILE.read_text().splitlines()
    return next(n for n, line in enumerate(lines, start=1) if text in line)


def tilelang_with_directives(target: str) -> str:
    """The GEMM's kernel source as a plain ``tilelang.lower`` writes it with TileLang's directives on."""
    import tilelang
    import tvm

    from irtrace.lowering.api import RecordRequest, prepare_request
    from irtrace.targets.specs import parse_spec

    (prepared,) = prepare_request(RecordRequest(parse_spec(SMALL_GEMM), (target,), {}))
    assert prepared.built is not None
    config = {**prepared.pass_configs, "tl.emit_line_directives": True}
    with tvm.transform.PassContext(opt_level=3, config=config), prepared.tvm_target:
        return str(tilelang.lower(prepared.built.func, target=prepared.tvm_target).kernel_source)


@pytest.fixture(scope="module")
def with_directives() -> dict[str, str]:
    return {target: tilelang_with_directives(target) for target in ("cuda:sm_90", "hip:gfx942")}


def directive_above(annotated: str) -> dict[int, tuple[str, int]]:
    """Plain-source line -> (file, line) of the last directive above it (the test's own reading)."""
    found: dict[int, tuple[str, int]] = {}
    number, current = 0, None
    for line in annotated.split("\n"):
        match = DIRECTIVE.fullmatch(line)
        if match:
            current = (match[2], int(match[1]))
            continue
        number += 1
        if current is not None:
            found[number] = current
    return found


@pytest.mark.parametrize("target", ["cuda:sm_90", "hip:gfx942"])
def test_kernel_source_lines_agree_with_tilelang_s_own_line_directives(
    gemm_trace: Trace, with_directives: dict[str, str], target: str
) -> None:
    run = gemm_trace.find_run("matmul", target)
    source = gemm_trace.text(run.source_sha256)
    annotated = with_directives[target]
    assert "\n".join(line for line in annotated.split("\n") if not DIRECTIVE.fullmatch(line)) == source
    record = kernel_source_map(run)
    assert record is not None and record.placed and record.by == "line_directives"
    above = directive_above(annotated)
    for source_line, file, line in record.lines:
        assert above[source_line] == (record.files[file], line), source_line
    text = source.split("\n")
    store_c = line_of("T.copy(C_local, C[")
    mapped = {n for n, f, line in record.lines if record.files[f] == str(GEMM_FILE) and line == store_c}
    writes_c = {n for n, row in enumerate(text, start=1) if re.search(r"\bC\[|\(C \+", row) and "=" in row}
    assert writes_c and writes_c <= mapped, "the lines storing into C are the T.copy's"
    carried = {n for n, f, line in record.carried if record.files[f] == str(GEMM_FILE) and line == store_c}
    assert generated_lines(gemm_trace, run, LineQuery(store_c)).source == tuple(sorted(mapped | carried))
    gemm_line = line_of("T.gemm(")
    named = {line for _, f, line in record.lines if record.files[f] == str(GEMM_FILE)}
    assert gemm_line not in named  # lowered through TileLang's macros: their files' lines instead
    macro_files = {f for f in record.files if "/tilelang/" in f}
    assert macro_files, "the GEMM's statements carry the lines of TileLang's macros"


def test_ir_line_shows_the_kernel_source_lines(gemm_trace: Trace, capsys: pytest.CaptureFixture[str]) -> None:
    assert gemm_trace.path is not None
    store_c = line_of("T.copy(C_local, C[")
    code = main(["ir", gemm_trace.path, "-t", "cuda:sm_90", "--line", str(store_c), "--json"])
    document = json.loads(capsys.readouterr().out)
    run = gemm_trace.find_run("matmul", "cuda:sm_90")
    expected = generated_lines(gemm_trace, run, LineQuery(store_c)).source
    text = gemm_trace.text(run.source_sha256).split("\n")
    assert code == ExitCode.OK and document["source"]["lines"] == list(expected) and expected
    assert document["source"]["text"] == [text[n - 1] for n in expected]
    assert "ptx" not in document  # recorded without machine code
    # the T.gemm line reaches the source only carried (docs/source-maps.md, "Carried lines"), on
    # the lines issuing its WGMMA instructions
    code = main(["ir", gemm_trace.path, "-t", "cuda:sm_90", "--line", str(line_of("T.gemm(")), "--json"])
    document = json.loads(capsys.readouterr().out)
    shown = document["source"]["text"]
    assert code == ExitCode.OK and any("wgmma" in row for row in shown)
    assert all("tma_load" not in row for row in shown)


@pytest.mark.parametrize(
    ("annotated", "plain", "expected"),
    [
        (
            'a\n#line 7 "k.py"\nb\nc\n  }\n\n#line 9 "k.py"\nd',
            "a\nb\nc\n  }\n\nd",
            [(2, 0, 7), (3, 0, 7), (6, 0, 9)],
        ),
        ('#line 3 "a\\"b.py"\nx', "x", [(1, 0, 3)]),  # an escaped quote in the file name
        ('#line 3 "u"\nx\n#line 4 "k.py"\ny', "x\ny", [(2, 0, 4)]),  # "u": statements without a span
        ('#line 3 "k.py"\nx', "x ", None),  # not the recorded source byte for byte: no map
        ("x\ny", "x\ny", None),  # no directive at all: nothing to place
        ('#line 3 "k.py"\n#line 0 "k.py"\nx', '#line 0 "k.py"\nx', [(1, 0, 3), (2, 0, 3)]),  # not a directive
    ],
)
def test_place_line_directives(
    annotated: str, plain: str, expected: list[tuple[int, int, int]] | None
) -> None:
    placed = place_line_directives(annotated, plain, "u")
    assert (placed[1] if placed is not None else None) == expected
    if placed is not None and expected:
        assert placed[0][0] in ("k.py", 'a"b.py')


def test_a_hostile_kernel_source_map_shows_no_line_past_the_end(
    gemm_trace: Trace, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    assert gemm_trace.path is not None
    lines = Path(gemm_trace.path).read_text().splitlines()
    for number, line in enumerate(lines):
        if '"by":"line_directives"' in line:
            record = json.loads(line)
            record["lines"] = [[10**6, 0, 38]]
            record["carried"] = record["owned"] = []
            lines[number] = json.dumps(record)
    bad = tmp_path / "far.jsonl"
    bad.write_text("\n".join(lines) + "\n")
    code = main(["ir", str(bad), "-t", "cuda:sm_90", "--line", "38", "--json"])
    assert code == ExitCode.OK and json.loads(capsys.readouterr().out)["source"]["lines"] == []


@pytest.mark.parametrize(("entry", "ok"), [([0, 5], False), ([5, -1], False), ([10**6, 0], True)])
def test_hostile_ptx_line_maps(
    gemm_trace: Trace, capsys: pytest.CaptureFixture[str], tmp_path: Path, entry: list[int], ok: bool
) -> None:
    """A ``machine`` record whose line map has a line below 1 is a trace format error (one line);
    a PTX line past the end of the PTX is dropped."""
    assert gemm_trace.path is not None
    run = gemm_trace.find_run("matmul", "cuda:sm_90")
    store_c = line_of("T.copy(C_local")
    if ok:  # a PTX line past the end, on a source line the T.copy became
        entry = [entry[0], generated_lines(gemm_trace, run, LineQuery(store_c)).source[0]]
    lines = Path(gemm_trace.path).read_text().splitlines()
    footer = next(i for i, line in enumerate(lines) if '"record":"footer"' in line)
    machine = {
        "record": "machine",
        "run": run.run_id,
        "line_maps": [
            {"stage": "ptx", "ir": run.source_sha256, "source": run.source_sha256, "lines": [entry]}
        ],
    }
    lines.insert(footer, json.dumps(machine))
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join(lines) + "\n")
    code = main(["ir", str(bad), "-t", "cuda:sm_90", "--line", str(store_c), "--json"])
    captured = capsys.readouterr()
    if ok:
        assert code == ExitCode.OK and json.loads(captured.out)["ptx"]["lines"] == []
    else:
        assert code == ExitCode.TRACE_FORMAT and len(captured.err.strip().splitlines()) == 1
