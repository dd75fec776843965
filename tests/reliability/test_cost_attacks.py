"""Each cost attack of issue 48, as the attacker builds it: a few kilobytes of valid trace, an
agent's arguments or a kernel folder that cost a reader memory or time out of proportion. Memory
is measured in a forked child (``cost_growth.measure``); the bounds are an order of magnitude
under what each attack cost before."""

from __future__ import annotations

import asyncio
import gzip
import json
import re
from pathlib import Path

import pytest
from mcp.types import CallToolResult, TextContent

from irtrace.cli.main import main as irtrace_main
from irtrace.lowering.resolve.arguments import read_project_config
from irtrace.trace.model import STATUS_OK, text_sha256
from irtrace.trace.reader import load_trace
from irtrace.trace.schema import KernelRun, PassRecord, SourceMapRecord
from irtrace.trace.writer import TraceWriter
from passviz.cli import main as passviz_main
from tests.reliability.conftest import run_tool
from tests.reliability.cost_growth import KERNEL_FILE, measure
from tilelang_mcp import backend, line_tool
from tilelang_mcp.answers import MAX_STRING_CHARS
from tilelang_mcp.roots import AllowedRoots
from tilelang_mcp.server import TileLangMcp
from tilelang_mcp.session import ServerConfig
from tilelang_mcp.tools import lower_kernel

MB = 1 << 20


def _pass(index: int, before: str, after: str) -> PassRecord:
    return PassRecord(
        index=index,
        name=f"tl.P{index % 5}",
        raw_name=f"tl.P{index % 5}",
        phase="lower",
        pipeline="cuda",
        depth=0,
        parent=None,
        start_s=0.0,
        wall_s=0.0,
        self_s=0.0,
        changed=before != after,
        ir_before=before,
        ir_after=after,
    )


def _run(writer: TraceWriter, kernel_file: str = KERNEL_FILE, spec: str = "k.py::kernel()") -> int:
    kernel_sha = writer.add_text(kernel_file)
    return writer.begin_run(
        KernelRun(
            run_id=0,
            kernel="kernel",
            spec=spec,
            args={},
            target="cuda:sm_90",
            target_detail="cuda",
            pass_configs={},
            tilelang_version="0.1.15",
            host={},
            kernel_file_sha256=kernel_sha,
        )
    ).run_id


def _added(reader: object) -> int:
    """Bytes of resident memory ``reader`` adds over a child that does nothing."""
    idle = measure(lambda: None)
    return measure(reader).peak_bytes - idle.peak_bytes  # type: ignore[arg-type]


def test_many_passes_and_one_source_map_cost_memory_linear_in_the_passes(tmp_path: Path) -> None:
    """12,000 passes and one srcmap: a set of every earlier pass per pass took 1.5 GB."""
    path = tmp_path / "passes.jsonl.gz"
    with TraceWriter(path) as writer:
        run_id = _run(writer)
        text = writer.add_text("x = 1\ny = 2\n")
        for index in range(12_000):
            writer.add_pass(run_id, _pass(index, text, text))
        writer.add_source_map(
            run_id,
            SourceMapRecord(
                run=run_id, after=0, ir=text, statements=1, with_span=1, files=["k.py"], lines=[(1, 0, 5)]
            ),
        )
        writer.end_run(run_id, status=STATUS_OK, error=None, total_s=0.1, input_ir=text, source_sha256=None)
    assert path.stat().st_size < 200_000
    for args in (["spans", str(path), "--all"], ["ir", str(path), "--line", "5"]):
        assert _added(lambda args=args: irtrace_main(args)) < 150 * MB, args


def _many_maps(path: Path, count: int) -> None:
    """One run and ``count`` minimal srcmap records, written as the lines an attacker would."""
    text = "x = 1\n"
    sha = text_sha256(text)
    lines = [
        json.dumps({"record": "header", "format": "irtrace", "schema": 1, "created": "x"}),
        json.dumps({"record": "ir", "sha256": sha, "text": text}),
        json.dumps(
            {
                "record": "run",
                "run": 0,
                "kernel": "k",
                "spec": "k.py::k()",
                "args": {},
                "target": "cuda:sm_90",
                "target_detail": "",
                "pass_configs": {},
                "tilelang_version": "0.1.15",
                "host": {},
            }
        ),
    ]
    lines += [f'{{"record":"srcmap","run":0,"ir":"{sha}"}}'] * count
    lines.append(json.dumps({"record": "end", "run": 0, "status": "ok", "input_ir": sha}))
    path.write_bytes(gzip.compress(("\n".join(lines) + "\n").encode()))


def test_a_hundred_and_fifty_thousand_source_maps_load_show_and_check(tmp_path: Path) -> None:
    """A 52 KB .gz of 150,000 minimal srcmap records hung show and check past 90 s (a tuple
    extended per record); each now finishes well inside a minute."""
    path = tmp_path / "maps.jsonl.gz"
    _many_maps(path, 150_000)
    assert path.stat().st_size < 200_000
    assert len(load_trace(path).runs[0].source_maps) == 150_000
    for args in (["show", str(path)], ["check", str(path), "--baseline", str(path), "-q"]):
        done = run_tool("irtrace", *args, timeout=60)
        assert done.returncode == 0, done.stderr


def _wide_line_trace(path: Path, passes: int, ir_lines: int) -> None:
    """Two IR texts of ``ir_lines`` lines each, every line mapped to Python line 5, and passes
    going back and forth between them: every group of passes holds every line."""
    with TraceWriter(path) as writer:
        run_id = _run(writer)
        texts = [writer.add_text("".join(f"stmt_{k}_{i}()\n" for i in range(ir_lines))) for k in range(2)]
        for index in range(passes):
            writer.add_pass(run_id, _pass(index, texts[index % 2], texts[(index + 1) % 2]))
        for index in range(2):  # each text mapped once, after the first pass that printed it
            writer.add_source_map(
                run_id,
                SourceMapRecord(
                    run=run_id,
                    after=index,
                    ir=texts[(index + 1) % 2],
                    statements=ir_lines,
                    with_span=ir_lines,
                    files=["k.py"],
                    lines=[(i + 1, 0, 5) for i in range(ir_lines)],
                ),
            )
        writer.end_run(
            run_id, status=STATUS_OK, error=None, total_s=0.1, input_ir=texts[0], source_sha256=None
        )


def test_source_line_ir_caps_the_lines_of_each_group_and_is_answered_by_a_child(tmp_path: Path) -> None:
    """An 87 KB trace gave one 424 MB answer: 400 groups were capped, their lines were not."""
    path = tmp_path / "wide.jsonl.gz"
    _wide_line_trace(path, passes=300, ir_lines=3000)
    summary, data = line_tool.answer_in_child(path, "t1", {"line": 5}, memory_mb=2048, timeout_s=120)
    assert "300 group(s)" in summary
    assert all(len(group["ir_lines"]) <= line_tool.MAX_GROUP_LINES for group in data["passes"])
    assert "cut to their first" in data["note"]
    assert len(json.dumps(data)) < 2 * line_tool.MAX_ANSWER_CHARS


def test_the_report_holds_each_distinct_map_once(tmp_path: Path) -> None:
    """Every group of passes repeated its IR lines in the page: a 496 KB trace gave 842 MB."""
    path = tmp_path / "wide.jsonl"
    _wide_line_trace(path, passes=200, ir_lines=2000)
    page = tmp_path / "report.html"
    assert passviz_main(["html", str(path), "-o", str(page)]) == 0
    found = re.search(
        r"<script type='application/json' class='pymap' data-run='run0'>([^<]*)</script>", page.read_text()
    )
    assert found
    data = json.loads(found.group(1))
    entries = data["through"]["5"]
    assert len(entries) >= 100 and all(isinstance(entry[6], int) for entry in entries)
    assert len(data["maps"]) <= 3  # two texts' maps (and the input's)
    assert page.stat().st_size < 5 * MB  # before: each of 200 groups held 2,000 line numbers


def test_passviz_parses_no_huge_kernel_file_or_spec_from_a_trace(tmp_path: Path) -> None:
    """A 3-million-line kernel file (5.4 GB) or a 6 MB spec (2.8 GB) went to ast.parse."""
    path = tmp_path / "huge.jsonl.gz"
    with TraceWriter(path) as writer:
        run_id = _run(writer, kernel_file="x = 1\n" * 3_000_000, spec="k.py::f(" + "1," * 3_000_000 + ")")
        text = writer.add_text("x = 1\n")
        writer.add_pass(run_id, _pass(0, text, text))
        writer.end_run(run_id, status=STATUS_OK, error=None, total_s=0.1, input_ir=text, source_sha256=None)
    assert path.stat().st_size < 200_000
    out = tmp_path / "report.html"
    assert _added(lambda: passviz_main(["html", str(path), "-o", str(out)])) < 300 * MB


def _server(tmp_path: Path) -> TileLangMcp:
    return TileLangMcp(ServerConfig(AllowedRoots([tmp_path]), store=tmp_path))  # no worker starts


def test_an_agents_huge_spec_is_refused_before_parsing_and_errors_are_cut(tmp_path: Path) -> None:
    """A 6 MB spec of literals cost the server 2.8 GB and 33-52 s; its error quoted all 9 MB."""
    (tmp_path / "k.py").write_text("def k(*a): pass\n")
    spec = "k.py::k(" + "1," * 3_000_000 + ")"
    with pytest.raises(backend.JobError, match="characters long"):
        backend.parse_kernel_spec(spec)
    with pytest.raises(backend.JobError, match="characters long"):
        backend.spec_file(spec)
    app = _server(tmp_path)
    # the server only splits the file off: the arguments, even broken ones, reach the job's child
    # unparsed (it parses them, literals only, under the job's limits)
    broken = "k.py::k(" + "(" * 5_000
    assert app.session.kernel_spec(broken) == f"{(tmp_path / 'k.py').resolve()}::k(" + "(" * 5_000
    with pytest.raises(backend.JobError, match="characters long") as direct:  # the tool itself
        asyncio.run(lower_kernel.handle(app.session, lower_kernel.Arguments(spec=spec)))
    assert len(str(direct.value)) < MAX_STRING_CHARS + 100
    called = asyncio.run(app.call_tool("lower_kernel", {"spec": spec}))  # the schema's max_length first
    assert called.isError and "length <= 16384 - at `$.spec`" in _text(called)
    assert len(_text(called)) < MAX_STRING_CHARS + 100
    long_path = asyncio.run(app.call_tool("get_ir", {"pass_name": "x", "trace": "/" + "a" * 20_000}))
    assert long_path.isError and "more characters cut" in _text(long_path)  # every tool's errors are cut
    assert len(_text(long_path)) < MAX_STRING_CHARS + 100


def _text(answer: CallToolResult) -> str:
    (content,) = answer.content
    assert isinstance(content, TextContent)
    return content.text


def test_no_pyproject_above_the_allowed_root_is_read(tmp_path: Path) -> None:
    """read_project_config walked up to /: a parent's pyproject.toml reached MCP answers."""
    (tmp_path / "pyproject.toml").write_text('[tool.tilelang-lsp]\ntarget = "hip"\nargs = {M = 7}\n')
    root = tmp_path / "root"
    root.mkdir()
    kernel = root / "kernel.py"
    kernel.write_text("")
    assert read_project_config(kernel).target == "hip"  # the language server's workspace: read
    bounded = read_project_config(kernel, root)
    assert bounded.path is None and bounded.target is None and not bounded.args


def test_a_full_temporary_folder_is_not_blamed_on_the_trace(tmp_path: Path) -> None:
    """Decompressing a .gz into a full temporary folder said exit 6, "not a readable trace"."""
    path = tmp_path / "big.jsonl.gz"
    texts = [f'{{"record":"ir","sha256":"{i:064x}","text":"{"a" * 2000}"}}\n' for i in range(3000)]
    header = '{"record":"header","format":"irtrace","schema":1,"created":"x"}\n'
    path.write_bytes(gzip.compress((header + "".join(texts)).encode()))
    done = run_tool("irtrace", "show", str(path), file_size_limit=1 << 20)
    assert done.returncode == 9, done.stderr
    assert "temporary folder" in done.stderr and "not a readable trace" not in done.stderr


HELPER_PROGRAM = """
import os, sys, time

def main():
    pid = os.fork()
    if pid == 0:  # a helper that outlives main(): it writes a file every 0.1 s
        while True:
            with open({beat!r}, "a") as beat:
                beat.write(str(os.getpid()) + "\\n")
            time.sleep(0.1)
    time.sleep(0.5)

if __name__ == "__main__":
    main()
"""


def test_a_helper_forked_by_main_dies_with_the_resolver_run(tmp_path: Path) -> None:
    """The resolver killed the pid it forked, not the program's own children: a helper forked by
    main() wrote files 28 s after the MCP call returned."""
    import time

    from irtrace.lowering.resolve.entry_point import run_entry_point

    beat = tmp_path / "beat.txt"
    program = tmp_path / "program.py"
    program.write_text(HELPER_PROGRAM.format(beat=str(beat)))
    run_entry_point(str(program), program.read_text(), [], target="cuda:sm_90", timeout_s=30)
    assert beat.is_file(), "the helper never ran"
    helper = int(beat.read_text().split()[0])
    time.sleep(0.5)
    size = beat.stat().st_size
    time.sleep(0.6)
    assert beat.stat().st_size == size, "the helper still writes after the run ended"
    state = Path(f"/proc/{helper}/stat")
    assert not state.exists() or state.read_text().split(")")[-1].split()[0] in ("Z", "X")
