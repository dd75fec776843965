"""Lines that ran but made no statement, and lines that did not run, checked against oracles
computed here by other routes (ORACLES.md, "Source maps"):

- which lines the frontend ran: Python's own tracing (``sys.settrace`` line events) while the kernel
  is built in a child process that never imports irtrace (TileLang's rewritten code keeps the
  kernel file's name and line numbers);
- which lines read a value line's name: the file's tokens (``tokenize``), not the ``ast`` dataflow
  the code uses;
- that a value line made no statement: TVM's own visitor over the built PrimFunc, reading spans.
"""

from __future__ import annotations

import ast
import functools
import io
import json
import re
import subprocess
import sys
import time
import tokenize
from pathlib import Path

import pytest

from irtrace.base.errors import ExitCode, NotInTraceError
from irtrace.cli.main import main
from irtrace.facts.line_users import binding_readers
from irtrace.facts.source_map import LineQuery, author_lines, input_map, kernel_files, line_through_passes
from irtrace.trace.model import Trace
from irtrace.trace.reader import load_trace
from tests.conftest import EXAMPLES
from tests.source_lines_oracle import run_coverage

ROOT = Path(__file__).resolve().parents[2]
FLASH = EXAMPLES / "flash_attention.py"
RMSNORM = EXAMPLES / "rmsnorm.py"
KERNELS = {
    "flash": (FLASH, "flash_attention_fwd", "flash_attn"),
    "rmsnorm": (RMSNORM, "rms_norm", "rmsnorm"),
}
"""name -> (file, factory, the @T.prim_func inside it)"""

PYTHON_RAN = """
import json, os, sys
path, factory = sys.argv[1], sys.argv[2]
sys.path.insert(0, os.path.dirname(path))
module = __import__(os.path.splitext(os.path.basename(path))[0])
lines = set()
def local(frame, event, arg):
    if event == "line":
        lines.add(frame.f_lineno)
    return local
def calls(frame, event, arg):
    return local if os.path.realpath(frame.f_code.co_filename) == os.path.realpath(path) else None
sys.settrace(calls)
getattr(module, factory)()
sys.settrace(None)
assert "irtrace" not in sys.modules
print(json.dumps(sorted(lines)))
"""


def line_of(path: Path, text: str) -> int:
    return next(n for n, line in enumerate(path.read_text().splitlines(), 1) if text in line)


def body_statements(path: Path, function: str) -> set[int]:
    """The first lines of the statements of ``function``'s body (nested bodies included)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    node = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == function)
    return {inner.lineno for inner in ast.walk(node) if isinstance(inner, ast.stmt) and inner is not node}


@functools.cache
def python_ran(path: Path, factory: str) -> frozenset[int]:
    """The oracle, once per kernel and process: a child builds it under ``sys.settrace``."""
    done = subprocess.run(
        [sys.executable, "-c", PYTHON_RAN, str(path), factory],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    )
    return frozenset(json.loads(done.stdout.strip().splitlines()[-1]))


def token_readers(path: Path, function: str, line: int) -> set[int]:
    """The statements of ``function`` after ``line`` where the name bound on ``line`` occurs, by the
    file's tokens (the kernels here bind each such name once)."""
    text = path.read_text(encoding="utf-8")
    name = text.splitlines()[line - 1].split("=")[0].strip()
    statements = sorted(body_statements(path, function))
    tree = ast.parse(text)
    spans = [
        (n.lineno, n.end_lineno or n.lineno, isinstance(n, ast.stmt) and hasattr(n, "body"))
        for n in ast.walk(tree)
        if isinstance(n, ast.stmt) and n.lineno in statements
    ]
    found = set()
    for token in tokenize.generate_tokens(io.StringIO(text).readline):
        row = token.start[0]
        if token.type != tokenize.NAME or token.string != name or row <= line or row not in range(1, 10**6):
            continue
        # the statement holding the token: the innermost simple statement, or a compound one's header
        holders = [(start, end) for start, end, compound in spans if start <= row <= end and not compound]
        headers = [start for start, _, compound in spans if compound and start == row]
        if holders:
            found.add(max(holders)[0])
        elif headers:
            found.add(headers[0])
    return found


@pytest.fixture(scope="module")
def traces(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Trace]:
    folder = tmp_path_factory.mktemp("ran-lines")
    found = {}
    for name, (path, factory, _) in KERNELS.items():
        output = folder / f"{name}.jsonl"
        command = [sys.executable, "-m", "irtrace.cli", "record", f"{path}::{factory}()", "-t", "cuda:sm_90a"]
        subprocess.run(
            [*command, "--source-map", "-o", str(output)], check=True, cwd=ROOT, capture_output=True
        )
        found[name] = load_trace(output)
    return found


@pytest.mark.parametrize(
    "name",
    # RMSNorm's Python build under settrace is 10 s more of the quick suite: a sweep
    ["flash", pytest.param("rmsnorm", marks=pytest.mark.sweep)],
)
def test_the_lines_the_frontend_ran_are_the_lines_python_ran(traces: dict[str, Trace], name: str) -> None:
    path, factory, function = KERNELS[name]
    run = traces[name].runs[0]
    source_map = input_map(run)
    assert source_map is not None and source_map.ran is not None, "the input map says which lines ran"
    files = kernel_files(run)
    ran = {line for file, line in source_map.ran if source_map.files[file] in files}
    statements = body_statements(path, function)
    assert ran & statements == python_ran(path, factory) & statements
    facts = author_lines(traces[name], run)
    assert set(facts.skipped) == statements - python_ran(path, factory)


def test_flash_attention_causal_lines_did_not_run_and_every_view_says_so(
    traces: dict[str, Trace], capsys: pytest.CaptureFixture[str]
) -> None:
    trace = traces["flash"]
    run = trace.runs[0]
    causal = [
        line_of(FLASH, "for i, j in T.Parallel(block_M, block_N):"),
        line_of(FLASH, "acc_s[i, j] = T.if_then_else("),
    ]
    oracle = python_ran(FLASH, "flash_attention_fwd")
    assert not set(causal) & oracle and line_of(FLASH, "if is_causal:") in oracle
    assert author_lines(trace, run).skipped == tuple(causal)
    for line in causal:
        with pytest.raises(
            NotInTraceError, match=f"line {line} is not part of this instance: the frontend did not run it"
        ):
            line_through_passes(trace, run, LineQuery(line))
        assert trace.path is not None
        assert main(["ir", trace.path, "--line", str(line)]) == ExitCode.NOT_FOUND
        assert f"line {line} is not part of this instance" in capsys.readouterr().err
    assert trace.path is not None
    main(["spans", trace.path, "--format", "json"])
    assert json.loads(capsys.readouterr().out)["runs"][0]["not_run"] == causal
    # a line of the file outside the kernel's functions keeps the plain answer
    main(["ir", trace.path, "--line", str(line_of(FLASH, 'if __name__ == "__main__":'))])
    err = capsys.readouterr().err
    assert "not part of this instance" not in err


@pytest.mark.parametrize(
    ("name", "text"),
    [("flash", "loop_range = T.ceildiv("), ("rmsnorm", "tx = T.get_thread_binding()")],
)
def test_a_value_line_is_followed_through_the_lines_reading_it(
    traces: dict[str, Trace], name: str, text: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path, factory, function = KERNELS[name]
    trace, line = traces[name], line_of(path, text)
    run = trace.runs[0]
    readers = token_readers(path, function, line)
    assert readers, "the oracle finds the lines reading the name"
    facts = author_lines(trace, run)
    assert set(facts.users_of(line)) == readers
    # no statement of the built PrimFunc carries the line (TVM's visitor over the spans)
    assert line not in spanned_lines(path, factory)
    assert trace.path is not None
    assert main(["ir", trace.path, "--line", str(line), "--json"]) == ExitCode.OK
    document = json.loads(capsys.readouterr().out)
    by_reader = {}
    for reader in readers:
        main(["ir", trace.path, "--line", str(reader), "--json"])
        for group in json.loads(capsys.readouterr().out)["passes"]:
            for index in range(group["first_index"], group["last_index"] + 1):
                by_reader.setdefault(index, set()).update(group["ir_lines"])
    assert document["passes"]
    for group in document["passes"]:
        assert set(group["used_by"]) <= readers and group["used_by"]
        for index in range(group["first_index"], group["last_index"] + 1):
            assert set(group["ir_lines"]) == by_reader[index]
    assert main(["ir", trace.path, "--line", str(line)]) == ExitCode.OK
    out = capsys.readouterr().out
    assert "no statement of its own, its value is used by line" in out


def spanned_lines(path: Path, factory: str) -> set[int]:
    """The lines of ``path`` the built PrimFunc's statements carry, by TVM's visitor (a child
    process that never imports irtrace)."""
    code = f"""
import json, os, sys
sys.path.insert(0, {str(path.parent)!r})
import tilelang  # noqa: F401  (sets up tvm)
import tvm
from tilelang.ir import get_stmt_span
module = __import__({path.stem!r})
func = getattr(module, {factory!r})()
lines = set()
def visit(node):
    if isinstance(node, tvm.tirx.Stmt):
        span = get_stmt_span(node)
        if span is not None and os.path.realpath(str(span.source_name.name)) == {str(path.resolve())!r}:
            lines.add(span.line)
tvm.tirx.stmt_functor.post_order_visit(func.body, visit)
assert "irtrace" not in sys.modules
print(json.dumps(sorted(lines)))
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    return set(json.loads(done.stdout.strip().splitlines()[-1]))


def test_coverage_counts_value_and_not_run_lines_only_with_the_oracle(traces: dict[str, Trace]) -> None:
    trace = traces["flash"]
    run = trace.runs[0]
    source = FLASH.read_text(encoding="utf-8")
    agreed = run_coverage(trace, run, source, python_ran=python_ran(FLASH, "flash_attention_fwd"))
    assert agreed.at_first_pass == agreed.lines and agreed.not_run == 2
    unchecked = run_coverage(trace, run, source)  # no oracle: the not-run lines are not followed
    assert unchecked.at_first_pass == agreed.lines - 2 and unchecked.not_run == 0


def test_passdiff_the_report_and_mcp_mark_value_lines(
    traces: dict[str, Trace], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from passdiff.cli import main as passdiff_main
    from tilelang_mcp.line_tool import line_answer

    trace = traces["flash"]
    value, reader = line_of(FLASH, "loop_range = T.ceildiv("), line_of(FLASH, "for k in T.Pipelined(")
    assert trace.path is not None
    passdiff_main(["pass", trace.path, "-p", "tl.LayoutInference", "-f", "json"])
    hunks = json.loads(capsys.readouterr().out)["pass_diffs"][0]["source_lines"]["hunks"]
    marked = [h for h in hunks if str(value) in h["used_by"]]
    assert marked and all(h["used_by"][str(value)] == [reader] and reader in h["b"] for h in marked)
    passdiff_main(["pass", trace.path, "-p", "tl.LayoutInference"])
    assert f"flash_attention.py:{value} (its value is used by line {reader})" in capsys.readouterr().out

    from passviz.cli import main as passviz_main

    page = tmp_path / "report.html"
    assert passviz_main(["html", trace.path, "-o", str(page)]) == 0
    payload = json.loads(re.search(r"class='pymap'[^>]*>(.*?)</script>", page.read_text(), re.S).group(1))  # type: ignore[union-attr]
    assert payload["values"] == {str(value): f"its value is used by line {reader}"}
    assert sorted(payload["not_run"]) == [str(n) for n in author_lines(trace, trace.runs[0]).skipped]
    first = payload["through"][str(value)][0]
    assert payload["maps"][first[6]][str(value)] == payload["maps"][first[6]][str(reader)]

    summary, data = line_answer("t1", trace, trace.runs[0], value, None)
    assert f"its value is used by line {reader}" in summary and data["passes"][0]["used_by"] == [reader]
    with pytest.raises(NotInTraceError, match="not part of this instance"):
        line_answer("t1", trace, trace.runs[0], author_lines(trace, trace.runs[0]).skipped[0], None)


def test_the_hover_shows_value_lines_and_not_run_lines(traces: dict[str, Trace]) -> None:
    """The worker's answer behind the hover (``source_lines``) on the rmsnorm kernel, and the hover
    now opens on the name an assignment binds."""
    from tilelang_lsp.line_ir import tile_operation_at
    from tilelang_lsp.protocol import LineMaps
    from tilelang_lsp.worker.source_lines import source_lines

    text = RMSNORM.read_text(encoding="utf-8")
    line = line_of(RMSNORM, "tx = T.get_thread_binding()")
    assert tile_operation_at(text, line - 1, text.splitlines()[line - 1].index("tx"))
    found = source_lines(LineMaps(path=str(RMSNORM), text=text, kernel="rms_norm", target="cuda:sm_90a"))
    entry = next(item for item in found.lines if item.line == line)
    readers = token_readers(RMSNORM, "rmsnorm", line)
    assert entry.stages and all(stage.used_by and set(stage.used_by) <= readers for stage in entry.stages)
    assert found.not_run == ()  # every statement of rmsnorm ran


def test_binding_readers_is_bounded_on_hostile_text() -> None:
    assert binding_readers("def f(:\n") is None
    nested = (
        "def f():\n"
        + "".join("    " * (d + 1) + f"for i{d} in x:\n" for d in range(90))
        + "    " * 91
        + "y = 1\n"
    )
    found = binding_readers(nested)  # 2**90 walks if loops were re-walked without a bound
    assert found is None or found.readers == {}
    wide = "def f():\n" + "".join(f"    a{i} = {i}\n" for i in range(20_000)) + "    g(a0)\n"
    started = time.perf_counter()
    found = binding_readers(wide)  # each binding copies the state: quadratic without the budget
    assert time.perf_counter() - started < 20
    assert found is None or found.readers == {2: (20_002,)}
    branches = "def f():\n" + "".join(f"    if c:\n        x = {i}\n    g(x)\n" for i in range(3000))
    started = time.perf_counter()
    found = binding_readers(branches)
    assert time.perf_counter() - started < 20
    if found is not None:  # within the budget: each read is reached by every earlier binding
        assert found.readers[3] == tuple(range(4, 4 + 3 * 3000, 3))


def test_an_older_trace_without_ran_claims_nothing(
    traces: dict[str, Trace], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A trace written before ``ran`` existed still reads, and no view claims a line did or did not run."""
    assert traces["flash"].path is not None
    older = tmp_path / "older.jsonl"
    lines = Path(traces["flash"].path).read_text(encoding="utf-8").splitlines()
    stripped = []
    for line in lines:
        record = json.loads(line)
        if record.get("record") == "srcmap":
            record.pop("ran", None)
        stripped.append(json.dumps(record))
    older.write_text("\n".join(stripped) + "\n", encoding="utf-8")
    trace = load_trace(older)
    facts = author_lines(trace, trace.runs[0])
    assert facts.ran is None and not facts.value_users and not facts.skipped
    causal = line_of(FLASH, "acc_s[i, j] = T.if_then_else(")
    assert main(["ir", str(older), "--line", str(causal)]) == ExitCode.NOT_FOUND
    assert "no statement of line" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("fields", "error"),
    [
        ({"ran": [[1, 5]]}, "file index below 1"),
        ({"ran": [[0, 0]]}, "a line from 1"),
        ({"ran": [[0, 5]], "after": 3}, "only for the module the pipeline received"),
    ],
)
def test_a_hostile_ran_field_is_refused(fields: dict[str, object], error: str) -> None:
    import msgspec

    from irtrace.trace.schema import SchemaError, SourceMapRecord

    record = {"record": "srcmap", "run": 0, "ir": "0" * 64, "files": ["k.py"], **fields}
    with pytest.raises((SchemaError, msgspec.ValidationError), match=error):
        msgspec.json.decode(json.dumps(record), type=SourceMapRecord)
