"""The lines the author wrote, followed through the passes: checked against the kernel's file read
with Python's ``ast`` (tests/source_lines_oracle.py; ORACLES.md, "Source maps"), not against the
lines TileLang happened to span. The reductions are the case in point: ``T.reduce_*`` is a macro
whose statements TileLang spans with lines of its own ``reduce_op.py``; the frontend hook
(``irtrace.lowering.frontend_lines``) gives them the kernel's calling line.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

from irtrace.trace.reader import load_trace
from tests.conftest import DATA, EXAMPLES
from tests.source_lines_oracle import author_lines, mentions, run_coverage

ROOT = Path(__file__).resolve().parents[2]
KERNELS = {
    "row_reduce": (DATA / "row_reduce.py", "row_reduce()"),
    "gemm": (EXAMPLES / "gemm.py", "matmul(256, 256, 256)"),
    "flash_attention": (EXAMPLES / "flash_attention.py", "flash_attention_fwd()"),
}


def reduction_lines(path: Path) -> set[int]:
    """Lines calling ``T.reduce_*``, read with ``ast``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr.startswith("reduce_")
    }


def call_lines(path: Path) -> set[int]:
    """The oracle's tile-operation call statements and buffer allocations (``X = T.alloc_*``):
    every one of them builds IR, so every one must be mapped at the first pass."""
    text = path.read_text(encoding="utf-8").splitlines()
    return {
        line
        for line in author_lines("\n".join(text))
        if text[line - 1].strip().startswith("T.") or "= T.alloc_" in text[line - 1]
    }


@pytest.fixture(scope="module")
def traces(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("author-lines")
    found = {}
    for name, (path, call) in KERNELS.items():
        output = folder / f"{name}.jsonl"
        command = [sys.executable, "-m", "irtrace.cli", "record", f"{path}::{call}", "-t", "cuda:sm_90a"]
        subprocess.run(
            [*command, "--source-map", "-o", str(output)], check=True, cwd=ROOT, capture_output=True
        )
        found[name] = output
    return found


def test_macro_statements_carry_the_calling_line_and_keep_the_library_frame() -> None:
    """Built in this process: the statements of each ``T.reduce_*`` line carry that line of the
    kernel's file, and their inner frame is a line of TileLang's own package."""
    import tilelang
    import tvm

    from irtrace.lowering import frontend_lines
    from irtrace.lowering.loader import load_kernel_module
    from irtrace.lowering.spans import statement_spans

    assert frontend_lines.install()
    path = DATA / "row_reduce.py"
    module = load_kernel_module(path).module
    func = module.row_reduce()
    from tilelang.ir import get_stmt_span

    package = str(Path(tilelang.__file__).resolve().parent)
    seen: dict[int, set[str]] = {}
    for stmt, file, line in statement_spans(tvm.IRModule({"main": func})):
        assert file is None or "site-packages/tilelang" not in file, (file, line)
        if file is not None and line in reduction_lines(path):
            span = get_stmt_span(stmt)
            inner = frontend_lines.inner_frame(int(span.column))
            assert inner is not None and str(Path(inner[0]).resolve()).startswith(package), inner
            seen.setdefault(line, set()).add(inner[0])
    assert set(seen) == reduction_lines(path) and len(seen) == 2


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_every_tile_call_line_is_mapped_at_the_first_pass(traces: dict[str, Path], name: str) -> None:
    path = KERNELS[name][0]
    trace = load_trace(traces[name])
    (run,) = trace.runs
    found = run_coverage(trace, run, path.read_text(encoding="utf-8"))
    assert not set(found.missing["first"]) & call_lines(path), found.describe()
    assert not [line for stage, line in found.wrong_lines if stage == "first"], found.describe()


@pytest.mark.parametrize("name", ["row_reduce", "flash_attention"])
def test_reductions_reach_lower_tile_op_and_the_source_naming_their_buffers(
    traces: dict[str, Path], name: str
) -> None:
    path = KERNELS[name][0]
    source = path.read_text(encoding="utf-8")
    trace = load_trace(traces[name])
    (run,) = trace.runs
    found = run_coverage(trace, run, source)
    wanted = author_lines(source)
    for line in reduction_lines(path):
        assert line not in found.missing["lower_tile_op"], found.describe()
        assert line not in found.missing["source"], found.describe()
        assert (("lower_tile_op", line)) not in found.wrong_lines
        assert wanted[line], f"line {line} uses no buffer by the oracle"


def test_the_buffer_oracle_reads_names_as_tilelang_renames_them() -> None:
    assert mentions("row_sum_1[i] = 0", {"row_sum"})
    assert not mentions("row_sum_x[i] = 0", {"row_sum"}) and not mentions("T.row_sum", {"row_sum"})


def test_the_trace_keeps_the_macro_line_as_the_inner_frame(traces: dict[str, Path]) -> None:
    """Every inner frame the srcmap records hold is a line of TileLang's package on an IR line
    that the map gives to a ``T.reduce_*`` line of the kernel; ``ir --line FILE:LINE`` finds it."""
    import tilelang

    from irtrace.facts.source_map import LineQuery, line_through_passes

    path = KERNELS["row_reduce"][0]
    trace = load_trace(traces["row_reduce"])
    (run,) = trace.runs
    package = Path(tilelang.__file__).resolve().parent
    checked = 0
    for record in run.source_maps:
        kernel_at = {ir: py for ir, file, py in record.lines if record.files[file] == str(path)}
        for ir, file, line in record.inner:
            assert Path(record.files[file]).resolve().is_relative_to(package), record.files[file]
            assert kernel_at.get(ir) in reduction_lines(path), (ir, line)
            checked += 1
    assert checked, "no inner frame recorded"
    (library, line) = next(
        (record.files[file], line) for record in run.source_maps for _, file, line in record.inner
    )
    found = line_through_passes(trace, run, LineQuery(line, Path(library).name))
    assert found and all(
        "T.reduce" in text or "row_" in text for item in found[:1] for text in item.text_lines
    )


@pytest.mark.parametrize("version", ["0.1.14", "0.1.16", "not-a-version"])
def test_the_hook_leaves_tilelang_alone_outside_its_range(version: str) -> None:
    """In a fresh process told another release is installed: nothing is wrapped."""
    code = (
        "import irtrace.lowering.frontend_lines as f\n"
        f"f.installed_tilelang = lambda: {version!r}\n"
        "import tilelang.ir as ir\n"
        "from tilelang.language.eager import builder as b\n"
        "make, setter, get = ir.make_span, b.Builder.set_fileline, b.Builder.get\n"
        "assert f.install() is False\n"
        "assert ir.make_span is make and b.Builder.set_fileline is setter and b.Builder.get is get\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]


def allocation_lines(path: Path) -> dict[int, str]:
    """Line -> the buffer it allocates, for every ``X = T.alloc_*(...)`` line (read with ``ast``)."""
    found: dict[int, str] = {}
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if (
            isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Call)
            and isinstance(node.value.func, ast.Attribute)
            and node.value.func.attr.startswith("alloc_")
            and isinstance(node.targets[0], ast.Name)
        ):
            found[node.lineno] = node.targets[0].id
    return found


@pytest.mark.parametrize("target", ["cuda:sm_80", "cuda:sm_90a"])
def test_allocations_stay_mapped_after_lower_tile_op(tmp_path: Path, target: str) -> None:
    """Layout inference and warp specialization rebuild the GEMM's shared buffers (new shapes, the
    printer renames them): after ``tl.LowerTileOp`` every ``T.alloc_*`` line still maps, and only
    to IR lines that allocate or declare a buffer of that name (as the printer renames it)."""
    from irtrace.facts.source_map import ir_lines, kernel_files, pass_maps

    path = EXAMPLES / "gemm.py"
    output = tmp_path / "gemm.jsonl"
    command = [sys.executable, "-m", "irtrace.cli", "record", f"{path}::matmul(256, 256, 256)", "-t", target]
    subprocess.run([*command, "--source-map", "-o", str(output)], check=True, cwd=ROOT, capture_output=True)
    trace = load_trace(output)
    (run,) = trace.runs
    item = next(item for item in pass_maps(run) if item.record.name == "tl.LowerTileOp")
    assert item.source_map is not None
    text = trace.text(item.record.ir_after)
    assert text is not None
    rows = text.split("\n")
    allocations = allocation_lines(path)
    assert len(allocations) == 3
    for line, name in allocations.items():
        mapped = ir_lines(item.source_map, kernel_files(run), line, text)
        assert mapped, (target, line)
        for number in mapped:
            assert re.match(
                rf"\s*{name}(_\d+)? = T\.(sblock_alloc_buffer|decl_buffer)\(", rows[number - 1]
            ), (
                line,
                rows[number - 1],
            )


def test_a_buffer_is_carried_by_its_storage_or_as_one_version_per_stage() -> None:
    """``carry_allocations`` on real TVM buffers: the same data variable and name carries; a buffer
    with one leading dimension added, same name, dtype and scope, whose earlier storage is gone,
    carries; another name, or two earlier candidates, carries nothing."""
    import tilelang  # noqa: F401  (TVM as TileLang ships it)
    import tvm

    from irtrace.lowering.carry_rules import Allocation, Storage, carry_allocations
    from irtrace.lowering.spans import _buffer_kind

    def allocation(buffer: object, ir_line: int, span: tuple[str, int] | None = None) -> Allocation:
        return Allocation(ir_line, str(buffer.name), buffer.data, span, _buffer_kind(buffer))  # type: ignore[attr-defined]

    decl = tvm.tirx.decl_buffer
    first = decl((128, 32), "float16", "A_shared", scope="shared.dyn")
    known: Storage = {}
    assert carry_allocations(known, [allocation(first, 3, ("k.py", 28))]) == []
    remapped = decl((1, 16, 256), "float16", "A_shared", data=first.data, scope="shared.dyn")
    assert carry_allocations(dict(known), [allocation(remapped, 9)]) == [(9, "k.py", 28)]
    other = decl((1, 16, 256), "float16", "B_shared", data=first.data, scope="shared.dyn")
    assert carry_allocations(dict(known), [allocation(other, 9)]) == []
    versioned = decl((3, 128, 32), "float16", "A_shared", scope="shared.dyn")
    assert carry_allocations(dict(known), [allocation(versioned, 5)]) == [(5, "k.py", 28)]
    # the earlier storage still allocated: not a new version of it
    assert (
        carry_allocations(dict(known), [allocation(first, 4, ("k.py", 28)), allocation(versioned, 5)]) == []
    )
    wrong_scope = decl((3, 128, 32), "float16", "A_shared", scope="local")
    assert carry_allocations(dict(known), [allocation(wrong_scope, 5)]) == []
    twin = decl((128, 32), "float16", "A_shared", scope="shared.dyn")
    carry_allocations(known, [allocation(twin, 4, ("k.py", 40))])
    assert carry_allocations(known, [allocation(versioned, 5)]) == []  # two candidates


def test_the_kernel_source_names_the_loop_carried_through_the_pipeline(traces: dict[str, Path]) -> None:
    """On Hopper the pipelined loop (read with ``ast``: ``for ko in T.Pipelined``) loses its span in
    warp specialization, so TileLang's ``#line`` directives never name it: the kernel source's map
    lists it as carried, on the loops codegen writes for the producer and the consumer, and never
    among the lines a directive names."""
    from irtrace.facts.source_map import kernel_files

    path = KERNELS["gemm"][0]
    source = path.read_text(encoding="utf-8").splitlines()
    (loop,) = [
        n
        for n in author_lines("\n".join(source))
        if source[n - 1].strip().startswith("for ko in T.Pipelined")
    ]
    trace = load_trace(traces["gemm"])
    (run,) = trace.runs
    (kernel_map,) = [m for m in run.source_maps if m.by == "line_directives"]
    text = trace.text(kernel_map.ir)
    assert text is not None
    files = kernel_files(run)
    kernel = {n for n, name in enumerate(kernel_map.files) if name in files}
    spanned = {ir for ir, file, line in kernel_map.lines if file in kernel and line == loop}
    carried = {ir for ir, file, line in kernel_map.carried if file in kernel and line == loop}
    assert not spanned
    rows = text.split("\n")
    loops = [n for n in carried if re.match(r"\s*for \(int (ko\w*) = 0; \1 < \d+; \+\+\1\) \{", rows[n - 1])]
    assert len(loops) == 2, [rows[n - 1] for n in sorted(carried)]


def test_register_allocations_reach_the_kernel_source_as_their_declarations(traces: dict[str, Path]) -> None:
    """Codegen writes a fragment or local buffer as a declaration (``float acc_o[32];``) from an
    allocation statement without a span (its flattened buffer has none): the kernel source's map
    names each ``T.alloc_fragment`` line of flash attention (read with ``ast``), marked carried,
    and only on lines declaring an array of that name."""
    from irtrace.facts.source_map import kernel_files

    path = KERNELS["flash_attention"][0]
    source = path.read_text(encoding="utf-8").splitlines()
    fragments = {
        line: name for line, name in allocation_lines(path).items() if "alloc_fragment" in source[line - 1]
    }
    assert len(fragments) >= 8
    trace = load_trace(traces["flash_attention"])
    (run,) = trace.runs
    (kernel_map,) = [m for m in run.source_maps if m.by == "line_directives"]
    text = trace.text(kernel_map.ir)
    assert text is not None
    rows = text.split("\n")
    kernel = {n for n, name in enumerate(kernel_map.files) if name in kernel_files(run)}
    named: dict[int, list[int]] = {}
    for ir, file, line in kernel_map.carried:
        if file in kernel and line in fragments:
            named.setdefault(line, []).append(ir)
    assert set(named) == set(fragments), sorted(set(fragments) - set(named))
    for line, numbers in named.items():
        for number in numbers:
            assert re.fullmatch(rf"\s*\w+ {fragments[line]}(_\d+)?\[\d+\];", rows[number - 1]), rows[
                number - 1
            ]
