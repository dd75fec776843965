"""End to end against the real server and real tilelang: hints, hover, diagnostics, lenses,
requests and commands. Each test opens the documents it uses (``open_fresh``), so any subset of
the tests, in any order, gives the same result."""

from __future__ import annotations

import asyncio
import re
import tempfile
from pathlib import Path

import pytest
from lsprotocol import types
from pytest_lsp import LanguageClient

from tests.lsp.conftest import DATA, EXAMPLES, change, hints, open_fresh, wait_published, whole_file_server

TRACE_DIR = Path(tempfile.mkdtemp(prefix="tilelang-lsp-traces-"))
client = whole_file_server(trusted=True, extra_targets=["hip:gfx942"], trace_dir=str(TRACE_DIR))
pytestmark = pytest.mark.asyncio(loop_scope="module")


def compiler_facts() -> dict[str, tuple[str, str, str, str | None]]:
    """The GEMM's buffers as TileLang itself reports them after tl.LayoutInference (sm_90a)."""
    import tilelang  # noqa: F401  (makes tvm importable)
    from tvm.tirx.stmt_functor import post_order_visit

    from irtrace.lowering.loader import build_primfunc, find_kernels, load_kernel_module
    from irtrace.lowering.recorder import LoweringOptions, RunHeader, record_lowering
    from irtrace.lowering.tvm_targets import make_tvm_target
    from irtrace.targets.backends import get_target
    from irtrace.targets.specs import KernelSpec
    from irtrace.trace.writer import TraceWriter

    path = EXAMPLES / "gemm.py"
    target = get_target("cuda:sm_90a")
    tvm_target = make_tvm_target(target)
    kernel = next(k for k in find_kernels(load_kernel_module(path)) if k.name == "matmul")
    built = build_primfunc(kernel, KernelSpec(str(path), "matmul", (), {}, True), tvm_target, path)
    recorded = record_lowering(
        built.func,
        TraceWriter(None),
        RunHeader("matmul"),
        LoweringOptions(target, tvm_target, built.pass_configs, stop_after=("tl.LayoutInference",)),
    )
    facts: dict[str, tuple[str, str, str, str | None]] = {}

    def visit(node) -> None:  # type: ignore[no-untyped-def]
        annotations = getattr(node, "annotations", None)
        if annotations is None or "layout_map" not in annotations:
            return
        for buffer, layout in annotations["layout_map"].items():
            threads = per_thread = None
            if type(layout).__name__ == "Fragment":
                threads = int(layout.get_thread_size())
                per_thread = 1
                for dim in layout.get_output_shape():
                    per_thread *= int(dim)
            facts[buffer.name] = (
                str(list(int(d) for d in buffer.shape)),
                str(buffer.dtype),
                buffer.scope(),
                f"{threads} thr, {per_thread} elem/thr" if threads else None,
            )

    for _, func in recorded.stopped_module.functions.items():
        post_order_visit(func.body, visit)
    return facts


async def test_gemm_hints_equal_compiler_facts(client: LanguageClient) -> None:
    uri, version = open_fresh(client, EXAMPLES / "gemm.py")
    published = await wait_published(client, uri, version)
    assert list(published.diagnostics) == []
    got = await hints(client, uri)

    def hint(line: int, character: int, label: str) -> types.InlayHint:
        return types.InlayHint(
            position=types.Position(line=line, character=character),
            label=label,
            kind=types.InlayHintKind.Type,
            padding_left=True,
        )

    assert got == [
        hint(22, 34, "[1024, 1024] float16 global"),
        hint(23, 34, "[1024, 1024] float16 global"),
        hint(24, 34, "[1024, 1024] float16 global"),
        hint(27, 64, "[128, 32] ×3 float16 shared.dyn · swizzle 64B"),
        hint(28, 64, "[128, 32] ×3 float16 shared.dyn · swizzle 64B"),
        hint(29, 71, "[128, 128] float32 local.fragment · 128 thr, 128 elem/thr"),
    ]
    facts = compiler_facts()
    assert facts["A_shared"][:3] == ("[3, 128, 32]", "float16", "shared.dyn")
    assert facts["B_shared"][:3] == ("[3, 128, 32]", "float16", "shared.dyn")
    assert facts["C_local"] == ("[128, 128]", "float32", "local.fragment", "128 thr, 128 elem/thr")
    # The hint's range filter: only the fragment's line.
    ranged = await client.text_document_inlay_hint_async(
        types.InlayHintParams(
            text_document=types.TextDocumentIdentifier(uri=uri),
            range=types.Range(start=types.Position(29, 0), end=types.Position(29, 80)),
        )
    )
    assert list(ranged or []) == [got[-1]]


async def test_hover_shows_layout_on_other_targets(client: LanguageClient) -> None:
    uri, version = open_fresh(client, EXAMPLES / "gemm.py")
    await wait_published(client, uri, version)
    position = types.Position(line=29, character=14)  # C_local
    for _ in range(300):
        hover = await client.text_document_hover_async(
            types.HoverParams(text_document=types.TextDocumentIdentifier(uri=uri), position=position)
        )
        assert hover is not None
        if "| hip:gfx942 | `local.fragment` |" in hover.contents.value:
            break
        await asyncio.sleep(0.1)
    text = hover.contents.value
    assert text.startswith("**C_local** — allocation in `matmul`")
    assert "| **cuda:sm_90a** | `local.fragment` | 128 thr, 128 elem/thr |" in text
    assert "| hip:gfx942 | `local.fragment` |" in text
    assert "Fragment((128, 128) -> (128,)," in text
    assert "arguments from __main__; target `cuda:sm_90a` from default target" in text


async def test_code_lens_summarizes_the_full_lowering(client: LanguageClient) -> None:
    uri, version = open_fresh(client, EXAMPLES / "gemm.py")
    await wait_published(client, uri, version)
    for _ in range(300):
        lenses = await client.text_document_code_lens_async(
            types.CodeLensParams(text_document=types.TextDocumentIdentifier(uri=uri))
        )
        title = lenses[0].command.title if lenses else ""
        if title and "full lowering pending" not in title and "compiling…" not in title:
            break
        await asyncio.sleep(0.1)
    assert [lens.command.command for lens in lenses] == [
        "tilelang.kernelSummary",
        "tilelang.traceKernel",
        "tilelang.showIrAfterPass",
    ]
    title = lenses[0].command.title
    assert title.startswith("cuda:sm_90a · ") and " passes · " in title
    # then nvcc's registers, spills and shared memory (tests/machine_code/test_code_lens.py checks
    # them); for plain sm_90, TileLang 0.1.15's GEMM source needs sm_90a, and the lens says so
    assert re.search(r" ms · (regs \d+ · spills \d+ · smem \d+\.\d KiB|smem 48.0 KiB · nvcc: .+)$", title), (
        title
    )
    assert lenses[0].range == types.Range(start=types.Position(8, 0), end=types.Position(8, 0))
    passes = await client.protocol.send_request_async(
        "tilelang/passes", {"textDocument": {"uri": uri}, "kernel": "matmul"}
    )
    assert "tl.LayoutInference#1" in passes.passes
    ir = await client.protocol.send_request_async(
        "tilelang/irAfterPass",
        {"textDocument": {"uri": uri}, "kernel": "matmul", "passName": "tl.LayoutInference"},
    )
    assert ir.passName == "tl.LayoutInference"
    assert "@T.prim_func" in ir.text and "C_local" in ir.text
    assert ir.uri == "tilelang-ir:/matmul%40cuda%3Asm_90a/024-tl.LayoutInference.py"


@pytest.mark.parametrize(
    ("name", "line", "severity", "code", "message"),
    [
        ("layout_conflict.py", 8, types.DiagnosticSeverity.Error, "layout-inference", "f: (j, i) and (i, j)"),
        (
            "read_before_write.py",
            14,
            types.DiagnosticSeverity.Warning,
            "buffer-init",
            "`C_local` is read before anything writes it",
        ),
        ("race.py", 10, types.DiagnosticSeverity.Warning, "data-race", "is written by multiple threads"),
        ("undefined_name.py", 9, types.DiagnosticSeverity.Error, "frontend", "undefined_name"),
        ("syntax_error.py", 9, types.DiagnosticSeverity.Error, "syntax", "syntax error"),
    ],
)
async def test_diagnostics_at_the_exact_line(
    client: LanguageClient, name: str, line: int, severity: types.DiagnosticSeverity, code: str, message: str
) -> None:
    path = DATA / name
    uri, version = open_fresh(client, path)
    published = await wait_published(client, uri, version)
    found = [d for d in published.diagnostics if d.code == code]
    assert len(found) == 1, published.diagnostics
    diagnostic = found[0]
    text = path.read_text().splitlines()[line - 1]
    indent = len(text) - len(text.lstrip())
    assert diagnostic.range == types.Range(
        start=types.Position(line=line - 1, character=indent),
        end=types.Position(line=line - 1, character=len(text.rstrip())),
    )
    assert (diagnostic.severity, diagnostic.source) == (severity, "tilelang")
    assert message in diagnostic.message


async def test_failed_compile_falls_back_to_source_hints(client: LanguageClient) -> None:
    uri, version = open_fresh(client, DATA / "syntax_error.py")
    await wait_published(client, uri, version)
    got = await hints(client, uri)
    assert (
        types.InlayHint(
            position=types.Position(line=7, character=51),
            label="[64, 32] float16 shared.dyn (source only: does not compile)",
            kind=types.InlayHintKind.Type,
            padding_left=True,
        )
        in got
    )
    uri, version = open_fresh(client, DATA / "layout_conflict.py")
    await wait_published(client, uri, version)
    labels = [h.label for h in await hints(client, uri)]
    assert "[128, 128] float32 local.fragment" in labels  # compiler facts survive a layout failure


async def test_directive_and_project_arguments(client: LanguageClient) -> None:
    uri, version = open_fresh(client, DATA / "directive.py")
    published = await wait_published(client, uri, version)
    missing = [d for d in published.diagnostics if d.code == "arguments"]
    assert missing == []  # needs_config(M): nobody gives M, so it is lowered as the symbol M
    got = await hints(client, uri)
    assert "[64, 32] float16 shared.dyn" in [h.label for h in got]
    assert (18, "[M] float32 global") in [(h.position.line + 1, h.label) for h in got]
    hover = await client.text_document_hover_async(
        types.HoverParams(
            text_document=types.TextDocumentIdentifier(uri=uri), position=types.Position(line=8, character=13)
        )
    )
    assert "`scaled(64, N=32)` — arguments from directive (line 4); target `hip:gfx942` from directive" in (
        hover.contents.value
    )


async def test_fast_edits_publish_only_the_last_version(client: LanguageClient) -> None:
    path = EXAMPLES / "gemm.py"
    base = path.read_text()
    uri, first = open_fresh(client, path)
    await wait_published(client, uri, first)
    client.published.clear()  # type: ignore[attr-defined]
    for version, block_k in enumerate([16, 32, 64, 16, 32, 64, 16, 64], start=first + 1):
        change(client, uri, version, base.replace("block_K=32", f"block_K={block_k}"))
        await asyncio.sleep(0.01)
    await wait_published(client, uri, first + 8)
    await asyncio.sleep(1.0)
    versions = {p.version for p in client.published if p.uri == uri}  # type: ignore[attr-defined]
    assert versions == {first + 8}
    labels = [h.label for h in await hints(client, uri)]
    assert "[128, 64] ×3 float16 shared.dyn · swizzle 128B" in labels


async def execute(client: LanguageClient, command: str, *arguments: object) -> object:
    return await client.workspace_execute_command_async(
        types.ExecuteCommandParams(command=command, arguments=list(arguments))
    )


async def test_kernel_summary_command_says_where_arguments_came_from(client: LanguageClient) -> None:
    path = DATA / "styles" / "autotune_gemm.py"
    uri, version = open_fresh(client, path)
    await wait_published(client, uri, version)
    client.messages.clear()
    result = await execute(client, "tilelang.kernelSummary", uri, "matmul", "cuda:sm_90a")
    message = (
        # the program's own call; the tunables it leaves out come from the first config, as tuning
        # would try it first
        "Analyzed `matmul(M=1024, N=1024, K=1024)` — arguments from __main__; target `cuda:sm_90a` from "
        "default target. From the first @autotune config: block_M=64, block_N=64, block_K=32, "
        "num_stages=2, threads=128."
    )
    assert result == {"kernel": "matmul", "message": message}
    assert [m.message for m in client.messages] == [message]
    # the hover of a buffer ends with the same account
    hover = await client.text_document_hover_async(
        types.HoverParams(
            text_document=types.TextDocumentIdentifier(uri=uri),
            position=types.Position(line=24, character=14),
        )
    )
    assert hover is not None and message in hover.contents.value  # the layout link may follow
    assert await execute(client, "tilelang.kernelSummary", uri, "no_such_kernel", "cuda:sm_90a") is None


async def test_kernel_summary_names_symbolic_sizes(client: LanguageClient) -> None:
    path = DATA / "styles" / "eager_elementwise.py"
    # without its entry point (which passes tensors that give M and N) nothing gives the sizes
    uri, version = open_fresh(client, path, path.read_text().split('if __name__ == "__main__":')[0])
    await wait_published(client, uri, version)
    result = await execute(client, "tilelang.kernelSummary", uri, "elementwise_add", "cuda:sm_90a")
    assert result == {
        "kernel": "elementwise_add",
        "message": (
            "Analyzed `elementwise_add(block_M=32, block_N=32, threads=128, in_dtype=T.float32, "
            "out_dtype=T.float32)` — arguments from call at line 60; target `cuda:sm_90a` from default "
            "target. Symbolic (no value found): M, N."
        ),
    }


async def test_trace_kernel_command_writes_a_trace_of_the_whole_pipeline(client: LanguageClient) -> None:
    from irtrace.trace.reader import load_trace

    path = DATA / "styles" / "eager_gemm.py"
    uri, version = open_fresh(client, path)
    await wait_published(client, uri, version)
    result = await execute(client, "tilelang.traceKernel", uri, "matmul", "hip:gfx942")
    assert isinstance(result, dict) and "error" not in result, result
    output = Path(result["output"])
    assert output.parent == TRACE_DIR and output.name.startswith("eager_gemm-matmul-hip_gfx942-")
    assert [k["name"] for k in result["kernels"]] == ["matmul"]
    trace = load_trace(str(output))
    [run] = trace.runs
    assert (run.kernel, run.target) == ("matmul", "hip:gfx942")
    names = [p.name for p in run.passes]
    assert "tl.LayoutInference" in names and len(names) == result["kernels"][0]["passes"]
    assert run.args["kwargs"] == {
        "M": 1024,
        "N": 1024,
        "K": 1024,
        "block_M": 128,
        "block_N": 128,
        "block_K": 32,
    }
    assert any(f"Trace of matmul written to {output}" in m.message for m in client.messages)


STAGE = re.compile(r"== after (?P<first>\S+)(?: \.\. (?P<last>\S+))? \(passes (?P<a>\d+)-(?P<b>\d+)\)")
BULLET = re.compile(
    r"- after `(?P<first>[^`]+)`(?: … `[^`]+`)? \(IR lines? (?P<lines>[\d, ]+?)(?P<more>, …)?"
    r"(?P<carried>, (?:carried over a pass that dropped the line(?:, or inside the line's block)?"
    r"|inside the line's block, without a span of that line))?\): `(?P<code>[^`]*)`(?: \+\d+)?"
)


async def test_hover_on_a_tile_operation_shows_what_its_line_became(client: LanguageClient) -> None:
    """Hover on ``T.gemm``: the IR lines it names after each pass (in the hover and in the linked
    text of every pass) print the statements carrying that line's span, per TVM's visitor and
    printer watching the same lowering (ORACLES.md, "Source maps")."""
    from urllib.parse import unquote, urlparse

    from tests.lsp.line_oracle import GEMM_FILE, gemm_line_oracle, gemm_source_lines_by_directive

    truth = gemm_line_oracle()
    uri, version = open_fresh(client, GEMM_FILE)
    await wait_published(client, uri, version)
    source_line = GEMM_FILE.read_text().splitlines()[truth.line - 1]
    params = types.HoverParams(
        text_document=types.TextDocumentIdentifier(uri=uri),
        position=types.Position(truth.line - 1, source_line.index("gemm(") + 2),
    )
    for _ in range(240):  # the first hover starts the lowering with maps; it says to hover again
        hover = await client.text_document_hover_async(params)
        assert hover is not None and isinstance(hover.contents, types.MarkupContent)
        docs, _, section = hover.contents.value.partition("\n\n---\n\n")
        if "IR line" in section:
            break
        assert "lowering with source maps" in section, section
        await asyncio.sleep(0.5)
    copy_line = next(
        n for n, text in enumerate(GEMM_FILE.read_text().splitlines(), 1) if "T.copy(C_local" in text
    )
    copy_params = types.HoverParams(
        text_document=types.TextDocumentIdentifier(uri=uri), position=types.Position(copy_line - 1, 14)
    )
    copy_hover = await client.text_document_hover_async(copy_params)  # the same lowering, cached
    # closed at once: its background work (extra targets, full lowering, nvcc) is not this test's
    client.text_document_did_close(types.DidCloseTextDocumentParams(types.TextDocumentIdentifier(uri=uri)))
    assert "gemm" in docs  # TileLang's API docs stay first
    assert section.startswith(f"**Line {truth.line} through the pipeline** — `matmul` on `cuda:sm_90a`")
    link = re.search(r"\[Every pass\]\((file://[^)]+)\)", section)
    assert link is not None
    stages: dict[str, tuple[int, int, set[int]]] = {}
    covered: set[int] = set()
    checked = 0
    for block in Path(unquote(urlparse(link[1]).path)).read_text().split("\n== ")[1:]:
        head, *rows = [row for row in block.split("\n") if row]
        match = STAGE.fullmatch("== " + head)
        assert match is not None, head
        first, last = int(match["a"]), int(match["b"])
        # "N | text" for a statement carrying the line, "N ~ text" for one carried to it
        rows = [row for row in rows if " | " in row or " ~ " in row]
        spanned_rows = [row for row in rows if re.match(r"\s*\d+ \| ", row)]
        numbers = {int(row.split(" | ", 1)[0]) for row in spanned_rows}
        stages[match["first"]] = (first, last, numbers)
        covered |= set(range(first, last + 1))
        ends = (truth.at(first, match["first"]), truth.at(last, match["last"] or match["first"]))
        if None in ends:
            continue  # passes TVM ran inside codegen: numbered after the codegen step here
        for oracle_pass in truth.truths[first : last + 1]:
            assert numbers == oracle_pass.first_lines.get(truth.line, set()), (head, oracle_pass.name)
            printed = oracle_pass.text.split("\n")
            assert all(
                printed[int(n) - 1] == text
                for n, _, text in (re.split(r" ([|~]) ", r, maxsplit=1) for r in rows)
            )
            checked += 1
    assert checked > 10
    assert set(truth.spanned()) - covered <= {i for i in truth.spanned() if truth.truths[i].name == "pass_fn"}
    bullets = [BULLET.fullmatch(row) for row in section.splitlines() if row.startswith("- after")]
    assert len(bullets) >= 3 and all(bullets), section
    layout = next(i for i, t in enumerate(truth.truths) if t.name == "tl.LayoutInference")
    lower_tile_op = next(i for i, t in enumerate(truth.truths) if t.name == "tl.LowerTileOp")
    shown = set()
    for bullet in bullets:
        assert bullet is not None
        first, last, numbers = stages[bullet["first"]]
        shown |= set(range(first, last + 1))
        oracle_pass = truth.at(first, bullet["first"])
        if oracle_pass is None:
            continue
        listed = {int(n) for n in bullet["lines"].split(", ")}
        spanned = oracle_pass.first_lines.get(truth.line, set())
        if bullet["carried"] or bullet["more"]:  # carried lines listed too, or some left out
            assert min(listed) == min(spanned | listed) and (spanned <= listed or bullet["more"])
        else:
            assert listed == spanned
        if not numbers:
            continue
        line = oracle_pass.text.split("\n")[min(numbers) - 1].strip()
        assert line.startswith(bullet["code"].rstrip("…"))
    assert {layout, lower_tile_op} <= shown
    # the generated source: T.copy's is named by its lines, which TileLang's own #line directives
    # put under that Python line; T.gemm's (TileLang's macros' lines) is carried to it
    # (docs/source-maps.md, "Carried lines"), every WGMMA instruction among them
    assert copy_hover is not None and isinstance(copy_hover.contents, types.MarkupContent)

    def source_lines_named(text: str) -> set[int]:
        named = re.search(r"In the CUDA source: lines? ([\d, -]+)\.", text)
        assert named is not None, text
        numbers: set[int] = set()
        for part in named[1].split(", "):
            first, _, last = part.partition("-")
            numbers |= set(range(int(first), int(last or first) + 1))
        return numbers

    numbers = source_lines_named(copy_hover.contents.value)
    source, under = gemm_source_lines_by_directive(copy_line)
    wgmma = {n for n, text in enumerate(source.split("\n"), 1) if "wgmma_ss<" in text}
    assert wgmma and wgmma <= source_lines_named(section)
    stores = {n for n, text in enumerate(source.split("\n"), 1) if re.search(r"\(C \+ .*\) = ", text)}
    assert stores and stores <= numbers <= under
