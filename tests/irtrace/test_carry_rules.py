"""The lines carried into the kernel source by the rules of docs/source-maps.md, "Carried lines",
checked against the CUDA/HIP text itself: which source lines a Python line should reach is read
from the kernel source (the TMA load naming the copy's descriptor, the WGMMA/MMA instructions, the
pointer a merged shared buffer becomes, the stores into a buffer), with the Python lines found by
``ast`` in the kernel's file, never from our map's rules.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

from irtrace.facts.source_map import kernel_files, kernel_source_map
from irtrace.trace.model import Trace
from irtrace.trace.reader import load_trace
from tests.conftest import EXAMPLES

ROOT = Path(__file__).resolve().parents[2]
RECORDINGS = {
    "gemm_sm90": (EXAMPLES / "gemm.py", "matmul(256, 256, 256)", "cuda:sm_90a"),
    "gemm_sm80": (EXAMPLES / "gemm.py", "matmul(256, 256, 256)", "cuda:sm_80"),
    "gemm_gfx942": (EXAMPLES / "gemm.py", "matmul(256, 256, 256)", "hip:gfx942"),
    "rmsnorm_sm80": (EXAMPLES / "rmsnorm.py", "rms_norm()", "cuda:sm_80"),
    "flash_gfx942": (EXAMPLES / "flash_attention.py", "flash_attention_fwd()", "hip:gfx942"),
    "fp8_sm80": (
        EXAMPLES / "fp8_quant.py",
        "per_token_quant(1 << 10, HIDDEN, out_dtype=determine_fp8_type())",
        "cuda:sm_80",
    ),
}


@pytest.fixture(scope="module")
def traces(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("carry-rules")
    found = {}
    for name, (path, call, target) in RECORDINGS.items():
        output = folder / f"{name}.jsonl"
        command = [sys.executable, "-m", "irtrace.cli", "record", f"{path}::{call}", "-t", target]
        subprocess.run(
            [*command, "--source-map", "-o", str(output)], check=True, cwd=ROOT, capture_output=True
        )
        found[name] = output
    return found


def mapped_source_lines(trace: Trace, line: int) -> tuple[set[int], list[str]]:
    """The kernel source's lines the map names for Python ``line`` (spanned or carried), and the
    source's rows."""
    (run,) = trace.runs
    source_map = kernel_source_map(run)
    assert source_map is not None and run.source_sha256 is not None
    text = trace.text(run.source_sha256)
    assert text is not None
    indexes = {n for n, name in enumerate(source_map.files) if name in kernel_files(run)}
    named = {
        ir for ir, file, py in [*source_map.lines, *source_map.carried] if py == line and file in indexes
    }
    return named, text.split("\n")


def calls(path: Path, attribute: str) -> list[ast.Call]:
    """The ``T.<attribute>(...)`` calls of the kernel's file."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == attribute
    ]


def allocations(path: Path, kind: str) -> dict[int, str]:
    """Line -> name of every ``NAME = T.<kind>(...)``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {
        node.lineno: node.targets[0].id
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign)
        and isinstance(node.targets[0], ast.Name)
        and isinstance(node.value, ast.Call)
        and isinstance(node.value.func, ast.Attribute)
        and node.value.func.attr == kind
    }


def loops_over(path: Path, iterator: str) -> list[ast.For]:
    """The ``for ... in T.<iterator>(...)`` loops of the kernel's file."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.For)
        and isinstance(node.iter, ast.Call)
        and isinstance(node.iter.func, ast.Attribute)
        and node.iter.func.attr == iterator
    ]


def base_name(node: ast.expr) -> str:
    while isinstance(node, ast.Subscript):
        node = node.value
    assert isinstance(node, ast.Name)
    return node.id


@pytest.mark.parametrize("name", ["gemm_sm90", "gemm_sm80", "gemm_gfx942"])
def test_merged_shared_buffers_reach_the_pointer_codegen_declares_for_them(
    traces: dict[str, Path], name: str
) -> None:
    """``tl.MergeSharedMemoryAllocations`` merges the ``T.alloc_shared`` buffers into one dynamic
    allocation; each line maps to exactly the line declaring its pointer into it."""
    trace = load_trace(traces[name])
    shared = allocations(EXAMPLES / "gemm.py", "alloc_shared")
    assert len(shared) == 2
    for line, buffer in shared.items():
        named, rows = mapped_source_lines(trace, line)
        pattern = re.compile(rf"\s*void\* {buffer} = \(\(void\*\)\(\(char\*\)buf_dyn_shmem \+ \d+\)\);")
        expected = {n for n, row in enumerate(rows, start=1) if pattern.fullmatch(row)}
        assert len(expected) == 1, (buffer, rows[:40])
        assert named == expected, (line, [rows[n - 1] for n in sorted(named)])


def test_hopper_pipelined_copies_reach_the_tma_loads_of_their_descriptors(traces: dict[str, Path]) -> None:
    """On ``cuda:sm_90a`` each ``T.copy`` of the pipelined loop becomes a ``tl::tma_load`` of the
    descriptor TileLang names after the copy's global tensor (``A`` -> ``A_desc``): the copy line
    maps to exactly the source lines loading through that descriptor."""
    trace = load_trace(traces["gemm_sm90"])
    copies = [call for call in calls(EXAMPLES / "gemm.py", "copy") if base_name(call.args[0]) in {"A", "B"}]
    assert len(copies) == 2
    for call in copies:
        named, rows = mapped_source_lines(trace, call.lineno)
        tensor = base_name(call.args[0])
        expected = {n for n, row in enumerate(rows, start=1) if f"tl::tma_load({tensor}_desc," in row}
        assert len(expected) == 1
        assert named == expected, (call.lineno, [rows[n - 1] for n in sorted(named)])


@pytest.mark.parametrize(
    ("name", "instruction"), [("gemm_sm90", "tl::wgmma_ss<"), ("gemm_sm80", "tl::mma_sync<")]
)
def test_the_gemm_line_reaches_every_tensor_core_instruction(
    traces: dict[str, Path], name: str, instruction: str
) -> None:
    """``tl.LowerOpaqueBlock`` turns the ``T.gemm`` block into a ``lexical_alloc_scope`` attribute
    around the same allocations: the ``T.gemm`` line maps to every line of the source issuing the
    tensor-core instruction, and to no line outside the braces that hold them."""
    trace = load_trace(traces[name])
    (gemm,) = calls(EXAMPLES / "gemm.py", "gemm")
    named, rows = mapped_source_lines(trace, gemm.lineno)
    issuing = {n for n, row in enumerate(rows, start=1) if instruction in row}
    assert issuing and issuing <= named, sorted(issuing - named)
    for number in named:
        assert not rows[number - 1].strip().startswith(("tl::tma_load", "*(uint")), rows[number - 1]


def test_a_parallel_loop_and_loops_of_one_iteration_reach_the_source(traces: dict[str, Path]) -> None:
    """RMSNorm on ``cuda:sm_80``: the ``T.Parallel`` loop is fused, split and vectorized into a
    vector store of ``B`` (its mapped lines include the store into ``B``); the ``T.serial(blk_m)``
    loops of one iteration become their bodies (their mapped lines each name a buffer their body
    uses, read with ``ast``)."""
    path = EXAMPLES / "rmsnorm.py"
    trace = load_trace(traces["rmsnorm_sm80"])
    (parallel,) = loops_over(path, "Parallel")
    named, rows = mapped_source_lines(trace, parallel.lineno)
    assert any(re.search(r"\(B \+ .*\) = ", rows[n - 1]) for n in named), [rows[n - 1] for n in sorted(named)]
    serial = [loop for loop in loops_over(path, "serial") if ast.unparse(loop.iter) == "T.serial(blk_m)"]
    assert len(serial) == 2
    for loop in serial:
        body_names = {n.id for statement in loop.body for n in ast.walk(statement) if isinstance(n, ast.Name)}
        named, rows = mapped_source_lines(trace, loop.lineno)
        assert named, loop.lineno
        for number in named:
            assert any(re.search(rf"\b{name}\b", rows[number - 1]) for name in body_names) or rows[
                number - 1
            ].strip() in {"}", "{"}, rows[number - 1]


def test_a_vectorized_parallel_loop_reaches_its_vector_store(traces: dict[str, Path]) -> None:
    """Flash attention on ``hip:gfx942``: ``for i in T.Parallel(block_M)`` over ``scores_scale``
    becomes one vector store (``tl.VectorizeLoop``); its line maps to the source line storing
    ``scores_scale``."""
    path = EXAMPLES / "flash_attention.py"
    trace = load_trace(traces["flash_gfx942"])
    loops = [
        loop
        for loop in loops_over(path, "Parallel")
        if len(loop.iter.args) == 1 and ast.unparse(loop.body[0]).startswith("scores_scale[")
    ]
    assert len(loops) == 1
    named, rows = mapped_source_lines(trace, loops[0].lineno)
    assert any(re.search(r"scores_scale\w*( \+ \d+)?\)? = ", rows[n - 1]) for n in named), [
        rows[n - 1] for n in sorted(named)
    ]


def test_a_store_split_by_a_decoupled_cast_reaches_the_store_into_its_buffer(traces: dict[str, Path]) -> None:
    """FP8 quantization on ``cuda:sm_80``: ``tl.DecoupleTypeCast`` splits the store of the quantized
    value into ``Q`` (read with ``ast``: the assignment to ``Q[...]``) into a cast into a local
    buffer and a store of that into ``Q``; the line maps to exactly the source lines storing into
    ``Q``."""
    path = EXAMPLES / "fp8_quant.py"
    tree = ast.parse(path.read_text(encoding="utf-8"))
    (store,) = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign)
        and isinstance(node.targets[0], ast.Subscript)
        and base_name(node.targets[0]) == "Q"
    ]
    trace = load_trace(traces["fp8_sm80"])
    named, rows = mapped_source_lines(trace, store.lineno)
    into_q = {n for n, row in enumerate(rows, start=1) if re.search(r"\(Q \+ .*\) = ", row)}
    assert into_q and named == into_q, [rows[n - 1] for n in sorted(named)]


def test_block_owned_lines_are_told_apart_from_lines_carried_over_a_pass(traces: dict[str, Path]) -> None:
    """After ``tl.LowerTileOp`` the Hopper ``T.gemm`` block owns its WGMMA body (no pass dropped
    the line there): those IR lines are listed as owned and worded so; after ``tl.LowerOpaqueBlock``
    removed the block, its statements are carried over that pass and are not owned."""
    from irtrace.facts.source_map import LineQuery, carried_words, line_through_passes

    trace = load_trace(traces["gemm_sm90"])
    (run,) = trace.runs
    (gemm,) = calls(EXAMPLES / "gemm.py", "gemm")
    found = line_through_passes(trace, run, LineQuery(gemm.lineno))
    lower = next(item for item in found if item.first.record.name == "tl.LowerTileOp")
    assert lower.carried and set(lower.owned) == set(lower.carried)
    assert carried_words(lower.carried, lower.owned).startswith("inside the line's block")
    later = [item for item in found if item.first.record.index > lower.last.record.index and item.carried]
    assert any(set(item.carried) - set(item.owned) for item in later)
    assert carried_words([1, 2], []) == "carried over a pass that dropped the line"


@pytest.mark.parametrize(
    ("owned", "ok"),
    [
        ([[10**6, 0, 36]], True),  # an IR line past the text: shown nowhere
        ([[3, 0, 36]], True),  # an entry not among the carried ones: ignored
        ([[3, 99, 36]], False),  # a file index the record does not have: a format error
    ],
)
def test_hostile_owned_entries_show_nothing_and_raise_nothing(
    traces: dict[str, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    owned: list[list[int]],
    ok: bool,
) -> None:
    """``owned`` entries come from a trace file: a bad one changes no listing and raises no traceback."""
    import json

    from irtrace.base.errors import ExitCode
    from irtrace.cli.main import main

    (gemm,) = calls(EXAMPLES / "gemm.py", "gemm")
    good = main(["ir", str(traces["gemm_sm90"]), "--line", str(gemm.lineno), "--json"])
    expected = json.loads(capsys.readouterr().out)
    rows = traces["gemm_sm90"].read_text(encoding="utf-8").splitlines()
    for number, row in enumerate(rows):
        if '"record":"srcmap"' in row:
            record = json.loads(row)
            if record["files"]:
                record["owned"] = [*record.get("owned", []), *owned]
                rows[number] = json.dumps(record)
    hostile = tmp_path / "hostile.jsonl"
    hostile.write_text("\n".join(rows) + "\n", encoding="utf-8")
    code = main(["ir", str(hostile), "--line", str(gemm.lineno), "--json"])
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    if not ok:
        assert code == ExitCode.TRACE_FORMAT and len(captured.err.strip().splitlines()) == 1
        return
    assert good == code == ExitCode.OK
    document = json.loads(captured.out)
    assert [p["ir_lines"] for p in document["passes"]] == [p["ir_lines"] for p in expected["passes"]]
    assert [p["carried"] for p in document["passes"]] == [p["carried"] for p in expected["passes"]]
    for group in document["passes"]:
        assert set(group["owned"]) <= set(group["carried"])
