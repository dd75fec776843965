"""``source_line_ir`` with machine code: the answer holds the SASS instructions the line became, by
class, as nvdisasm's line table read by the test says (``nvdisasm_costs``, on the trace the tool
recorded); without machine code there is no such key."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from irtrace.trace.reader import load_trace

from ..conftest import EXAMPLES
from ..machine_code.conftest import oracle_nvcc
from ..machine_code.test_sass_line_costs import nvdisasm_costs
from .conftest import McpServer

pytestmark = pytest.mark.sweep  # nvcc: with the other machine-code tests


def test_source_line_ir_counts_the_line_s_sass_instructions(mcp_server: McpServer, tmp_path: Path) -> None:
    oracle_nvcc()
    gemm = EXAMPLES / "gemm.py"
    line = next(n for n, text in enumerate(gemm.read_text().splitlines(), 1) if "T.copy(A" in text)
    spec = "gemm.py::matmul(1024, 1024, 1024)"
    plain = mcp_server.ok("source_line_ir", spec=spec, target="cuda:sm_80", line=line)
    assert "machine_code" not in plain

    answer = mcp_server.call("source_line_ir", spec=spec, target="cuda:sm_80", line=line, machine_code=True)
    assert not answer.isError, answer.content
    data = answer.structuredContent
    assert data is not None
    read = mcp_server.run(mcp_server.session.read_resource(f"trace://{data['trace']}"))  # type: ignore[union-attr]
    trace = load_trace(json.loads(read.contents[0].text)["file"])  # type: ignore[union-attr]
    (run,) = trace.runs
    per_line, _, _ = nvdisasm_costs(trace, run, tmp_path / "oracle")
    expected = per_line[(str(gemm), line)]
    assert expected["global_memory"] > 0 and expected["shared_memory"] > 0, "cp.async into shared memory"
    machine = data["machine_code"]
    assert {name: n for name, n in machine.items() if name != "total" and n} == dict(expected)
    assert machine["total"] == sum(expected.values())
    summary = answer.content[0].text  # type: ignore[union-attr]
    assert f"{machine['global_memory']} global" in summary and "SASS:" in summary
