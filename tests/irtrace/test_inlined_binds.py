"""A line whose ``Bind`` a later pass inlined (``s = ko % num_stages`` printed ``s: T.int32 = ko % 3``
until ``tl.Simplify`` substitutes it into ``empty[s]``, ``A_shared[s, ...]``): where the map names no
IR line of its own, its readers' IR stands for it, marked as inlined. Oracles computed here by other
routes (ORACLES.md, "Source maps"): the readers by the file's tokens, the inlining by the IR text
itself (the bind gone, its expression in the readers' statements)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from irtrace.base.errors import ExitCode
from irtrace.cli.main import main
from irtrace.facts.source_map import LineQuery, author_lines, line_through_passes
from irtrace.trace.model import Trace
from irtrace.trace.reader import load_trace
from tests.conftest import EXAMPLES
from tests.irtrace.test_frontend_ran_lines import token_readers

ROOT = Path(__file__).resolve().parents[2]
HOPPER = EXAMPLES / "hopper_tma_gemm.py"
BIND = "s = ko % num_stages"
PRINTED_BIND = "s: T.int32 = ko % 3"
"""how the IR prints the bind (``num_stages`` is 3 in ``hopper_ws_gemm()``)"""
INLINED = "ko % 3"


def bind_lines() -> list[int]:
    return [n for n, line in enumerate(HOPPER.read_text().splitlines(), 1) if BIND in line]


def alloc_line() -> int:
    """An assignment line whose statement is an allocation, read by other lines, never a ``Bind``."""
    return next(
        n for n, line in enumerate(HOPPER.read_text().splitlines(), 1) if "A_shared = T.alloc" in line
    )


def readers_of(line: int) -> set[int]:
    """The statements reading the ``s`` bound on ``line``, by tokens: up to the next binding of ``s``
    (the producer's and the consumer's loops each bind it once)."""
    later = [n for n in bind_lines() if n > line]
    return {n for n in token_readers(HOPPER, "gemm_ws", line) if not later or n < later[0]}


@pytest.fixture(scope="module")
def trace(tmp_path_factory: pytest.TempPathFactory) -> Trace:
    output = tmp_path_factory.mktemp("inlined") / "hopper.jsonl"
    command = [
        sys.executable,
        "-m",
        "irtrace.cli",
        "record",
        f"{HOPPER}::hopper_ws_gemm()",
        "-t",
        "cuda:sm_90a",
    ]
    subprocess.run([*command, "--source-map", "-o", str(output)], check=True, cwd=ROOT, capture_output=True)
    return load_trace(output)


def line_json(trace: Trace, line: int, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    assert trace.path is not None
    assert main(["ir", trace.path, "--line", str(line), "--json"]) == ExitCode.OK
    found: dict[str, Any] = json.loads(capsys.readouterr().out)
    return found


def by_pass(document: dict[str, Any]) -> dict[int, set[int]]:
    found: dict[int, set[int]] = {}
    for group in document["passes"]:
        for index in range(group["first_index"], group["last_index"] + 1):
            found.setdefault(index, set()).update(group["ir_lines"])
    return found


def test_the_oracle_sees_two_binds_each_read_by_the_next_lines() -> None:
    first, second = bind_lines()
    assert readers_of(first) == {
        first + 1,
        first + 2,
        first + 7,
        first + 12,
    }  # the wait, 2 TMA copies, arrive
    assert readers_of(second) == {second + 1, second + 2, second + 3}


@pytest.mark.parametrize("which", [0, 1])
def test_an_inlined_bind_is_followed_through_the_lines_reading_it(
    trace: Trace, which: int, capsys: pytest.CaptureFixture[str]
) -> None:
    line = bind_lines()[which]
    readers = readers_of(line)
    run = trace.runs[0]
    assert set(author_lines(trace, run).inlined_into(line)) == readers
    document = line_json(trace, line, capsys)
    groups = document["passes"]
    own = [g for g in groups if not g["inlined"]]
    inlined = [g for g in groups if g["inlined"]]
    assert own and inlined, "the line shows its bind, then (inlined) its readers"
    assert max(g["last_index"] for g in own) < min(g["first_index"] for g in inlined)
    texts = {record.index: record.ir_after for record in run.passes if record.ir_after is not None}
    for group in own:  # its own IR is the bind, as printed
        assert not group["used_by"]
        assert [text.strip() for text in group["text"]] == [PRINTED_BIND]
    # the first pass after which the line has no IR of its own: by the IR text, the bind is gone
    first = inlined[0]
    text = trace.text(texts[first["first_index"]])
    assert PRINTED_BIND.split(" =")[0] not in text, "the pass removed the bind from the IR"
    assert PRINTED_BIND in trace.text(texts[own[-1]["last_index"]])
    # every IR line shown is a statement of a reader (the map's own entries for the reader lines)
    readers_ir = {reader: by_pass(line_json(trace, reader, capsys)) for reader in readers}
    for group in inlined:
        assert group["used_by"] and set(group["used_by"]) <= readers
        for index in range(group["first_index"], group["last_index"] + 1):
            expected = set().union(*(found.get(index, set()) for found in readers_ir.values()))
            assert set(group["ir_lines"]) == expected
    # and each reader's statements there hold the inlined expression in place of ``s``
    printed = text.split("\n")
    for reader, found in readers_ir.items():
        assert any(INLINED in printed[n - 1] for n in found[first["first_index"]]), reader
    # in the kernel source, the readers' lines stand for it too
    readers_source = set().union(*(set(line_json(trace, r, capsys)["source"]["lines"]) for r in readers))
    assert readers_source and set(document["source"]["lines"]) == readers_source
    assert trace.path is not None
    assert main(["ir", trace.path, "--line", str(line)]) == ExitCode.OK
    out = capsys.readouterr().out
    words = ", ".join(str(r) for r in sorted(readers))
    assert f"inlined: its value is used by lines {words}" in out
    assert "in the kernel source: no line" not in out


def test_a_line_keeping_its_statement_is_not_marked(trace: Trace, capsys: pytest.CaptureFixture[str]) -> None:
    run = trace.runs[0]
    facts = author_lines(trace, run)
    # an assignment whose statement is an allocation, not a Bind: never called inlined
    alloc = next(
        n for n, line in enumerate(HOPPER.read_text().splitlines(), 1) if "A_shared = T.alloc" in line
    )
    assert token_readers(HOPPER, "gemm_ws", alloc), "other lines read the buffer"
    assert facts.inlined_into(alloc) == ()
    for line in (alloc, bind_lines()[0] + 1):  # the allocation, and a reader of ``s``
        found = line_through_passes(trace, run, LineQuery(line), facts=facts)
        assert found and all(not item.used_by and not item.inlined for item in found)
        document = line_json(trace, line, capsys)
        assert all(not g["used_by"] and not g["inlined"] for g in document["passes"])


def test_the_mcp_answer_says_the_bind_was_inlined(trace: Trace) -> None:
    from tilelang_mcp.line_tool import line_answer

    line = bind_lines()[0]
    summary, data = line_answer("t1", trace, trace.runs[0], line, None)
    words = ", ".join(str(r) for r in sorted(readers_of(line)))
    assert f"; inlined: its value is used by lines {words}" in summary
    assert any(group["inlined"] for group in data["passes"])
    assert not any(group["used_by"] for group in data["passes"] if not group["inlined"])


def test_the_hover_says_from_which_pass_the_bind_was_inlined() -> None:
    from tilelang_lsp.line_ir import stands_for_note
    from tilelang_lsp.protocol import LineMaps
    from tilelang_lsp.worker.source_lines import source_lines

    found = source_lines(
        LineMaps(
            path=str(HOPPER), text=HOPPER.read_text(), kernel="hopper_ws_gemm", default_target="cuda:sm_90a"
        )
    )
    line = bind_lines()[0]
    entry = next(item for item in found.lines if item.line == line)
    first = next(stage for stage in entry.stages if stage.inlined)
    assert all(not stage.used_by for stage in entry.stages if stage.last_index < first.first_index)
    words = ", ".join(str(r) for r in sorted(readers_of(line)))
    assert stands_for_note(entry) == (
        f"After `{first.first}` a pass inlined this line's bind: its value is used by lines {words}, "
        "whose IR stands for it there."
    )
    reader = next(item for item in found.lines if item.line == line + 1)
    assert stands_for_note(reader) == ""


def test_a_hostile_input_map_claims_no_inlined_bind(trace: Trace, tmp_path: Path) -> None:
    """An input map naming IR lines past the end of the text, or putting the allocation line on the
    bind's statement too: no traceback, the past-the-end entry adds nothing, and a line whose
    statements are not all binds is never called inlined."""
    assert trace.path is not None
    line, alloc = bind_lines()[0], alloc_line()
    lines = Path(trace.path).read_text().splitlines()
    number = next(i for i, text in enumerate(lines) if '"record":"srcmap"' in text and '"after":null' in text)
    record = json.loads(lines[number])
    bind_ir = next(ir for ir, _, py in record["lines"] if py == line)
    record["lines"] += [[10**6, 0, line], [bind_ir, 0, alloc]]
    lines[number] = json.dumps(record)
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join(lines) + "\n")
    hostile = load_trace(bad)
    facts = author_lines(hostile, hostile.runs[0])
    assert set(facts.inlined_into(line)) == readers_of(line)
    assert facts.inlined_into(alloc) == ()
