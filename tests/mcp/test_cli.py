"""``tilelang-mcp``'s command line, and the server process staying free of tilelang."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from ..conftest import ROOT


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
