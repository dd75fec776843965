"""Every output of every tool is replaced only by a complete file, lands where the command line
says, and a pipe given as output is refused instead of blocking the tool for good."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from irtrace.base.errors import ExitCode
from irtrace.base.safe_text import terminal_safe
from irtrace.trace.model import Trace
from irtrace.trace.reader import load_trace

from .conftest import one_line, run_tool

OLD = "an older file the user keeps\n"


def entries(folder: Path) -> list[str]:
    return sorted(path.name for path in folder.iterdir())


def renamed(trace: Trace, path: Path, kernel: str) -> Path:
    """``trace`` with its kernel called ``kernel``."""
    assert trace.path
    lines = [json.loads(line) for line in Path(trace.path).read_text().splitlines()]
    path.write_text(
        "".join(
            json.dumps(dict(line, kernel=kernel) if line["record"] == "run" else line) + "\n"
            for line in lines
        )
    )
    return path


@pytest.mark.parametrize("name", ["g.svg", "g.dot"])
def test_a_drawing_that_cannot_be_written_keeps_the_old_one(
    tmp_path: Path, copy_trace: Trace, name: str
) -> None:
    """A full disk (here a 2 KB file-size limit: the drawing is larger) while `passviz dot` writes."""
    assert copy_trace.path
    output = tmp_path / name
    output.write_text(OLD)
    done = run_tool("passviz", "dot", copy_trace.path, "-o", str(output), file_size_limit=2_000)
    assert done.returncode == ExitCode.OUTPUT, done.stderr
    assert "File too large" in one_line(done.stderr, "passviz")
    assert output.read_text() == OLD and entries(tmp_path) == [name]
    # and with room on the disk, the drawing replaces it
    assert run_tool("passviz", "dot", copy_trace.path, "-o", str(output)).returncode == ExitCode.OK
    assert "tl.LowerTileOp" in output.read_text() and entries(tmp_path) == [name]


@pytest.mark.parametrize(
    ("tool", "args"),
    [
        ("passdiff", ("runs", "{trace}", "{trace}", "-o", "{out}")),
        ("passdiff", ("pass", "{trace}", "-p", "tl.LowerTileOp", "-f", "unified", "-o", "{out}")),
        ("passdiff", ("pass", "{trace}", "-p", "tl.LowerTileOp", "-f", "html", "-o", "{out}")),
        ("irtrace", ("check", "{trace}", "--baseline", "{trace}", "--markdown", "{out}")),
        ("irtrace", ("merge", "{trace}", "{trace}", "-o", "{out}")),
        ("irtrace", ("bless", "{trace}", "--baseline", "{out}")),
    ],
    ids=["passdiff rich", "passdiff unified", "passdiff html", "check --markdown", "merge", "bless"],
)
def test_outputs_on_a_full_disk_keep_the_old_file_and_leave_no_partial_file(
    tmp_path: Path, copy_trace: Trace, tool: str, args: tuple[str, ...]
) -> None:
    """The limit (40 bytes) is below even a trace's header line: the first write fails."""
    assert copy_trace.path
    output = tmp_path / "out"
    output.write_text(OLD)
    filled = [arg.format(trace=copy_trace.path, out=output) for arg in args]
    done = run_tool(tool, *filled, file_size_limit=40)
    expected = 2 if args[0] == "check" else ExitCode.OUTPUT  # check: every error before the verdict is 2
    assert done.returncode == expected, done.stderr
    assert "File too large" in one_line(done.stderr, tool)
    assert output.read_text() == OLD and entries(tmp_path) == ["out"]


@pytest.mark.parametrize(
    ("tool", "args"),
    [
        ("passviz", ("dot", "{trace}", "-o", "{fifo}")),
        ("passviz", ("html", "{trace}", "-o", "{fifo}")),
        ("passdiff", ("runs", "{trace}", "{trace}", "-o", "{fifo}")),
        ("passdiff", ("runs", "{trace}", "{trace}", "-f", "json", "-o", "{fifo}")),
        ("irtrace", ("check", "{trace}", "--baseline", "{trace}", "--junit", "{fifo}")),
        ("irtrace", ("merge", "{trace}", "-o", "{fifo}")),
        ("irtrace", ("bless", "{trace}", "--baseline", "{fifo}")),
        ("irtrace", ("check", "{trace}", "--baseline", "{trace}", "--policy", "{fifo}")),
    ],
    ids=[
        "dot",
        "html",
        "passdiff rich",
        "passdiff json",
        "check --junit",
        "merge",
        "bless",
        "check --policy",
    ],
)
def test_a_pipe_as_output_or_policy_is_refused_at_once(
    tmp_path: Path, copy_trace: Trace, tool: str, args: tuple[str, ...]
) -> None:
    """Opening a FIFO for writing blocks until a reader comes (and ignores Ctrl-C meanwhile)."""
    assert copy_trace.path
    fifo = tmp_path / "pipe.svg"
    os.mkfifo(fifo)
    done = run_tool(tool, *[arg.format(trace=copy_trace.path, fifo=fifo) for arg in args], timeout=120)
    assert done.returncode in (ExitCode.OUTPUT, ExitCode.USAGE), done.stderr  # check: 2, else 9
    assert "not a regular file" in one_line(done.stderr, tool)
    assert entries(tmp_path) == ["pipe.svg"]


def test_kernels_whose_names_clash_as_file_names_get_a_drawing_each(
    tmp_path: Path, copy_trace: Trace
) -> None:
    """`a/b` and `a-b` (and `K`, `k` on a file system that ignores case) would all share one file;
    names made of `..` and `/` must not lead out of the output's folder."""
    kernels = ["a/b", "a-b", "K", "k", "../../escaped", "/tmp/absolute", "..", "nul\x00byte", "x" * 400]
    parts = [renamed(copy_trace, tmp_path / f"{n}.jsonl", kernel) for n, kernel in enumerate(kernels)]
    merged = tmp_path / "merged.jsonl"
    assert run_tool("irtrace", "merge", *map(str, parts), "-o", str(merged)).returncode == ExitCode.OK
    assert [run.kernel for run in load_trace(merged).runs] == kernels
    drawings = tmp_path / "drawings"
    drawings.mkdir()
    done = run_tool("passviz", "dot", str(merged), "-o", str(drawings / "g.dot"))
    assert done.returncode == ExitCode.OK, done.stderr
    written = sorted(drawings.iterdir())
    assert len(written) == len(kernels), entries(drawings)
    assert len({path.name.casefold() for path in written}) == len(kernels)
    assert all(path.name.startswith("g.") and len(path.name) < 120 for path in written)
    # each kernel's drawing is in the file the command said it wrote, one file per kernel
    said = dict(line.split(" (1 run(s)) written to ") for line in done.stdout.splitlines())
    paths = {Path(said[f"drawing of {terminal_safe(kernel, newlines=False)}"]) for kernel in kernels}
    assert paths == set(written)
    assert not (tmp_path.parent / "escaped").exists() and not Path("/tmp/absolute").exists()
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_dir()) == ["drawings"]


def test_a_reproducer_named_after_a_long_hostile_kernel_name_is_a_valid_file_name() -> None:
    from irtrace.ci.repro import default_script_name
    from irtrace.trace.model import KernelRun

    run = KernelRun(
        run_id=0,
        kernel="k" * 400 + "/../\x1b]0;x\x07",
        spec="",
        args={},
        target="cuda:sm_90",
        target_detail="",
        pass_configs={},
        tilelang_version="",
        host={},
    )
    name = default_script_name(run)
    assert len(name.encode()) < 255 and "/" not in name and "\x1b" not in name
    assert name.startswith("repro_kkk") and name.endswith("_cuda_sm_90.py")
