"""passdiff names the Python line each hunk comes from, checked against the spans TileLang set, read
by another route (ORACLES.md, "Source maps"): a TVM instrument in the same lowering visits the
module before and after chosen passes with TVM's ``post_order_visit``, reads each statement's span,
and finds where the printer puts each statement of a tile operation's line by underlining it
(``tests/irtrace/test_source_map.py``'s helpers). A hunk is attributed to tile operation line L on
a side exactly when one of its changed lines there is where a statement carrying L prints.

Also: a trace without source maps attributes nothing and says once how to get them; hostile
``srcmap`` records (lines past the text, another file) add nothing and raise nothing.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from irtrace.diff.textdiff import EQUAL, grouped_opcodes
from irtrace.trace.model import Trace
from irtrace.trace.reader import load_trace
from irtrace.trace.writer import TraceWriter
from passdiff.cli import main as passdiff_main
from tests.conftest import EXAMPLES
from tests.irtrace.test_source_map import printed_first_lines, tile_op_lines

GEMM = EXAMPLES / "gemm.py"
SPEC = f"{GEMM}::matmul(256, 256, 256)"
TARGET = "cuda:sm_90a"
WATCHED = {
    "tl.ProducerConsumerWarpSpecialized",
    "tl.VerifyBufferInit",
    "tl.LayoutInference",
    "tl.LowerTileOp",
    "tl.LowerOpaqueBlock",
}
"""Passes whose modules the oracle reads, before and after (underlining costs ~10 ms a statement)."""
TILE_LINES = tile_op_lines(GEMM)


@dataclass
class Truth:
    """Where statements carrying each tile operation line print, in one module."""

    text: str
    prints: dict[int, set[int]] = field(default_factory=dict)


@dataclass
class Watched:
    before: dict[str, Truth] = field(default_factory=dict)
    after: dict[str, Truth] = field(default_factory=dict)


def truth_of(mod: Any) -> Truth:
    from tilelang.ir import get_stmt_span
    from tvm.tirx import Stmt
    from tvm.tirx.stmt_functor import post_order_visit

    text = str(mod.script())
    truth = Truth(text)
    found: list[tuple[Any, int]] = []

    def visit(node: Any) -> None:
        if isinstance(node, Stmt):
            span = get_stmt_span(node)
            if span is not None and str(span.source_name.name) == str(GEMM) and span.line in TILE_LINES:
                found.append((node, int(span.line)))

    for _, func in mod.functions.items():
        if hasattr(func, "body"):
            post_order_visit(func.body, visit)
    for stmt, line in found:
        truth.prints.setdefault(line, set()).update(printed_first_lines(mod, stmt, text))
    return truth


def span_oracle(watched: Watched) -> Any:
    from tvm.ir.instrument import pass_instrument

    @pass_instrument
    class SpanOracle:
        def run_before_pass(self, mod: Any, info: Any) -> None:
            if str(info.name) in WATCHED and str(info.name) not in watched.before:
                watched.before[str(info.name)] = truth_of(mod)

        def run_after_pass(self, mod: Any, info: Any) -> None:
            if str(info.name) in WATCHED and str(info.name) not in watched.after:
                watched.after[str(info.name)] = truth_of(mod)

    return SpanOracle()


def record_watched(path: Path, configs: dict[str, Any]) -> tuple[Trace, Watched]:
    from irtrace.lowering.api import RecordRequest, prepare_request
    from irtrace.lowering.recorder import CaptureOptions, LoweringOptions, RunHeader, record_lowering
    from irtrace.targets.specs import parse_spec

    watched = Watched()
    with TraceWriter(path) as writer:
        for prepared in prepare_request(RecordRequest(parse_spec(SPEC), (TARGET,), configs, name="matmul")):
            assert prepared.built is not None, prepared.error
            record_lowering(
                prepared.built.func,
                writer,
                RunHeader("matmul", SPEC, kernel_file_text=prepared.kernel_file_text),
                LoweringOptions(
                    prepared.target,
                    prepared.tvm_target,
                    prepared.pass_configs,
                    instruments=(span_oracle(watched),),
                    capture=CaptureOptions(source_map=True),
                ),
            )
    return load_trace(path), watched


@dataclass
class Recorded:
    default: tuple[Trace, Watched]
    no_ws: tuple[Trace, Watched]


@pytest.fixture(scope="module")
def watched_gemm(tmp_path_factory: pytest.TempPathFactory) -> Recorded:
    folder = tmp_path_factory.mktemp("origins")
    return Recorded(
        record_watched(folder / "default.jsonl", {}),
        record_watched(folder / "no_ws.jsonl", {"tl.disable_warp_specialized": True}),
    )


def expected(truth: Truth, changed: list[int]) -> list[int]:
    """The tile operation lines a statement printed on one of ``changed`` carries."""
    return sorted(line for line, printed in truth.prints.items() if printed & set(changed))


def check_hunks(
    document: dict[str, Any], before: Truth, after: Truth, before_text: str, after_text: str
) -> int:
    """Each hunk's attribution, on tile operation lines, against the oracle; returns how many
    hunk sides name a tile operation line."""
    from irtrace.diff import NormalizeRules, diff_texts

    assert before.text == before_text and after.text == after_text, "the oracle saw other modules"
    diff = diff_texts(before_text, after_text, NormalizeRules())
    groups = grouped_opcodes(diff.opcodes(), 3)
    hunks = document["source_lines"]["hunks"]
    assert len(hunks) == len(groups)
    named = 0
    for hunk, group in zip(hunks, groups, strict=True):
        assert (hunk["old_start"], hunk["new_start"]) == (group[0][1] + 1, group[0][3] + 1)
        old = [i + 1 for tag, i1, i2, _, _ in group if tag != EQUAL for i in range(i1, i2)]
        new = [j + 1 for tag, _, _, j1, j2 in group if tag != EQUAL for j in range(j1, j2)]
        # the oracle reads spans: a line carried over a pass that dropped its span is checked in
        # tests/irtrace/test_source_map.py
        a = [n for n in hunk["a"] if n in TILE_LINES and n not in hunk["a_carried"]]
        b = [n for n in hunk["b"] if n in TILE_LINES and n not in hunk["b_carried"]]
        assert a == expected(before, old), hunk
        assert b == expected(after, new), hunk
        named += bool(expected(before, old)) + bool(expected(after, new))
    return named


def run_passdiff(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = passdiff_main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.parametrize("name", ["tl.LayoutInference", "tl.LowerTileOp", "tl.LowerOpaqueBlock"])
def test_pass_hunks_name_the_lines_whose_statements_changed(
    watched_gemm: Recorded, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    trace, watched = watched_gemm.default
    assert trace.path is not None
    code, out, err = run_passdiff(capsys, "pass", trace.path, "-p", name, "-f", "json")
    assert code == 1, err
    (document,) = json.loads(out)["pass_diffs"]
    record = trace.runs[0].find_pass(name)
    named = check_hunks(
        document, watched.before[name], watched.after[name], trace.ir_before(record), trace.ir_after(record)
    )
    assert named, f"no hunk of {name} names a tile operation line: nothing was checked"


def test_the_renderings_name_the_same_lines(
    watched_gemm: Recorded, capsys: pytest.CaptureFixture[str]
) -> None:
    """The unified diff's hunk headers, the terminal's and the HTML page's hunk headings say the
    lines the JSON says, with the kernel's line beside its number."""
    trace, _ = watched_gemm.default
    assert trace.path is not None
    argv = ("pass", trace.path, "-p", "tl.LowerTileOp")
    _, out, _ = run_passdiff(capsys, *argv, "-f", "json")
    hunks = json.loads(out)["pass_diffs"][0]["source_lines"]["hunks"]
    lines = [sorted(set(h["a"]) | set(h["b"])) for h in hunks]
    _, unified, _ = run_passdiff(capsys, *argv, "-f", "unified")
    headers = [line for line in unified.splitlines() if line.startswith("@@ ")]
    assert [h.partition(" @@")[2].strip() for h in headers] == [
        f"gemm.py:{','.join(map(str, numbers))}" if numbers else "" for numbers in lines
    ]
    # patch skips the note after the @@: the patch still turns the IR before into the IR after
    patch = shutil.which("patch")
    if patch is not None:
        record = trace.runs[0].find_pass("tl.LowerTileOp")
        before = Path(trace.path).with_suffix(".before.py")
        before.write_text(trace.ir_before(record).rstrip("\n") + "\n")
        _, raw, _ = run_passdiff(capsys, *argv, "--raw", "-f", "unified")
        assert any(line.startswith("@@ ") and not line.endswith("@@") for line in raw.splitlines())
        subprocess.run([patch, "-s", str(before)], input=raw, text=True, check=True)
        assert before.read_text() == trace.ir_after(record).rstrip("\n") + "\n"
    _, terminal, _ = run_passdiff(capsys, *argv)
    gemm_line = next(n for n in TILE_LINES if "T.gemm(" in GEMM.read_text().splitlines()[n - 1])
    assert f"python gemm.py:{gemm_line}  T.gemm(A_shared, B_shared, C_local, transpose_B=True)" in terminal
    assert "--source-map" not in terminal
    # a hunk with no kernel line says so for itself only: never a bare verdict under the header
    headings = [line for line in terminal.splitlines() if line.startswith("python")]
    assert "python: none (" not in terminal
    for number, numbers in enumerate(lines, start=1):
        if not numbers:
            assert f"python: none in hunk {number} of {len(lines)} (" in terminal
    assert len(headings) >= len(lines)
    page_path = Path(trace.path).with_suffix(".html")
    run_passdiff(capsys, *argv, "-f", "html", "-o", str(page_path))
    page = page_path.read_text()
    assert page.count('<tr class="py">') == len(hunks) and f"gemm.py:{gemm_line}" in page


def test_run_to_run_hunks_name_each_side_s_lines(
    watched_gemm: Recorded, capsys: pytest.CaptureFixture[str]
) -> None:
    """With warp specialization off, run b never runs tl.ProducerConsumerWarpSpecialized: the
    diff is run a after it against run b after tl.VerifyBufferInit; each side's lines are its own."""
    (trace_a, watched_a), (trace_b, watched_b) = watched_gemm.default, watched_gemm.no_ws
    assert trace_a.path is not None and trace_b.path is not None
    code, out, err = run_passdiff(capsys, "runs", trace_a.path, trace_b.path, "-f", "json")
    assert code == 1, err
    (comparison,) = json.loads(out)["comparisons"]
    first = comparison["first_difference"]
    assert first["label_a"] == "tl.ProducerConsumerWarpSpecialized#1" and first["label_b"] is None
    assert first["compared_with"] == "tl.VerifyBufferInit#1"
    pcws = trace_a.runs[0].find_pass("tl.ProducerConsumerWarpSpecialized")
    verify = trace_b.runs[0].find_pass("tl.VerifyBufferInit")
    named = check_hunks(
        first,
        watched_a.after["tl.ProducerConsumerWarpSpecialized"],
        watched_b.after["tl.VerifyBufferInit"],
        trace_a.ir_after(pcws),
        trace_b.ir_after(verify),
    )
    assert named == 2  # the copies' lines are gone from run a, kept in run b


def _lines(path: str) -> list[str]:
    return Path(path).read_text(encoding="utf-8").splitlines()


def test_a_trace_without_maps_names_no_line_and_says_how(
    watched_gemm: Recorded, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    trace, _ = watched_gemm.default
    assert trace.path is not None
    bare = tmp_path / "bare.jsonl"
    bare.write_text("\n".join(line for line in _lines(trace.path) if '"record":"srcmap"' not in line) + "\n")
    argv = ("pass", str(bare), "-p", "tl.LowerTileOp")
    _, terminal, _ = run_passdiff(capsys, *argv)
    assert "python " not in terminal and terminal.count("--source-map") == 1
    _, unified, _ = run_passdiff(capsys, *argv, "-f", "unified")
    assert all(line.endswith("@@") for line in unified.splitlines() if line.startswith("@@ "))
    _, out, _ = run_passdiff(capsys, *argv, "-f", "json")
    assert json.loads(out)["pass_diffs"][0]["source_lines"] is None


def test_a_negative_line_is_a_one_line_trace_error(
    watched_gemm: Recorded, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    trace, _ = watched_gemm.default
    assert trace.path is not None
    lines = _lines(trace.path)
    number = next(i for i, line in enumerate(lines) if '"record":"srcmap"' in line and '"lines":[[' in line)
    record = json.loads(lines[number])
    record["lines"][0][2] = -36
    lines[number] = json.dumps(record)
    bad = tmp_path / "negative.jsonl"
    bad.write_text("\n".join(lines) + "\n")
    code, _, err = run_passdiff(capsys, "pass", str(bad), "-p", "tl.LowerTileOp")
    assert code == 6 and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err


@pytest.mark.parametrize(
    "hostile",
    [
        pytest.param(
            lambda r: r.update(lines=[[10**6, 0, 36]], carried=[[10**6, 0, 36]]), id="ir-line-past-the-text"
        ),
        pytest.param(
            lambda r: r.update(lines=[[n, 0, 10**6] for n in range(1, 60)], carried=[[1, 0, 10**6]]),
            id="python-line-past-the-file",
        ),
        pytest.param(
            lambda r: r.update(files=["/etc/passwd\n@@ -1 +1 @@" for _ in r["files"]]), id="another-file"
        ),
    ],
)
def test_hostile_maps_add_nothing_and_raise_nothing(
    watched_gemm: Recorded, capsys: pytest.CaptureFixture[str], tmp_path: Path, hostile: Any
) -> None:
    trace, _ = watched_gemm.default
    assert trace.path is not None
    lines = _lines(trace.path)
    for number, line in enumerate(lines):
        if '"record":"srcmap"' in line:
            record = json.loads(line)
            if record["files"]:
                hostile(record)
            lines[number] = json.dumps(record)
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join(lines) + "\n")
    for fmt in ("rich", "unified", "json", "html"):
        code, _, err = run_passdiff(
            capsys, "pass", str(bad), "-p", "tl.LowerTileOp", "-f", fmt, "-o", str(tmp_path / f"out.{fmt}")
        )
        assert code == 1 and "Traceback" not in err, err
        shown = (tmp_path / f"out.{fmt}").read_text()
        assert "passwd" not in shown and "Traceback" not in shown
        if fmt == "json":
            hunks = json.loads(shown)["pass_diffs"][0]["source_lines"]["hunks"]
            assert all(not h["a"] and not h["b"] for h in hunks)
        if fmt == "unified":
            assert all(line.endswith("@@") for line in shown.splitlines() if line.startswith("@@ "))
