"""Messages say which file and why; every exit code a tool returns is in its --help; a reader that
goes away (`| head -1`) is not an error; a byte-order mark is not a reason to refuse a file."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from irtrace.base.errors import ExitCode
from irtrace.trace.model import Trace
from tests.conftest import ROOT

from .conftest import cli_command, one_line, run_tool

BOM = b"\xef\xbb\xbf"


def check_with_policy(trace: Trace, policy: Path) -> subprocess.CompletedProcess[str]:
    assert trace.path
    return run_tool(
        "irtrace", "check", trace.path, "--baseline", trace.path, "--policy", str(policy), "--format", "json"
    )


def test_a_policy_nested_too_deeply_is_named_with_the_reason(tmp_path: Path, copy_trace: Trace) -> None:
    policy = tmp_path / "deep.toml"
    policy.write_text("[fail]\nir = " + "[" * 5000 + "]" * 5000 + "\n")
    done = check_with_policy(copy_trace, policy)
    assert done.returncode == 2  # check's "usage or input error", not 6 (a trace format error)
    assert str(policy) in one_line(done.stderr) and "nested too deeply" in done.stderr


def test_a_folder_given_as_policy_or_manifest_is_called_a_folder(tmp_path: Path, copy_trace: Trace) -> None:
    done = check_with_policy(copy_trace, tmp_path)
    assert done.returncode == 2 and "is a folder" in one_line(done.stderr), done.stderr
    done = run_tool("irtrace", "record", "--manifest", str(tmp_path), "-o", str(tmp_path / "t.jsonl"))
    assert done.returncode == ExitCode.INPUT and "is a folder" in one_line(done.stderr), done.stderr
    assert "does not exist" not in done.stderr


def test_files_starting_with_a_byte_order_mark_are_read(tmp_path: Path, copy_trace: Trace) -> None:
    """Windows editors save UTF-8 with a BOM: the trace, the policy and the manifest still read."""
    assert copy_trace.path
    trace = tmp_path / "bom.jsonl"
    trace.write_bytes(BOM + Path(copy_trace.path).read_bytes())
    done = run_tool("irtrace", "show", str(trace))
    assert done.returncode == ExitCode.OK and "copy on cuda:sm_90a: ok" in done.stdout, done.stderr
    done = run_tool("passdiff", "runs", copy_trace.path, str(trace), "-f", "json")
    assert done.returncode == 0, done.stderr  # the same runs: no difference
    policy = tmp_path / "policy.toml"
    policy.write_bytes(BOM + b"[fail]\nir = true\n")
    done = check_with_policy(copy_trace, policy)
    assert done.returncode == 0, done.stderr
    assert "ir" in json.loads(done.stdout)["policy"]["fail"]  # the [fail] table was read, BOM and all
    manifest = tmp_path / "irtrace.toml"
    manifest.write_bytes(BOM + b'[[kernel]]\nspec = "no_such_kernel.py::k()"\ntargets = ["cuda"]\n')
    done = run_tool("irtrace", "record", "--manifest", str(manifest), "-o", str(tmp_path / "t.jsonl"))
    assert done.returncode == ExitCode.INPUT and "no_such_kernel.py" in one_line(done.stderr), done.stderr


def closed_pipe_run(tool: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``tool`` with stdout a pipe whose reader has gone, as `tool | head -1` once head is done."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        return subprocess.run(
            cli_command(tool, *args),
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
            timeout=300,
        )
    finally:
        os.close(write_end)


def test_a_reader_that_goes_away_ends_every_tool_quietly_with_exit_0(
    tmp_path: Path, copy_trace: Trace
) -> None:
    assert copy_trace.path
    trace = copy_trace.path
    commands = [
        ("irtrace", "show", trace),
        ("irtrace", "show", trace, "--json"),
        ("irtrace", "ir", trace, "--source"),
        ("irtrace", "matrix", trace),
        ("irtrace", "check", trace, "--baseline", trace),
        ("irtrace", "targets"),
        ("passdiff", "pass", trace, "-p", "tl.LowerTileOp"),
        ("passdiff", "pass", trace, "-p", "tl.LowerTileOp", "-f", "unified"),
        ("passviz", "dot", trace, "-o", str(tmp_path / "d.dot")),
    ]
    for tool, *args in commands:
        done = closed_pipe_run(tool, *args)
        assert (done.returncode, done.stderr) == (0, ""), (tool, args)


def exit_codes_in_help(tool: str, *command: str) -> set[int]:
    """The codes listed under "exit codes" at the end of ``tool [command] --help``."""
    done = run_tool(tool, *command, "--help")
    assert done.returncode == 0, done.stderr
    table = done.stdout[done.stdout.index("exit codes") :]
    return {int(code) for code in re.findall(r"^ {2,4}(\d{1,3})  ", table, re.MULTILINE)}


@pytest.mark.parametrize(
    ("tool", "command", "args", "code"),
    [
        ("passviz", "dot", ("{trace}", "-o", "{fifo}"), ExitCode.OUTPUT),
        ("passviz", "dot", ("{trace}", "-o", "{tmp}/x.txt"), ExitCode.USAGE),
        ("passviz", "dot", ("{tmp}/missing.jsonl", "-o", "{tmp}/x.svg"), ExitCode.INPUT),
        ("passviz", "dot", ("{trace}", "-k", "nope", "-o", "{tmp}/x.svg"), ExitCode.NOT_FOUND),
        ("passviz", "html", ("{corrupt}", "-o", "{tmp}/r.html"), ExitCode.TRACE_FORMAT),
        ("passdiff", "runs", ("{trace}", "{trace}", "-o", "{fifo}"), ExitCode.OUTPUT),
        ("passdiff", "runs", ("{trace}", "{corrupt}"), ExitCode.TRACE_FORMAT),
        ("passdiff", "pass", ("{trace}", "-p", "tl.Nope"), ExitCode.NOT_FOUND),
        ("irtrace", "merge", ("{trace}", "-o", "{fifo}"), ExitCode.OUTPUT),
        ("irtrace", "show", ("{corrupt}",), ExitCode.TRACE_FORMAT),
        ("irtrace", "check", ("{trace}", "--baseline", "{trace}", "--markdown", "{fifo}"), 2),
    ],
)
def test_every_exit_code_a_tool_returns_is_in_its_help(
    tmp_path: Path, copy_trace: Trace, tool: str, command: str, args: tuple[str, ...], code: int
) -> None:
    fifo = tmp_path / "pipe.svg"
    os.mkfifo(fifo)
    corrupt = tmp_path / "corrupt.jsonl"
    corrupt.write_text('{"record": "header", "format": "irtrace", "schema": 1}\n{not json\n')
    filled = [arg.format(trace=copy_trace.path, fifo=fifo, tmp=tmp_path, corrupt=corrupt) for arg in args]
    done = run_tool(tool, command, *filled, timeout=120)
    assert done.returncode == code, done.stderr
    one_line(done.stderr, tool)
    assert code in exit_codes_in_help(tool, command), f"{tool} {command} --help does not list exit {code}"
    top_level = exit_codes_in_help(tool) if tool != "irtrace" or command != "check" else {0, 1, 2}
    assert code in top_level, f"{tool} --help does not list exit {code}"


def test_passviz_help_lists_only_codes_of_its_own() -> None:
    """passviz lists what passviz returns, not irtrace's codes for scripts and kernel files."""
    listed = exit_codes_in_help("passviz")
    assert (
        ExitCode.OUTPUT in listed and ExitCode.SCRIPT not in listed and ExitCode.KERNEL_SOURCE not in listed
    )
    assert listed == exit_codes_in_help("passviz", "dot") == exit_codes_in_help("passviz", "html")
