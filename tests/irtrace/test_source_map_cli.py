"""``irtrace ir --line`` and ``irtrace spans`` on a real recording, and what they do with bad
input: hostile ``srcmap`` records, bad line queries, traces written before source maps."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from irtrace.base.errors import ExitCode
from irtrace.cli.main import main
from irtrace.facts.source_map import LineQuery, line_through_passes, span_rows
from irtrace.lowering.spans import place_marks
from irtrace.trace.model import Trace

from ..conftest import EXAMPLES

GEMM_FILE = EXAMPLES / "gemm.py"


def line_of(path: Path, text: str) -> int:
    return next(n for n, line in enumerate(path.read_text().splitlines(), start=1) if text in line)


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_ir_line_shows_what_a_tile_op_became_after_each_pass(
    gemm_trace: Trace, capsys: pytest.CaptureFixture[str]
) -> None:
    path = gemm_trace.path
    assert path is not None
    gemm = line_of(GEMM_FILE, "T.gemm(")
    code, out, err = run_cli(capsys, "ir", path, "-k", "matmul", "-t", "cuda:sm_90", "--line", str(gemm))
    assert code == ExitCode.OK, err
    run = gemm_trace.find_run("matmul", "cuda:sm_90")
    found = line_through_passes(gemm_trace, run, LineQuery(gemm))
    headers = [line for line in out.splitlines() if line.startswith("== ")]
    assert len(headers) == len(found) + 1 and len(found) > 3
    # carried to the WGMMA instructions (docs/source-maps.md, "Carried lines")
    assert headers[-1].startswith(f"== line {gemm} in the kernel source (lines ")
    layout = run.find_pass("tl.LayoutInference")
    text = gemm_trace.ir_after(layout).split("\n")
    code, out, _ = run_cli(
        capsys, "ir", path, "-t", "cuda:sm_90", "--line", str(gemm), "-p", "LayoutInference"
    )
    assert code == ExitCode.OK
    (header, *shown) = out.splitlines()
    assert "tl.LayoutInference" in header
    for row in shown:
        number, _, rest = row.partition(" | ")
        assert text[int(number) - 1] == rest and "T.gemm(" in rest

    code, out, _ = run_cli(capsys, "ir", path, "-t", "hip:gfx942", "--line", f"gemm.py:{gemm}", "--json")
    document = json.loads(out)
    assert code == ExitCode.OK and document["format"] == "irtrace-line/1"
    hip = gemm_trace.find_run("matmul", "hip:gfx942")
    for item in document["passes"]:
        lines = gemm_trace.text(item["ir"]).split("\n")
        assert [lines[n - 1] for n in item["ir_lines"]] == item["text"]
    assert {i["first"] for i in document["passes"]} <= {p.name for p in hip.passes} | {
        f"{p.name}#{n}" for p in hip.passes for n in range(1, 9)
    }


def test_spans_names_the_passes_that_drop_lines(
    gemm_trace: Trace, capsys: pytest.CaptureFixture[str]
) -> None:
    path = gemm_trace.path
    assert path is not None
    code, out, _ = run_cli(capsys, "spans", path, "-t", "cuda:sm_90", "--all", "--format", "json")
    assert code == ExitCode.OK
    (document,) = json.loads(out)["runs"]
    rows = span_rows(gemm_trace.find_run("matmul", "cuda:sm_90"))
    assert [row.item.label for row in rows] == [p["pass"] for p in document["passes"]]
    # a line whose span a pass dropped is lost there unless carried; a carried line is lost where
    # the module no longer carries it (against the row of the module the pass received)
    carried_before: set[int] = set()
    for row, shown in zip(rows, document["passes"], strict=True):
        assert set(row.lost) <= set(shown["lost"]) | set(shown["carried"]), shown
        extra = set(shown["lost"]) - set(row.lost)
        assert not extra & (set(row.kernel_lines) | set(shown["carried"])), shown
        assert extra <= carried_before or row.item.record.depth, shown  # nested: its own module
        if not row.item.record.depth:
            carried_before = set(shown["carried"])
    dropping = [p["pass"] for p in document["passes"] if p["lost"]]
    code, out, _ = run_cli(capsys, "spans", path, "-t", "cuda:sm_90")
    assert code == ExitCode.OK and all(name in out for name in dropping), (dropping, out)
    code, out, _ = run_cli(capsys, "spans", path, "--format", "markdown")
    assert code == ExitCode.OK and out.count("| # | pass |") == 2


@pytest.mark.parametrize(
    ("argv", "expected", "fragment"),
    [
        (["--line", "0"], ExitCode.USAGE, "--line takes LINE or FILE:LINE"),
        (["--line", "abc"], ExitCode.USAGE, "--line takes LINE or FILE:LINE"),
        (["--line", "x.py:\x1b[31m3"], ExitCode.USAGE, "--line takes"),
        (["--line", "nowhere.py:12"], ExitCode.NOT_FOUND, "no statement of matmul"),
        (["--line", "12", "--source"], ExitCode.USAGE, "--line goes with -p/--pass or alone"),
        (["--line", "12", "-p", "NoSuchPass"], ExitCode.NOT_FOUND, "is not in matmul"),
        ([], ExitCode.USAGE, "needs one of -p/--pass, --source, --input or --line"),
    ],
)
def test_bad_line_queries_are_one_line_errors(
    gemm_trace: Trace, capsys: pytest.CaptureFixture[str], argv: list[str], expected: int, fragment: str
) -> None:
    assert gemm_trace.path is not None
    code, _, err = run_cli(capsys, "ir", gemm_trace.path, "-t", "cuda:sm_90", *argv)
    assert code == expected and fragment in err and len(err.strip().splitlines()) == 1
    assert "\x1b" not in err and "Traceback" not in err


def _lines(path: str) -> list[str]:
    import gzip

    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as handle:
        return handle.read().splitlines()


def test_a_trace_without_source_maps_reads_and_says_why(
    gemm_trace: Trace, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A trace written before source maps (no ``srcmap`` lines) reads as before; asking for a line
    says to record it again."""
    assert gemm_trace.path is not None
    old = tmp_path / "old.jsonl"
    old.write_text(
        "\n".join(line for line in _lines(gemm_trace.path) if '"record":"srcmap"' not in line) + "\n"
    )
    code, out, _ = run_cli(capsys, "show", str(old), "-t", "cuda:sm_90")
    assert code == ExitCode.OK and "tl.LayoutInference" in out
    code, _, err = run_cli(capsys, "ir", str(old), "-t", "cuda:sm_90", "--line", "36")
    assert code == ExitCode.NOT_FOUND and "no source maps" in err
    code, _, err = run_cli(capsys, "spans", str(old))
    assert code == ExitCode.NOT_FOUND and "record it again" in err


@pytest.mark.parametrize(
    ("change", "fragment"),
    [
        (lambda r: r.update(lines=[[3, 7, 12]]), "file index below"),
        (lambda r: r.update(lines=[[0, 0, 12]]), "lines from 1"),
        (lambda r: r.update(with_span=r["statements"] + 1), "is more than statements"),
        (lambda r: r.update(placed=False), "placed is false"),
        (lambda r: r.update(ir="not a sha"), "srcmap"),
    ],
)
def test_hostile_srcmap_records_are_trace_format_errors(
    gemm_trace: Trace, capsys: pytest.CaptureFixture[str], tmp_path: Path, change: object, fragment: str
) -> None:
    assert gemm_trace.path is not None
    lines = _lines(gemm_trace.path)
    number = next(i for i, line in enumerate(lines) if '"record":"srcmap"' in line and '"lines":[[' in line)
    record = json.loads(lines[number])
    change(record)  # type: ignore[operator]
    lines[number] = json.dumps(record)
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join(lines) + "\n")
    code, _, err = run_cli(capsys, "spans", str(bad))
    assert code == ExitCode.TRACE_FORMAT and fragment in err and len(err.strip().splitlines()) == 1


def test_lines_past_the_end_of_the_text_are_dropped(
    gemm_trace: Trace, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A map naming an IR line the text does not have shows nothing for it, and no traceback."""
    assert gemm_trace.path is not None
    lines = _lines(gemm_trace.path)
    for number, line in enumerate(lines):
        if '"record":"srcmap"' in line:
            record = json.loads(line)
            record["lines"] = [[10**6, 0, 36]] if record["files"] else []
            record["carried"] = record["owned"] = []  # a block's body owned by line 36 names real lines
            lines[number] = json.dumps(record)
    far = tmp_path / "far.jsonl"
    far.write_text("\n".join(lines) + "\n")
    code, _, err = run_cli(capsys, "ir", str(far), "-t", "cuda:sm_90", "--line", "36")
    assert code == ExitCode.NOT_FOUND and "no statement of line 36" in err


def test_marks_in_the_ir_itself_are_not_taken_for_the_printers() -> None:
    """The recorder's marks carry a random nonce: text in the IR that looks like a mark (a
    comment a kernel put there) stays text, and a mark the printer did not put makes no map."""
    plain = "T.evaluate(0)  # irtrace-aaaa:0\nx = 1"
    annotated = "T.evaluate(0)  # irtrace-aaaa:0  # irtrace-bbbb:5\nx = 1"
    assert place_marks(annotated, plain, "irtrace-bbbb:") == [(1, 5)]
    assert place_marks(plain, plain, "irtrace-bbbb:") == []
    assert place_marks(annotated, plain, "irtrace-aaaa:") is None  # the nonce found in the plain text
    moved = "x = 1\nT.evaluate(0)  # irtrace-bbbb:1"
    assert place_marks(moved, "T.evaluate(0)\nx = 1", "irtrace-bbbb:") is None


def test_source_maps_are_stored_only_when_asked(
    gemm_trace: Trace, gemm_no_ws_trace: Trace, capsys: pytest.CaptureFixture[str]
) -> None:
    """``gemm_trace`` was recorded with ``source_map=True``, ``gemm_no_ws_trace`` without: only the
    first holds srcmap records, and ``--line`` on the second says how to get them."""
    assert all(run.source_maps for run in gemm_trace.runs)
    assert not any(run.source_maps for run in gemm_no_ws_trace.runs)
    code, _, err = run_cli(capsys, "ir", str(gemm_no_ws_trace.path), "-t", "cuda:sm_90", "--line", "36")
    assert code == ExitCode.NOT_FOUND and "--source-map" in err, err
