"""``tilelang-mcp``'s command line, and the server process staying free of tilelang."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

import irtrace

from ..conftest import EXAMPLES, ROOT


def run(*args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    return subprocess.run(
        [sys.executable, "-m", "tilelang_mcp", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )


def test_help_documents_the_trust_rule_and_exit_codes() -> None:
    done = run("--help")
    assert done.returncode == 0
    assert "--root DIR" in done.stdout and "--timeout" in done.stdout and "--memory-limit" in done.stdout
    assert "exit codes:" in done.stdout


def test_bad_arguments_are_one_line_errors(tmp_path: Path) -> None:
    for args, words in (
        (["--root", str(tmp_path / "missing")], "is not a folder"),
        (["--timeout", "0"], "--timeout"),
        (["--memory-limit", "1"], "--memory-limit"),
    ):
        done = run(*args)
        assert done.returncode == 2 and done.stdout == ""
        assert words in done.stderr and "Traceback" not in done.stderr


def test_the_server_process_imports_no_compiler() -> None:
    """Tools that read traces run in the server; only the worker imports tilelang."""
    code = (
        "import json, sys\n"
        "import tilelang_mcp.server, tilelang_mcp.cli, tilelang_mcp.backend\n"
        "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))\n"
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
    assert not set(json.loads(done.stdout)) & {"tilelang", "tvm", "torch", "tvm_ffi"}


def test_the_documented_client_configuration_starts_a_server() -> None:
    """docs/mcp.md's first snippet, as a client reads it, gives a server the SDK's client can use;
    closing the session removes the traces it recorded."""
    blocks = re.findall(r"```json\n(.*?)```", (ROOT / "docs" / "mcp.md").read_text(), re.DOTALL)
    config = json.loads(blocks[0])["mcpServers"]["tilelang"]
    assert config["command"] == "tilelang-mcp" and config["args"][0] == "--root"
    args = [config["args"][0], str(EXAMPLES)]
    # the console script where this checkout is installed; else the same entry point by module
    command = shutil.which(config["command"])
    if command is None:
        command, args = sys.executable, ["-m", "tilelang_mcp", *args]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))

    async def session() -> tuple[set[str], Path]:
        params = StdioServerParameters(command=command, args=args, env=env)
        async with stdio_client(params) as (read, write), ClientSession(read, write) as client:
            started = await client.initialize()
            # the server says its own version, not the MCP SDK's
            assert (started.serverInfo.name, started.serverInfo.version) == ("tilelang", irtrace.__version__)
            lowered = await client.call_tool("lower_kernel", {"spec": "gemm.py::matmul(256, 256, 256)"})
            assert not lowered.isError and lowered.structuredContent is not None
            trace = await client.read_resource(lowered.structuredContent["resource"])
            file = Path(json.loads(trace.contents[0].text)["file"])  # type: ignore[union-attr]
            assert file.is_file()
            return {tool.name for tool in (await client.list_tools()).tools}, file

    tools, trace_file = asyncio.run(session())
    assert "lower_kernel" in tools
    assert not trace_file.parent.exists()  # the session's traces and scratch files went with it
