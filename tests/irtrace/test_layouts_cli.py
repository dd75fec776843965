"""``irtrace layouts``: the table, one buffer in full, --after/--all, the JSON document against
docs/layouts.md, one-line errors (did you mean, why a run holds no layout), and hostile traces."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from irtrace.base.errors import ExitCode
from irtrace.cli.main import main
from irtrace.facts.layout_eval import LayoutExpressionError, forward_index, forward_thread
from irtrace.facts.layout_view import LAYOUTS_FORMAT
from irtrace.trace.reader import load_trace
from tests.conftest import DATA, ROOT, SMALL_GEMM

RAISING_FACTORY = """
import tilelang.language as T

def broken(N=128):
    raise ValueError("this factory always raises")
"""


@pytest.fixture(scope="module")
def trace_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """GEMM on sm_90 (layouts) and Metal (none inferred), a kernel failing in layout inference, and
    a factory that raises before any pass."""
    folder = tmp_path_factory.mktemp("layouts_cli")
    (folder / "raising.py").write_text(RAISING_FACTORY)
    path = folder / "trace.jsonl"
    specs = [
        SMALL_GEMM,
        f"{DATA / 'bad_layout.py'}::conflicting_layouts()",
        f"{folder / 'raising.py'}::broken()",
    ]
    code = main(["record", *specs, "-t", "cuda:sm_90", "-t", "metal", "-o", str(path), "-q"])
    assert code == ExitCode.LOWERING  # the last two fail, as they are written to
    return path


def layouts(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["layouts", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_table_has_a_row_per_recorded_buffer(trace_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (run,) = load_trace(trace_path).select("matmul", "cuda:sm_90")
    code, out, _ = layouts(capsys, str(trace_path), "-k", "matmul", "-t", "cuda:sm_90")
    assert code == ExitCode.OK
    assert "after tl.LayoutInference" in out
    rows = {line.split()[0]: line.split() for line in out.splitlines()[2:] if line.strip()}
    assert sorted(rows) == sorted(b.buffer for b in run.layouts[0].layouts)
    for layout in run.layouts[0].layouts:
        row = rows[layout.buffer]
        assert layout.scope in row and layout.kind in row
        if layout.kind == "fragment":
            per_thread = 1
            for dim in layout.output_shape:
                per_thread *= int(dim)
            assert str(per_thread) in row and str(layout.threads) in row
        else:
            assert " ".join(row).endswith(str(layout.swizzle))


def test_one_buffer_in_full(trace_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (run,) = load_trace(trace_path).select("matmul", "cuda:sm_90")
    (c_local,) = [b for b in run.layouts[0].layouts if b.buffer == "C_local"]
    # BUFFER may come after the options
    code, out, _ = layouts(capsys, str(trace_path), "-k", "matmul", "C_local", "-t", "cuda:sm_90")
    assert code == ExitCode.OK
    assert c_local.text in out
    assert "A_shared" not in out
    assert all(expr in out for expr in c_local.forward_index)
    assert c_local.forward_thread is not None and c_local.forward_thread in out


def test_after_and_all(trace_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = [str(trace_path), "-k", "matmul", "-t", "cuda:sm_90"]
    code, out, _ = layouts(capsys, *base, "--after", "tl.LowerTileOp")
    assert code == ExitCode.OK and "after tl.LayoutInference" in out  # still in force
    code, _, err = layouts(capsys, *base, "--after", "Simplify")
    assert code == ExitCode.NOT_FOUND
    assert "no layout yet after Simplify" in err and "the first are after tl.LayoutInference" in err
    code, _, err = layouts(capsys, *base, "--after", "tl.NoSuchPass")
    assert code == ExitCode.NOT_FOUND and "ran no pass 'tl.NoSuchPass'" in err
    code, out, _ = layouts(capsys, *base, "--all")
    assert code == ExitCode.OK and out.count("after tl.") == len(
        load_trace(trace_path).find_run("matmul", "cuda:sm_90").layouts
    )


def _json_blocks(text: str) -> list[str]:
    return re.findall(r"```json\n(.*?)```", text, re.S)


def _keys(document: dict) -> tuple[set[str], set[str], set[str], set[str]]:  # type: ignore[type-arg]
    run = document["runs"][0]
    layout = run["layouts"][0]
    return set(document), set(run), set(layout), set(layout["buffers"][0])


def test_json_document_is_the_documented_one(trace_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = layouts(capsys, str(trace_path), "--json", "-t", "cuda:sm_90")
    assert code == ExitCode.OK
    document = json.loads(out)
    assert document["format"] == LAYOUTS_FORMAT
    runs = {run["kernel"]: run for run in document["runs"]}
    assert runs["matmul"]["none_because"] is None
    assert "inferred" not in str(runs["matmul"]["layouts"])
    assert (
        runs["conflicting_layouts"]["layouts"] == []
        and "failed" in runs["conflicting_layouts"]["none_because"]
    )
    # the documented example has exactly the keys the tool prints, at every level
    (example,) = [json.loads(block) for block in _json_blocks((ROOT / "docs" / "layouts.md").read_text())]
    assert example["format"] == LAYOUTS_FORMAT
    assert _keys(example) == _keys({"runs": [runs["matmul"]], "format": LAYOUTS_FORMAT})
    fragment = [b for b in example["runs"][0]["layouts"][0]["buffers"] if b["kind"] == "fragment"]
    shared = [b for b in runs["matmul"]["layouts"][0]["buffers"] if b["kind"] == "layout"]
    assert fragment and set(fragment[0]) == set(shared[0])


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["-k", "matmull"], "kernel 'matmull' is not in the trace; did you mean 'matmul'?"),
        (["-t", "metl"], "target 'metl' is not in the trace; did you mean 'metal'?"),
        (
            ["-k", "matmul", "-t", "cuda:sm_90", "C_locl"],
            "buffer 'C_locl' is not in the layouts shown; did you mean 'C_local'?",
        ),
        (["-k", "matmul", "-t", "metal"], "matmul on metal: tl.LayoutInference inferred none"),
        (["-k", "conflicting_layouts", "-t", "cuda:sm_90"], "tl.LayoutInference failed: "),
        (
            ["-k", "broken", "-t", "cuda:sm_90"],
            "it has no layout pass (lowered or stopped before tl.LayoutInference; it failed",
        ),
    ],
)
def test_one_line_errors(
    trace_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    code, out, err = layouts(capsys, str(trace_path), *args)
    assert code == ExitCode.NOT_FOUND
    assert out == "" and err.count("\n") == 1 and message in err, err


def _rewrite(source: Path, target: Path, change: object) -> None:
    lines = []
    for line in source.read_text().splitlines():
        record = json.loads(line)
        if record.get("record") == "layout":
            record = change(record)  # type: ignore[operator]
            if record is None:
                continue
        lines.append(json.dumps(record))
    target.write_text("\n".join(lines) + "\n")


def test_trace_from_before_layout_records(
    trace_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    old = tmp_path / "old.jsonl"
    _rewrite(trace_path, old, lambda record: None)
    code, _, err = layouts(capsys, str(old), "-k", "matmul", "-t", "cuda:sm_90")
    assert code == ExitCode.NOT_FOUND
    assert "written before irtrace recorded layouts; record it again" in err


def test_hostile_layout_text_stays_data(
    trace_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Expressions that would run code, and terminal escapes, in a trace's layout records: shown
    escaped, refused by the evaluator, and nothing runs."""
    marker = tmp_path / "PWNED"
    payload = f"__import__('pathlib').Path({str(marker)!r}).write_text('x')"

    def poison(record: dict) -> dict:  # type: ignore[type-arg]
        for layout in record["layouts"]:
            layout["forward_index"] = [payload]
            layout["text"] = "\x1b[2J\x1b]0;title\x07" + layout["text"]
            if "forward_thread" in layout:
                layout["forward_thread"] = "1 // 0"
        return record

    hostile = tmp_path / "hostile.jsonl"
    _rewrite(trace_path, hostile, poison)
    code, out, _ = layouts(capsys, str(hostile), "-k", "matmul", "-t", "cuda:sm_90", "--full")
    assert code == ExitCode.OK and "\x1b" not in out and "\x07" not in out
    code, out, _ = layouts(capsys, str(hostile), "-k", "matmul", "-t", "cuda:sm_90", "--json")
    assert json.loads(out)["runs"][0]["layouts"][0]["buffers"][0]["forward_index"] == [payload]
    (run,) = load_trace(hostile).select("matmul", "cuda:sm_90")
    for layout in run.layouts[0].layouts:
        with pytest.raises(LayoutExpressionError, match="unsupported expression"):
            forward_index(layout, [0] * len(layout.forward_vars))
        if layout.forward_thread is not None:
            with pytest.raises(LayoutExpressionError, match="division by zero"):
                forward_thread(layout, [0] * len(layout.forward_vars))
    assert not marker.exists()
