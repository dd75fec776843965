"""The trace's source maps against the spans TileLang set, read by another route (ORACLES.md,
"Source maps").

A plain TVM instrument in the same lowering visits the module after each pass with TVM's own
``post_order_visit``, reads every statement's span, and finds the printed line of each statement
of a tile operation's Python line by asking TVM's printer to underline that one object (which does
not change the print's layout, unlike the annotations the recorder uses). For every tile operation
line and every pass, the IR lines the trace's map names must be exactly the first printed lines of
the statements carrying that line's span. Prints are held back to the latest moment the recorder's
design allows (``hold_prints``), so spans read late would show.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from irtrace.facts.source_map import (
    LineQuery,
    carried_ir_lines,
    changed_rows,
    ir_lines,
    line_through_passes,
    pass_maps,
    span_rows,
    wanted_files,
)
from irtrace.trace.model import Trace
from irtrace.trace.reader import load_trace
from irtrace.trace.writer import TraceWriter
from tests.conftest import DATA, EXAMPLES
from tests.source_lines_oracle import author_lines, mentions

TARGETS = ("cuda:sm_90a", "hip:gfx942")
KERNELS = {
    "gemm": (EXAMPLES / "gemm.py", "matmul(256, 256, 256)"),
    "flash_attention": (EXAMPLES / "flash_attention.py", "flash_attention_fwd()"),
    "row_reduce": (DATA / "row_reduce.py", "row_reduce()"),
}
AUTHOR_LINES = {name: author_lines(path.read_text(encoding="utf-8")) for name, (path, _) in KERNELS.items()}
"""The buffers each statement line of the kernel's file uses, read with ``ast``."""
TILE_OP = re.compile(r"\s*T\.(copy|gemm|fill|clear|reduce_\w+)\(")
"""A line of the kernel's file that calls a tile operation (read from the file, not the trace)."""
UNDERLINE = re.compile(r"[ ]*\^+")


def tile_op_lines(path: Path) -> set[int]:
    lines = path.read_text(encoding="utf-8").splitlines()
    return {number for number, text in enumerate(lines, start=1) if TILE_OP.match(text)}


@dataclass
class PassTruth:
    """What TVM's objects and printer say about the module after one pass."""

    name: str
    text: str
    first_lines: dict[int, set[int]] = field(default_factory=dict)
    """tile operation line -> first printed lines of the statements whose span is that line"""
    spanned_tile_lines: set[int] = field(default_factory=set)


def printed_first_lines(mod: Any, stmt: Any, plain: str) -> set[int]:
    """Where the printer puts ``stmt``: the first line of each stretch it underlines."""
    kept: list[str] = []
    marked: list[bool] = []
    for line in str(mod.script(obj_to_underline=[stmt])).split("\n"):
        if kept and UNDERLINE.fullmatch(line):
            # carets mark characters above them; TVM prints the carets of a module's last
            # statement after the blank line that follows it, which has no character there
            column = len(line) - len(line.lstrip(" "))
            above = len(kept) - 1
            while above > 0 and len(kept[above]) <= column:
                above -= 1
            marked[above] = True
        else:
            kept.append(line)
            marked.append(False)
    assert "\n".join(kept) == plain, "underlining changed the print"
    return {n + 1 for n in range(len(kept)) if marked[n] and (n == 0 or not marked[n - 1])}


def oracle(kernel_file: str, lines: set[int], truths: list[PassTruth]) -> Any:
    """A TVM instrument reading spans synchronously after each pass (run_before_pass order)."""
    from tilelang.ir import get_stmt_span
    from tvm.ir.instrument import pass_instrument
    from tvm.tirx import Stmt
    from tvm.tirx.stmt_functor import post_order_visit

    @pass_instrument
    class SpanOracle:
        def __init__(self) -> None:
            self.started: list[int] = []
            self.last: Any = None

        def run_before_pass(self, mod: Any, info: Any) -> None:
            self.started.append(len(truths))
            truths.append(PassTruth(str(info.name), ""))

        def run_after_pass(self, mod: Any, info: Any) -> None:
            truth = truths[self.started.pop()]
            truth.text = str(mod.script())
            found: list[Any] = []

            def visit(node: Any) -> None:
                if isinstance(node, Stmt):
                    span = get_stmt_span(node)
                    if span is not None and str(span.source_name.name) == kernel_file and span.line in lines:
                        found.append((node, int(span.line)))

            for _, func in mod.functions.items():
                if hasattr(func, "body"):
                    post_order_visit(func.body, visit)
            last = self.last
            for number, (stmt, line, *_) in enumerate(found):
                truth.spanned_tile_lines.add(line)
                same = last is not None and last[0] == truth.text and len(last[1]) == len(found)
                if same and last[1][number][0].same_as(stmt):  # the very same statement, printed alike
                    firsts = last[1][number][2]
                else:
                    firsts = printed_first_lines(mod, stmt, truth.text)
                found[number] = (stmt, line, firsts)
                truth.first_lines.setdefault(line, set()).update(firsts)
            self.last = (truth.text, found)

    return SpanOracle()


@dataclass
class Lowered:
    trace: Trace
    truths: dict[tuple[str, str], list[PassTruth]]


def lower_watched(path: Path, cases: list[tuple[str, str]], on_the_pipeline: tuple[str, ...] = ()) -> Lowered:
    """Each case lowered once, traced with prints held back, the oracle watching the lowering;
    kernels in ``on_the_pipeline`` print (and read spans) on the pipeline's thread instead, as
    ``irtrace record`` in one process does."""
    from irtrace.lowering.api import RecordRequest, prepare_request
    from irtrace.lowering.recorder import CaptureOptions, LoweringOptions, RunHeader, record_lowering
    from irtrace.targets.specs import parse_spec

    truths: dict[tuple[str, str], list[PassTruth]] = {}
    with TraceWriter(path) as writer:
        for name, (file, call) in KERNELS.items():
            spec = f"{file}::{call}"
            targets = tuple(target for kernel, target in cases if kernel == name)
            if not targets:
                continue
            for prepared in prepare_request(RecordRequest(parse_spec(spec), targets, {}, name=name)):
                assert prepared.built is not None, prepared.error
                found = truths[(name, prepared.target.name)] = []
                record_lowering(
                    prepared.built.func,
                    writer,
                    RunHeader(name, spec),
                    LoweringOptions(
                        prepared.target,
                        prepared.tvm_target,
                        prepared.pass_configs,
                        instruments=(oracle(str(file), tile_op_lines(file), found),),
                        capture=CaptureOptions(
                            hold_prints=True, threaded=name not in on_the_pipeline, source_map=True
                        ),
                    ),
                )
    return Lowered(load_trace(path), truths)


QUICK = [("gemm", "cuda:sm_90a")]
"""Checked by the quick suite (the oracle's underlined prints cost 10 ms per statement and pass)."""
EVERY = [(kernel, target) for kernel in KERNELS for target in TARGETS]
"""Checked by the sweeps (about 90 s on the 2-core machine); the reduction's spans are read on the
pipeline's thread, as ``irtrace record`` in one process reads them, the others' on the print pool."""


@pytest.fixture(scope="module")
def lowered(tmp_path_factory: pytest.TempPathFactory) -> Lowered:
    return lower_watched(tmp_path_factory.mktemp("srcmap") / "quick.jsonl", QUICK)


@pytest.fixture(scope="module")
def every_lowered(tmp_path_factory: pytest.TempPathFactory) -> Lowered:
    return lower_watched(tmp_path_factory.mktemp("srcmap") / "every.jsonl", EVERY, ("row_reduce",))


def check_tile_op_lines(lowered: Lowered, kernel: str, target: str) -> None:
    """For every pass and tile operation line, the map's IR lines are the oracle's."""
    (run,) = lowered.trace.select(kernel, target)
    truths = lowered.truths[(kernel, target)]
    files = wanted_files(run, LineQuery(1))
    assert files == {str(KERNELS[kernel][0])}
    checked = 0
    for item in pass_maps(run):
        record = item.record
        if record.index >= len(truths) or truths[record.index].name != record.raw_name:
            continue  # passes TVM ran inside codegen: numbered after the codegen step here
        truth = truths[record.index]
        text = lowered.trace.ir_after(record)
        assert text == truth.text, f"{record.name}: the trace's text is not the module's"
        assert item.source_map is not None, f"{record.name} has no source map"
        assert item.source_map.placed
        spanned_firsts = set().union(*truth.first_lines.values()) if truth.first_lines else set()
        for line in tile_op_lines(KERNELS[kernel][0]):
            mapped = set(ir_lines(item.source_map, files, line, text, carried=False))
            assert mapped == truth.first_lines.get(line, set()), (record.index, record.name, line)
            checked += bool(mapped)
            # a carried line is no statement with a span (by the oracle), and it prints a buffer the
            # Python line uses (read from the kernel's file with ast, tests/source_lines_oracle.py)
            carried = carried_ir_lines(item.source_map, files, line, text)
            assert not set(carried) & spanned_firsts, (record.name, line, carried)
            buffers = AUTHOR_LINES[kernel].get(line, set())
            # a block's body, or what tl.LowerOpaqueBlock made of a lexical_alloc_scope block
            scopes = {n for n, row in enumerate(text.split("\n"), start=1) if LEXICAL_SCOPE in row}
            owned = block_body_lines(text, truth.first_lines.get(line, set()) | scopes) | scopes
            for ir_line in set(carried) - owned:
                row = text.split("\n")[ir_line - 1]
                # or it allocates a temporary TileLang named after one (C_local_cast, scores_max_clear)
                allocated = re.match(r"\s*(\w+) = T\.(?:alloc_buffer|decl_buffer)\(", row)
                temporary = allocated is not None and any(allocated[1].startswith(f"{b}_") for b in buffers)
                assert mentions(row, buffers) or temporary, (record.name, line, ir_line)
            if set(carried) & owned:  # a block owning its body: together its lines name the buffers
                rows = text.split("\n")
                together = "\n".join(rows[n - 1] for n in set(carried) | mapped)
                assert mentions(together, buffers), (record.name, line)
    assert checked > 20, "too few tile operation lines survive to check anything"


BLOCK_HEADER = re.compile(r"T\.(reads|writes|sblock_attr)\(.*|\w+ = T\.sblock_alloc_buffer\(.*")


LEXICAL_SCOPE = 'T.attr(0, "lexical_alloc_scope", 1)'


def block_body_lines(text: str, firsts: set[int]) -> set[int]:
    """The printed lines of the bodies of the ``with T.sblock(...)`` lines among ``firsts`` (the
    oracle's printed lines of spanned statements), read from the text by indentation, the block's
    header lines (reads, writes, attributes, allocations) left out."""
    rows = text.split("\n")
    body: set[int] = set()
    for first in firsts:
        head = rows[first - 1]
        # what tl.LowerOpaqueBlock makes of a block annotated lexical_alloc_scope: the attribute,
        # with its body indented (``with T.attr(...):``) or, folded, the rest of its scope
        folded = head.strip() == LEXICAL_SCOPE
        if not (
            head.strip().startswith("with T.sblock(") or head.strip() == f"with {LEXICAL_SCOPE}:" or folded
        ):
            continue
        indent = len(head) - len(head.lstrip(" ")) - (1 if folded else 0)
        for number in range(first + 1, len(rows) + 1):
            row = rows[number - 1]
            if not row.strip() or len(row) - len(row.lstrip(" ")) <= indent:
                break
            if BLOCK_HEADER.fullmatch(row.strip()) is None:
                body.add(number)
    return body


def check_survival(lowered: Lowered, kernel: str, target: str) -> None:
    """A tile operation line is ``lost`` at exactly the passes after which the oracle finds no
    statement carrying it while the module the pass received had one."""
    (run,) = lowered.trace.select(kernel, target)
    truths = lowered.truths[(kernel, target)]
    tile_lines = tile_op_lines(KERNELS[kernel][0])
    by_index = {record.index: record for record in run.passes}
    lost_somewhere = False
    for row in span_rows(run):
        record = row.item.record
        if record.index >= len(truths) or truths[record.index].name != record.raw_name:
            continue
        assert set(row.kernel_lines) & tile_lines == truths[record.index].spanned_tile_lines
        received = [
            i
            for i, t in enumerate(truths[: record.index])
            if t.text == lowered.trace.ir_before(by_index[record.index])
        ]
        if received:
            before = truths[received[-1]].spanned_tile_lines
            assert set(row.lost) & tile_lines == before - truths[record.index].spanned_tile_lines
            lost_somewhere = lost_somewhere or bool(row.lost)
    assert lost_somewhere, "no pass drops a tile operation's span: nothing was checked"
    assert changed_rows(span_rows(run))[0].item.record.index == 0


@pytest.mark.parametrize(("kernel", "target"), QUICK)
def test_every_tile_op_line_maps_to_the_statements_carrying_its_span(
    lowered: Lowered, kernel: str, target: str
) -> None:
    check_tile_op_lines(lowered, kernel, target)


@pytest.mark.parametrize(("kernel", "target"), QUICK)
def test_the_survival_table_names_the_pass_that_drops_a_line(
    lowered: Lowered, kernel: str, target: str
) -> None:
    check_survival(lowered, kernel, target)


@pytest.mark.sweep
@pytest.mark.parametrize(("kernel", "target"), EVERY)
def test_source_maps_of_gemm_flash_attention_and_a_reduction_on_cuda_and_hip(
    every_lowered: Lowered, kernel: str, target: str
) -> None:
    check_tile_op_lines(every_lowered, kernel, target)
    check_survival(every_lowered, kernel, target)


def test_line_through_passes_shows_the_ir_lines_of_each_pass(lowered: Lowered) -> None:
    (run,) = lowered.trace.select("gemm", "cuda:sm_90a")
    gemm_line = next(
        n
        for n in tile_op_lines(EXAMPLES / "gemm.py")
        if "T.gemm(" in (EXAMPLES / "gemm.py").read_text().splitlines()[n - 1]
    )
    found = line_through_passes(lowered.trace, run, LineQuery(gemm_line))
    truths = lowered.truths[("gemm", "cuda:sm_90a")]
    assert found
    by_index = {record.index: record for record in run.passes}
    for item in found:
        truth = truths[item.first.record.index]
        # spanned lines are the oracle's; carried ones here are the body of the gemm's block or,
        # once tl.LowerOpaqueBlock removed it, of the lexical_alloc_scope attribute holding the WGMMA
        spanned = set(item.lines) - set(item.carried)
        assert spanned == truth.first_lines.get(gemm_line, set())
        rows = truth.text.split("\n")
        scopes = {n for n, row in enumerate(rows, start=1) if LEXICAL_SCOPE in row}
        scopes = {n for n in scopes if any("wgmma" in rows[b - 1] for b in block_body_lines(truth.text, {n}))}
        assert set(item.carried) <= block_body_lines(truth.text, spanned | scopes) | scopes
        shown = truth.text.split("\n")
        assert list(item.text_lines) == [shown[n - 1] for n in item.lines]
        # every pass a group spans prints the line there (a nested pass in between that lost it
        # splits the group), except passes TVM ran inside codegen, numbered differently here
        for index in range(item.first.record.index, item.last.record.index + 1):
            if index < len(truths) and truths[index].name == by_index[index].raw_name:
                assert truths[index].first_lines.get(gemm_line, set()) == spanned, by_index[index].name
    assert "T.gemm(" in found[0].text_lines[0]


def test_the_pipelined_copies_are_carried_from_warp_specialization_to_lower_tile_op(
    lowered: Lowered, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The Hopper GEMM's ``T.copy`` lines lose their spans in ``tl.ProducerConsumerWarpSpecialized``,
    which turns each copy into a ``T.tma_copy`` of the same source region: the map carries them,
    marked, to the statement that prints that region (read from the oracle's own prints), and the
    span table says they were lost only where that statement is gone (``tl.LowerTileOp``)."""
    import json

    from irtrace.cli.main import main

    (run,) = lowered.trace.select("gemm", "cuda:sm_90a")
    truths = lowered.truths[("gemm", "cuda:sm_90a")]
    source = KERNELS["gemm"][0].read_text(encoding="utf-8").splitlines()
    copies = [
        n
        for n in AUTHOR_LINES["gemm"]
        if source[n - 1].strip().startswith("T.copy(") and "ko" in source[n - 1]
    ]
    assert len(copies) == 2
    files = wanted_files(run, LineQuery(1))
    ws = run.find_pass("tl.ProducerConsumerWarpSpecialized")
    layout = run.find_pass("tl.LayoutInference")
    maps = {item.record.index: item for item in pass_maps(run)}
    for line in copies:
        for record in (ws, layout):
            item = maps[record.index]
            assert item.source_map is not None
            text = lowered.trace.ir_after(record)
            assert ir_lines(item.source_map, files, line, text, carried=False) == []
            (carried,) = carried_ir_lines(item.source_map, files, line, text)
            printed = text.split("\n")[carried - 1].strip()
            assert printed.startswith("T.tma_copy(T.region(")
            # the same source region as the T.copy the oracle printed for this line before the pass
            assert line not in truths[record.index].first_lines  # by the oracle: no span of it
            region = printed.split("T.region(", 1)[1].split(")", 1)[0]
            earlier = [t for t in truths[: ws.index] if line in t.first_lines]
            assert earlier, "no module before the pass printed the copy"
            first = min(earlier[-1].first_lines[line])
            assert region in earlier[-1].text.split("\n")[first - 1]
    trace_path = lowered.trace.path
    assert trace_path is not None
    assert main(["spans", trace_path, "-k", "gemm", "-t", "cuda:sm_90a", "--all", "--format", "json"]) == 0
    rows = {row["pass"]: row for row in json.loads(capsys.readouterr().out)["runs"][0]["passes"]}
    (loop,) = [n for n in AUTHOR_LINES["gemm"] if source[n - 1].strip().startswith("for ko in T.Pipelined(")]
    assert rows["tl.ProducerConsumerWarpSpecialized"]["carried"] == sorted([*copies, loop])
    assert not {*copies, loop} & set(rows["tl.ProducerConsumerWarpSpecialized"]["lost"])
    # tl.LowerTileOp lowers each T.tma_copy into one T.tma_load whose descriptor names the copy's
    # global buffer (read from the kernel's line with ast: A or B), and keeps the split loops
    lower = run.find_pass("tl.LowerTileOp")
    item = maps[lower.index]
    assert item.source_map is not None
    text = lowered.trace.ir_after(lower)
    assert not {*copies, loop} & set(rows["tl.LowerTileOp"]["lost"])
    for line in copies:
        (carried,) = carried_ir_lines(item.source_map, files, line, text)
        printed = text.split("\n")[carried - 1].strip()
        assert line not in truths[lower.index].first_lines
        (global_buffer,) = AUTHOR_LINES["gemm"][line] - {"A_shared", "B_shared"}
        assert (
            printed.startswith("T.tma_load(T.create_tma_descriptor(") and f" {global_buffer}.data," in printed
        )
    loops = carried_ir_lines(item.source_map, files, loop, text)
    assert len(loops) == 2 and all(text.split("\n")[n - 1].strip() == "for ko in range(8):" for n in loops)
    assert (
        main(
            [
                "ir",
                trace_path,
                "-k",
                "gemm",
                "-t",
                "cuda:sm_90a",
                "--line",
                str(copies[0]),
                "-p",
                "tl.LayoutInference",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "carried:" in out and " ~ " in out


def test_a_gemm_lowered_into_a_block_owns_the_block_body(lowered: Lowered) -> None:
    """After ``tl.LowerTileOp`` on Hopper, ``T.gemm`` is one ``with T.sblock("_gemm_ssr")`` spanned
    with the call's line (by the oracle) and a body without spans of the kernel's file: the map
    names, marked as carried, exactly the block's body lines (read by indentation from the text),
    and those name the buffers the Python line uses (read with ``ast``)."""
    (run,) = lowered.trace.select("gemm", "cuda:sm_90a")
    truths = lowered.truths[("gemm", "cuda:sm_90a")]
    source = KERNELS["gemm"][0].read_text(encoding="utf-8").splitlines()
    (line,) = [n for n in AUTHOR_LINES["gemm"] if source[n - 1].strip().startswith("T.gemm(")]
    record = run.find_pass("tl.LowerTileOp")
    item = next(item for item in pass_maps(run) if item.record.index == record.index)
    assert item.source_map is not None
    text = lowered.trace.ir_after(record)
    firsts = truths[record.index].first_lines[line]
    body = block_body_lines(text, firsts)
    assert len(body) > 5, "the oracle found no block for the gemm line"
    files = wanted_files(run, LineQuery(1))
    assert set(ir_lines(item.source_map, files, line, text, carried=False)) == firsts
    assert set(carried_ir_lines(item.source_map, files, line, text)) == body
    rows = text.split("\n")
    assert mentions("\n".join(rows[n - 1] for n in body), AUTHOR_LINES["gemm"][line])
    assert not mentions("\n".join(rows[n - 1] for n in firsts), AUTHOR_LINES["gemm"][line])
