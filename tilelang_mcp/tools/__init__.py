"""MCP tools, one per module: each has ``NAME``, ``DESCRIPTION``, an ``Arguments`` and a
``Result`` struct (the tool's input and output JSON Schemas are generated from them) and
``async def handle(context, arguments) -> Answer[Result]``. A new tool is one module, listed here."""

from __future__ import annotations

from types import ModuleType

from tilelang_mcp.tools import (
    buffer_facts,
    check_trace,
    coverage_matrix,
    diagnostics,
    diff_lowerings,
    diff_passes,
    get_ir,
    list_targets,
    lower_kernel,
    machine_code,
    source_line_ir,
)

MODULES: list[ModuleType] = [
    list_targets,
    lower_kernel,
    get_ir,
    diff_passes,
    diff_lowerings,
    buffer_facts,
    diagnostics,
    machine_code,
    coverage_matrix,
    check_trace,
    source_line_ir,
]
