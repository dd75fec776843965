"""Each tool of ``tilelang-mcp`` on the bundled GEMM, against an oracle computed in the test.

The oracle is the one the CLI tests use (``ORACLES.md``): ``tilelang.lower`` in this process under
a plain TVM instrument that prints ``str(mod)`` before and after every pass; the ``layout_map``
read right after layout inference; ``nvcc -Xptxas -v`` on a plain lowering's kernel source. One
server serves the module; every call goes through the MCP SDK's client over stdio.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from ..conftest import DATA as TEST_DATA
from ..conftest import EXAMPLES
from ..lsp.oracle import CompilerBuffer, compiler_buffers
from ..passdiff.oracle import OraclePass, load_kernel_module, oracle_passes
from .conftest import GEMM, McpServer

NO_WS = {"tl.disable_warp_specialized": True}
TOOLS = {
    "list_targets",
    "lower_kernel",
    "get_ir",
    "diff_passes",
    "diff_lowerings",
    "buffer_facts",
    "diagnostics",
    "machine_code",
    "coverage_matrix",
    "check_trace",
    "source_line_ir",
}


def gemm() -> Any:
    """The GEMM as TileLang builds it, from the file, without irtrace."""
    return load_kernel_module(EXAMPLES / "gemm.py").matmul(256, 256, 256)


@pytest.fixture(scope="module")
def oracle_sm90() -> list[OraclePass]:
    return oracle_passes(gemm(), "cuda:sm_90")


@pytest.fixture(scope="module")
def oracle_no_ws() -> list[OraclePass]:
    """Without warp specialization: tl.ProducerConsumerWarpSpecialized and its helpers do not run."""
    return oracle_passes(gemm(), "cuda:sm_90", NO_WS)


@pytest.fixture(scope="module")
def oracle_ascend() -> list[OraclePass]:
    """The GEMM is no Ascend kernel: its pipeline fails in a semantic check."""
    return oracle_passes(gemm(), "ascend")


@pytest.fixture(scope="module")
def sm90(mcp_server: McpServer) -> dict[str, Any]:
    """``lower_kernel`` of the GEMM for cuda:sm_90."""
    return mcp_server.ok("lower_kernel", spec=GEMM, targets=["cuda:sm_90"])


def lowered_rows(answer: dict[str, Any], run: int = 0) -> list[dict[str, Any]]:
    """The pass rows of a run, without the recorder's own codegen step (no pass of TVM's)."""
    return [row for row in answer["runs"][run]["pass_list"] if row.get("phase") != "codegen"]


def read_all_ir(server: McpServer, **arguments: Any) -> str:
    """A text read page by page with ``offset``, as an agent would."""
    text, offset = "", 0
    while True:
        answer = server.ok("get_ir", offset=offset, limit=25, **arguments)
        text += answer["text"]
        offset += answer["lines"]
        if offset >= answer["total_lines"]:
            return text


def test_tool_list(mcp_server: McpServer) -> None:
    listed = mcp_server.run(mcp_server.session.list_tools())  # type: ignore[union-attr]
    tools = {tool.name: tool for tool in listed.tools}
    assert set(tools) == TOOLS
    for tool in tools.values():
        assert tool.description and len(tool.description) > 40
        assert tool.inputSchema["type"] == "object"
    assert tools["lower_kernel"].inputSchema["required"] == ["spec"]
    assert "pass_name" in tools["get_ir"].inputSchema["required"]
    targets = mcp_server.ok("list_targets")["targets"]
    assert {"cuda:sm_90", "hip:gfx942", "metal", "ascend"} <= {row["name"] for row in targets}


def test_lower_kernel_passes_are_the_pipelines(sm90: dict[str, Any], oracle_sm90: list[OraclePass]) -> None:
    (run,) = sm90["runs"]
    assert (run["kernel"], run["target"], run["status"]) == ("matmul", "cuda:sm_90", "ok")
    rows = lowered_rows(sm90)
    assert len(rows) == len(oracle_sm90)
    for row, truth in zip(rows, oracle_sm90, strict=True):
        if truth.name != "pass_fn":  # TVM's anonymous passes are recorded under their factory's name
            assert row["pass"].rpartition("#")[0] == truth.name
        assert row["changed"] == (truth.after != truth.before), row
    assert run["changed"] == sum(row["changed"] for row in sm90["runs"][0]["pass_list"])


def test_a_kernel_named_without_arguments_gets_its_recorded_instance(mcp_server: McpServer) -> None:
    """``fp8_quant.py::per_token_quant`` (a file with no entry point and no call of it) is lowered
    with the arguments examples/irtrace.toml records it with, as the language server does."""
    import tomllib

    entries = tomllib.loads((EXAMPLES / "irtrace.toml").read_text())["kernel"]
    (recorded,) = [e["spec"] for e in entries if e["spec"].startswith("fp8_quant.py::per_token_quant(")]
    (run,) = mcp_server.ok("lower_kernel", spec="fp8_quant.py::per_token_quant")["runs"]
    assert run["spec"] == f"{EXAMPLES / recorded}" and run["status"] == "ok"
    facts = mcp_server.ok("buffer_facts", spec="fp8_quant.py::per_token_quant")["kernels"][0]
    assert facts["instance"]["origin"] == f"the spec in {EXAMPLES / 'irtrace.toml'}"
    assert run["instance"] == facts["instance"]  # lower_kernel names the instance it lowered alike


def test_a_kernel_named_without_arguments_gets_its_programs_instance(mcp_server: McpServer) -> None:
    """``gemm.py::matmul``: the program's own call in its ``__main__`` block comes before the
    manifest, as in the editor (the resolver's order)."""
    facts = mcp_server.ok("buffer_facts", spec="gemm.py::matmul")["kernels"][0]
    assert facts["instance"]["origin"] == "__main__", facts["instance"]


def test_get_ir_is_what_the_pass_printed(
    mcp_server: McpServer, sm90: dict[str, Any], oracle_sm90: list[OraclePass]
) -> None:
    rows = lowered_rows(sm90)
    for wanted in ("tl.LayoutInference#1", "tl.LowerTileOp#1"):
        position = next(k for k, row in enumerate(rows) if row["pass"] == wanted)
        truth = oracle_sm90[position]
        whole = mcp_server.ok("get_ir", trace=sm90["trace"], pass_name=wanted, limit=2000)
        assert whole["complete"] and whole["text"] == truth.after
        # paged in pieces of 25 lines, it is the same text, with a note on how to read on
        assert read_all_ir(mcp_server, trace=sm90["trace"], pass_name=wanted) == truth.after
        first = mcp_server.ok("get_ir", trace=sm90["trace"], pass_name=wanted, limit=5)
        assert not first["complete"] and "offset=5" in first["note"]
        past = mcp_server.ok("get_ir", trace=sm90["trace"], pass_name=wanted, offset=10**6)
        assert past["text"] == "" and "past the end" in past["note"]
        before = mcp_server.ok("get_ir", trace=sm90["trace"], pass_name=wanted, side="before", limit=2000)
        assert before["text"] == truth.before


def test_a_failing_lowering_names_the_pass_and_the_ir_it_received(
    mcp_server: McpServer, oracle_ascend: list[OraclePass]
) -> None:
    answer = mcp_server.ok("lower_kernel", spec=GEMM, targets=["ascend"])
    (run,) = answer["runs"]
    failed = [p for p in oracle_ascend if p.after is None]
    innermost = failed[-1]  # the ones around it fail with it
    assert run["status"] == "failed"
    position = next(k for k, row in enumerate(lowered_rows(answer)) if row["pass"] == run["failed_pass"])
    assert oracle_ascend[position] is innermost
    assert _plain_lower_error(gemm(), "ascend").splitlines()[0] in run["error"]
    shown = answer["runs"][0]["ir_received"]
    assert innermost.before.startswith(shown) and shown
    whole = mcp_server.ok(
        "get_ir", trace=answer["trace"], pass_name=run["failed_pass"], side="before", limit=2000
    )
    assert whole["text"] == innermost.before
    message = mcp_server.error("get_ir", trace=answer["trace"], pass_name=run["failed_pass"])
    assert "side='before'" in message


def _plain_lower_error(func: Any, target: str) -> str:
    import tilelang
    import tvm

    from irtrace.lowering.tvm_targets import make_tvm_target
    from irtrace.targets.backends import get_target

    tvm_target = make_tvm_target(get_target(target))
    try:
        with tvm.transform.PassContext(opt_level=3), tvm_target:
            tilelang.lower(func, target=tvm_target)
    except Exception as error:
        return str(error)
    raise AssertionError(f"the GEMM lowered on {target}")


def test_diff_passes_is_the_change_the_pass_made(
    mcp_server: McpServer, sm90: dict[str, Any], oracle_sm90: list[OraclePass]
) -> None:
    rows = lowered_rows(sm90)
    position = next(k for k, row in enumerate(rows) if row["pass"] == "tl.LayoutInference#1")
    truth = oracle_sm90[position]
    answer = mcp_server.ok(
        "diff_passes", trace=sm90["trace"], from_pass="tl.LayoutInference", normalize=False, limit=2000
    )
    assert answer["complete"] and not answer["equal"]
    added = [line[1:] for line in answer["diff"].splitlines()[2:] if line.startswith("+")]
    removed = [line[1:] for line in answer["diff"].splitlines()[2:] if line.startswith("-")]
    # any correct diff: before - removed + added == after, as multisets of lines
    assert Counter(truth.before.splitlines()) - Counter(removed) + Counter(added) == Counter(
        truth.after.splitlines()
    )
    assert (answer["added"], answer["removed"]) == (len(added), len(removed))
    short = mcp_server.ok("diff_passes", trace=sm90["trace"], from_pass="tl.LayoutInference", limit=4)
    assert short["lines"] == 4 and "offset=4" in short["note"]


def test_diff_lowerings_finds_the_pass_a_config_removes(
    mcp_server: McpServer, oracle_sm90: list[OraclePass], oracle_no_ws: list[OraclePass]
) -> None:
    held_b = {p.before for p in oracle_no_ws} | {p.after for p in oracle_no_ws}
    # the first pass of A whose module B never held, before or after any of its passes
    expected = next(p for p in oracle_sm90 if p.after not in held_b)
    answer = mcp_server.ok("diff_lowerings", spec=GEMM, pass_configs_b=NO_WS, limit=2000)
    first = answer["first_difference"]
    assert first["pass_a"] == f"{expected.name}#1" and first["pass_b"] is None
    assert first["status"] == "only_a" and answer["different"]
    assert f"{expected.name}#1" in answer["passes_only_a"]
    assert answer["b"]["pass_configs"]["tl.disable_warp_specialized"] is True
    assert answer["diff"].startswith(f"--- a/{expected.name}#1")
    same = mcp_server.ok("diff_lowerings", spec=GEMM, spec_b=GEMM)
    assert same["first_difference"] is None and same["source"]["equal"]


def test_check_trace_against_a_baseline(
    mcp_server: McpServer, oracle_sm90: list[OraclePass], oracle_no_ws: list[OraclePass]
) -> None:
    baseline = mcp_server.ok("lower_kernel", spec=GEMM)["trace"]
    new = mcp_server.ok("lower_kernel", spec=GEMM, pass_configs=NO_WS)["trace"]
    answer = mcp_server.ok("check_trace", trace=new, baseline=baseline)
    (run,) = answer["runs"]
    held = {p.after for p in oracle_no_ws} | {p.before for p in oracle_no_ws}
    expected = next(p for p in oracle_sm90 if p.after not in held)
    assert run["outcome"] == "changed" and run["first_changed_pass"] == f"{expected.name}#1"
    assert run["source_changed"] is True
    assert answer["gated"] is False  # irtrace's default policy fails on removed or newly failing runs
    again = mcp_server.ok("check_trace", trace=baseline, baseline=baseline)
    assert again["counts"] == {"unchanged": 1}


def test_buffer_facts_are_the_layout_map(mcp_server: McpServer) -> None:
    truth = {b.line: b for b in compiler_buffers(gemm(), "cuda:sm_90") if b.line is not None}
    source = (EXAMPLES / "gemm.py").read_text().splitlines()
    lines = [number for number, text in enumerate(source, start=1) if "T.alloc_" in text]
    assert len(lines) == 3
    for line in lines:
        answer = mcp_server.ok("buffer_facts", spec=GEMM, line=line, target="cuda:sm_90")
        ((fact,),) = [kernel["buffers"] for kernel in answer["kernels"]]
        expected: CompilerBuffer = truth[line]
        assert fact["name"] == expected.name and fact["line"] == line
        assert tuple(fact["shape"]) == expected.declared
        assert tuple(fact["allocated_shape"]) == expected.allocated
        assert (fact["dtype"], fact["scope"], fact["layout_short"]) == (
            expected.dtype,
            expected.scope,
            expected.layout,
        )
    everything = mcp_server.ok("buffer_facts", spec=GEMM)
    assert {b["name"] for b in everything["kernels"][0]["buffers"]} == {"A", "B", "C"} | {
        truth[line].name for line in lines
    }
    assert (
        "no buffer is declared on line 1"
        in mcp_server.call("buffer_facts", spec=GEMM, line=1).content[0].text
    )  # type: ignore[union-attr]


def test_buffer_facts_of_an_ascend_kernel_on_its_default_target(mcp_server: McpServer) -> None:
    """No target given: an Ascend kernel is analyzed for ``ascend``, up to its own layout pass."""
    func = load_kernel_module(EXAMPLES / "ascend_vector.py").add_silu()
    truth = {b.line: b for b in compiler_buffers(func, "ascend") if b.line is not None}
    answer = mcp_server.ok("buffer_facts", spec="ascend_vector.py::add_silu()")
    (kernel,) = answer["kernels"]
    assert (kernel["target"], kernel["stop_pass"], kernel["reached"]) == (
        "ascend",
        "tl.AscendLayoutInference",
        True,
    )
    assert {b["line"] for b in kernel["buffers"]} == set(truth)  # parameters and allocations
    assert sum(b["role"] == "alloc" for b in kernel["buffers"]) == 3
    for fact in kernel["buffers"]:
        expected = truth[fact["line"]]
        assert (fact["name"], tuple(fact["allocated_shape"]), fact["dtype"], fact["scope"]) == (
            expected.name,
            expected.allocated,
            expected.dtype,
            expected.scope,
        )


def test_diagnostics_locate_the_compilers_errors(
    mcp_server: McpServer, capfd: pytest.CaptureFixture[str]
) -> None:
    syntax = mcp_server.ok("diagnostics", spec=f"{TEST_DATA / 'syntax_error.py'}::broken()")
    ((diagnostic,),) = [syntax["diagnostics"]]
    source = (TEST_DATA / "syntax_error.py").read_text().splitlines()
    try:
        compile("\n".join(source), "syntax_error.py", "exec")
    except SyntaxError as error:
        assert (diagnostic["code"], diagnostic["line"]) == ("syntax", error.lineno)
    layout = mcp_server.ok("diagnostics", spec=f"{TEST_DATA / 'bad_layout.py'}::conflicting_layouts()")
    kernel = load_kernel_module(TEST_DATA / "bad_layout.py").conflicting_layouts()
    capfd.readouterr()
    truth = _plain_lower_error(kernel, "cuda:sm_90")
    native_log = capfd.readouterr().err  # what TileLang's C++ checks logged to fd 2 meanwhile
    (error,) = [d for d in layout["diagnostics"] if d["severity"] == "error"]
    assert error["code"] == "layout-inference"
    assert error["message"].splitlines()[0] in truth
    logged = re.findall(r"Warning: (.+?):.*?--> .*?bad_layout\.py:(\d+)", native_log, re.DOTALL)
    assert logged
    warnings = {
        (d["message"].split(":")[0], d["line"]) for d in layout["diagnostics"] if d["severity"] == "warning"
    }
    assert {(head, int(line)) for head, line in logged} <= warnings
    clean = mcp_server.ok("diagnostics", spec=GEMM)
    assert clean["diagnostics"] == [] and clean["kernels"][0]["status"] == "ok"


def test_coverage_matrix(mcp_server: McpServer, oracle_ascend: list[OraclePass]) -> None:
    targets = ["cuda:sm_90", "metal", "ascend"]
    answer = mcp_server.ok("coverage_matrix", spec=GEMM, targets=targets)
    cells = {cell["target"]: cell for cell in answer["cells"]}
    assert set(cells) == set(targets)
    failing = next(p for p in reversed(oracle_ascend) if p.after is None).name
    assert cells["ascend"]["status"] == "failed"
    assert failing in (cells["ascend"]["failed_pass"], "pass_fn")  # TVM names some passes only pass_fn
    assert _plain_lower_error(gemm(), "ascend").splitlines()[0] in answer["causes"][0]["headline"]
    for target in ("cuda:sm_90", "metal"):  # the oracle: a plain lowering that does not raise
        assert all(p.after is not None for p in oracle_passes(gemm(), target))
        assert cells[target]["status"] == "ok"
    assert answer["causes"][0]["cells"] == [{"kernel": "matmul", "target": "ascend"}]


@pytest.mark.sweep  # 9 s (nvcc, ptxas); a captured run's resources against ptxas are in make test
def test_machine_code_is_what_ptxas_reports(mcp_server: McpServer, tmp_path: Path) -> None:
    import tilelang
    import tvm

    from irtrace.lowering.tvm_targets import make_tvm_target
    from irtrace.targets.backends import get_target

    from ..machine_code.conftest import oracle_resources, ptxas_verbose

    answer = mcp_server.ok("machine_code", spec=GEMM, target="cuda:sm_80")
    (run,) = answer["runs"]
    tvm_target = make_tvm_target(get_target("cuda:sm_80"))
    with tvm.transform.PassContext(opt_level=3), tvm_target:
        source = tilelang.lower(gemm(), target=tvm_target).kernel_source
    log, _ = ptxas_verbose(source, "sm_80", tmp_path)
    truth = oracle_resources(log)
    assert {item["function"] for item in run["resources"]} == set(truth)
    for item in run["resources"]:
        expected = truth[item["function"]]
        assert {key: item[key] for key in expected} == expected


def test_traces_are_resources(mcp_server: McpServer, sm90: dict[str, Any]) -> None:
    listed = mcp_server.run(mcp_server.session.list_resources())  # type: ignore[union-attr]
    uri = f"trace://{sm90['trace']}"
    assert uri in {str(resource.uri) for resource in listed.resources}
    read = mcp_server.run(mcp_server.session.read_resource(uri))  # type: ignore[union-attr]
    data = json.loads(read.contents[0].text)
    assert data["runs"][0]["passes"] == len(sm90["runs"][0]["pass_list"])
    assert Path(data["file"]).is_file()


def test_bad_requests_are_tool_errors(mcp_server: McpServer) -> None:
    assert "cannot parse" in mcp_server.error("lower_kernel", spec="gemm.py::matmul(256, ,)")
    assert "cuda:sm_42" in mcp_server.error("lower_kernel", spec=GEMM, targets=["cuda:sm_42"])
    assert "no kernel named" in mcp_server.error("lower_kernel", spec="gemm.py::nope()")
    assert "module name" in mcp_server.error("lower_kernel", spec="os.path::join")
    assert "tl.NoSuchPass" in mcp_server.error("get_ir", spec=GEMM, pass_name="tl.NoSuchPass")
    assert "either" in mcp_server.error("get_ir", pass_name="tl.LayoutInference")
    assert "t99" in mcp_server.error("get_ir", trace="t99", pass_name="tl.LayoutInference")
    # the server is still there
    assert mcp_server.ok("list_targets")["targets"]


def test_several_targets_answer_in_summaries_with_the_passes_on_request(mcp_server: McpServer) -> None:
    """An all-targets answer was 41 KB of pass rows: for several targets each run is a summary
    (status, time, pass counts) and a note says how to ask for the rows; ``pass_list=true`` lists
    them, as many as each summary counts."""
    targets = ["cuda:sm_90", "hip:gfx942"]
    short = mcp_server.call("lower_kernel", spec=GEMM, targets=targets)
    data = short.structuredContent
    assert not short.isError and data is not None
    assert [(run["target"], run["status"]) for run in data["runs"]] == [(t, "ok") for t in targets]
    assert all("pass_list" not in run and run["passes"] > 0 for run in data["runs"])
    assert "pass_list=true" in data["pass_list_note"]
    assert len(json.dumps(data)) < 3000
    full = mcp_server.ok("lower_kernel", spec=GEMM, targets=targets, pass_list=True)
    assert [len(run["pass_list"]) for run in full["runs"]] == [run["passes"] for run in data["runs"]]


def test_source_line_ir_is_irtrace_ir_line_and_its_lines_carry_the_span(
    mcp_server: McpServer, capsys: pytest.CaptureFixture[str]
) -> None:
    """The tool's answer is ``irtrace ir TRACE --line N --json`` on the trace it recorded (the CLI's
    route), and every IR line it names prints a statement carrying the line's span, per TVM's
    visitor and printer watching the same lowering (ORACLES.md, "Source maps")."""
    from irtrace.cli.main import main

    from ..lsp.line_oracle import gemm_line_oracle

    truth = gemm_line_oracle()
    answer = mcp_server.ok("source_line_ir", spec="gemm.py::matmul()", target="cuda:sm_90a", line=truth.line)
    read = mcp_server.run(mcp_server.session.read_resource(f"trace://{answer['trace']}"))  # type: ignore[union-attr]
    file = json.loads(read.contents[0].text)["file"]
    capsys.readouterr()
    assert main(["ir", file, "-k", "matmul", "-t", "cuda:sm_90a", "--line", str(truth.line), "--json"]) == 0
    cli = json.loads(capsys.readouterr().out)
    assert {key: answer[key] for key in cli} == cli
    checked = 0
    for item in answer["passes"]:
        first, last = item["first_index"], item["last_index"]
        if truth.at(first, item["first"]) is None or truth.at(last, item["last"]) is None:
            continue  # passes TVM ran inside codegen: numbered after the codegen step here
        for oracle_pass in truth.truths[first : last + 1]:
            spanned = set(item["ir_lines"]) - set(item.get("carried", []))  # carried ones: marked
            assert spanned == oracle_pass.first_lines.get(truth.line, set()), oracle_pass.name
            printed = oracle_pass.text.split("\n")
            assert item["text"] == [printed[n - 1] for n in item["ir_lines"]]
            checked += 1
    assert checked > 10
    one = mcp_server.ok("source_line_ir", trace=answer["trace"], line=truth.line, pass_name="tl.LowerTileOp")
    (only,) = one["passes"]
    index = next(i for i, t in enumerate(truth.truths) if t.name == "tl.LowerTileOp")
    assert (only["first"], set(only["ir_lines"]) - set(only.get("carried", []))) == (
        "tl.LowerTileOp",
        truth.truths[index].first_lines[truth.line],
    )


def test_source_line_ir_refuses_bad_lines_paths_and_traces(
    mcp_server: McpServer, sm90: dict[str, Any]
) -> None:
    """Hostile arguments are tool errors, and nothing past the file is lowered."""
    spec = "gemm.py::matmul()"
    for bad in ("36; import os", 1.5, None, [36]):
        assert "line" in mcp_server.error("source_line_ir", spec=spec, line=bad)
    for bad in (0, -1):
        assert "`int` >= 1 - at `$.line`" in mcp_server.error("source_line_ir", spec=spec, line=bad)
    lines = len((EXAMPLES / "gemm.py").read_text().splitlines())
    assert f"past the end of gemm.py ({lines} lines)" in mcp_server.error(
        "source_line_ir", spec=spec, line=lines + 1
    )
    assert "outside" in mcp_server.error("source_line_ir", spec="/etc/passwd::x", line=1)
    assert "outside" in mcp_server.error("source_line_ir", spec="../../../etc/x.py::k()", line=1)
    assert "module name" in mcp_server.error("source_line_ir", spec="os.path::join", line=1)
    assert "not a literal" in mcp_server.error(
        "source_line_ir", spec="gemm.py::matmul(__import__('os'))", line=1
    )
    assert "no source maps" in mcp_server.error("source_line_ir", trace=sm90["trace"], line=36)
    assert "outside the allowed roots" in mcp_server.error("source_line_ir", trace="/etc/hosts", line=1)
    assert "either" in mcp_server.error("source_line_ir", line=36)
    assert mcp_server.ok("list_targets")["targets"]  # the server is still there


def test_every_tool_module_is_registered() -> None:
    """A tool is one module under ``tilelang_mcp/tools``: each is listed, named as its file, and
    has its structs and one handler."""
    import inspect
    import pkgutil

    import msgspec

    from tilelang_mcp import tools

    files = {info.name for info in pkgutil.iter_modules(tools.__path__)}
    assert files == {module.__name__.rpartition(".")[2] for module in tools.MODULES} == TOOLS
    for module in tools.MODULES:
        assert module.__name__.rpartition(".")[2] == module.NAME
        assert issubclass(module.Arguments, msgspec.Struct) and issubclass(module.Result, msgspec.Struct)
        assert inspect.iscoroutinefunction(module.handle)
        assert len(module.handle.__doc__.strip().splitlines()) == 1


def _closed(schema: Any) -> Any:
    """``schema`` with every object that lists its properties closed to others, so that a key
    the schema does not describe fails validation."""
    if isinstance(schema, dict):
        closed = {key: _closed(value) for key, value in schema.items()}
        if "properties" in schema:
            closed["additionalProperties"] = False
        return closed
    if isinstance(schema, list):
        return [_closed(item) for item in schema]
    return schema


def test_every_answer_is_what_its_output_schema_says(mcp_server: McpServer, sm90: dict[str, Any]) -> None:
    """Each tool's advertised outputSchema, closed to keys it does not describe, validates the
    structured content of real calls (the failure paths included), and the content decodes into
    the tool's ``Result`` struct and back unchanged."""
    import jsonschema
    import msgspec

    from tilelang_mcp import tools

    listed = mcp_server.run(mcp_server.session.list_tools())  # type: ignore[union-attr]
    schemas = {tool.name: tool.outputSchema for tool in listed.tools}
    results = {module.NAME: module.Result for module in tools.MODULES}
    baseline = sm90["trace"]
    gemm_line = next(
        n for n, text in enumerate((EXAMPLES / "gemm.py").read_text().splitlines(), 1) if "T.gemm(" in text
    )
    calls: list[tuple[str, dict[str, Any]]] = [
        ("list_targets", {}),
        ("lower_kernel", {"spec": GEMM, "targets": ["ascend"]}),  # a failure: its pass and input
        ("lower_kernel", {"spec": GEMM, "targets": ["cuda:sm_90", "ascend"]}),  # summaries
        ("get_ir", {"trace": baseline, "pass_name": "tl.LayoutInference", "limit": 5}),
        ("get_ir", {"trace": baseline, "pass_name": "source"}),
        ("diff_passes", {"trace": baseline, "from_pass": "tl.LayoutInference"}),
        ("diff_lowerings", {"spec": GEMM, "pass_configs_b": NO_WS, "limit": 5}),
        ("buffer_facts", {"spec": GEMM}),
        ("diagnostics", {"spec": f"{TEST_DATA / 'bad_layout.py'}::conflicting_layouts()"}),
        ("machine_code", {"spec": GEMM, "target": "metal"}),
        ("coverage_matrix", {"spec": GEMM, "targets": ["cuda:sm_90", "ascend"]}),
        ("source_line_ir", {"spec": "gemm.py::matmul()", "target": "cuda:sm_90a", "line": gemm_line}),
    ]
    answers = [(tool, mcp_server.ok(tool, **arguments)) for tool, arguments in calls]
    new = next(answer["trace"] for tool, answer in answers if tool == "lower_kernel")
    answers.append(("check_trace", mcp_server.ok("check_trace", trace=new, baseline=baseline)))
    assert {tool for tool, _ in answers} == TOOLS
    for tool, answer in answers:
        schema = schemas[tool]
        assert schema is not None and schema["type"] == "object"
        jsonschema.validate(answer, _closed(schema))
        decoded = msgspec.convert(answer, type=results[tool])
        assert msgspec.json.decode(msgspec.json.encode(decoded)) == answer, tool
    failed = next(answer for tool, answer in answers if tool == "lower_kernel")["runs"][0]
    assert failed["status"] == "failed" and failed["ir_received"] and failed["failed_pass"]
