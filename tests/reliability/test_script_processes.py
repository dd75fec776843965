"""``irtrace run`` of scripts that fork, use process pools or exit abruptly: the trace holds every
lowering of every process, loads with every tool, and the exit code says how the script ended."""

from __future__ import annotations

import hashlib
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from irtrace.base.errors import ExitCode
from irtrace.trace.model import STATUS_INCOMPLETE, STATUS_OK, Trace
from irtrace.trace.reader import load_trace
from tests.conftest import DATA, EXAMPLES

from .conftest import one_line, run_tool

FORKING = DATA / "forking_script.py"
EXITING = DATA / "exiting_script.py"


def lowered_by_the_script(stdout: str) -> Counter[str]:
    """The oracle: SHA-256 of each kernel source TileLang gave the script, as it printed them."""
    return Counter(re.findall(r"^lowered \d+ ([0-9a-f]{64})$", stdout, re.MULTILINE))


def sources_in(trace: Trace) -> Counter[str]:
    sources = [trace.kernel_source(run) for run in trace.runs]
    assert all(sources), [run.status for run in trace.runs]
    return Counter(hashlib.sha256(source.encode("utf-8")).hexdigest() for source in sources if source)


def assert_every_tool_reads(path: Path, tmp_path: Path) -> None:
    """irtrace show, passdiff, passviz dot and html all load the trace (passdiff's 1 says the
    pass changed the IR, as diff(1) does)."""
    kernel = f"{load_trace(path).runs[0].kernel}#2"  # a kernel lowered twice
    for tool, args in (
        ("irtrace", ["show", str(path)]),
        ("passdiff", ["pass", str(path), "-k", kernel, "-p", "tl.LowerTileOp"]),
        ("passviz", ["dot", str(path), "-o", str(tmp_path / "drawing.dot")]),
        ("passviz", ["html", str(path), "-o", str(tmp_path / "report.html")]),
    ):
        done = run_tool(tool, *args)
        assert done.returncode in ((0, 1) if tool == "passdiff" else (0,)), (tool, args, done.stderr)
        assert done.stdout and "error" not in done.stderr and "Traceback" not in done.stderr, done.stderr


def test_forked_children_and_a_fork_pool_are_all_in_the_trace(tmp_path: Path) -> None:
    """The attack: a script that lowers in an os.fork child (which then raises) and in a fork
    pool. Before, the trace said `run 0 is started twice` to every reader, and the raising child
    made the parent fail with `cannot write ...: No such file or directory`."""
    output = tmp_path / "forks.jsonl.gz"  # gzip too: a child must not end the parent's stream
    done = run_tool(
        "irtrace", "run", "-o", str(output), "--", "python", str(FORKING), "fork", "--child-raises"
    )
    assert done.returncode == ExitCode.OK, done.stderr
    oracle = lowered_by_the_script(done.stdout)
    assert sum(oracle.values()) == 6 and len(oracle) == 6, done.stdout
    assert (
        "ValueError: the forked child failed" in done.stderr
    )  # the child's own traceback, as without irtrace
    assert "cannot write" not in done.stderr and "irtrace: error" not in done.stderr, done.stderr
    assert "KeyboardInterrupt" not in done.stderr  # the pool's SIGTERM ends its workers quietly
    trace = load_trace(output)
    assert not trace.truncated
    assert [run.run_id for run in trace.runs] == list(range(6))
    assert all(run.status == STATUS_OK for run in trace.runs)
    assert sources_in(trace) == oracle
    assert sorted(p.name for p in tmp_path.iterdir()) == ["forks.jsonl.gz"]  # no part left behind
    assert_every_tool_reads(output, tmp_path)


@pytest.mark.sweep  # 18 s on 2 cores: with the sweeps (fork and fork pools stay in make test)
@pytest.mark.parametrize("method", ["spawn", "forkserver"])
def test_spawned_pool_workers_are_captured_too(tmp_path: Path, method: str) -> None:
    output = tmp_path / "spawned.jsonl"
    done = run_tool("irtrace", "run", "-q", "-o", str(output), "--", "python", str(FORKING), method)
    assert done.returncode == ExitCode.OK, done.stderr
    oracle = lowered_by_the_script(done.stdout)
    assert sum(oracle.values()) == 6, done.stdout
    trace = load_trace(output)
    assert not trace.truncated and sources_in(trace) == oracle
    assert sorted(p.name for p in tmp_path.iterdir()) == ["spawned.jsonl"]


def test_a_child_that_crashes_mid_lowering_loses_only_its_own_run(tmp_path: Path) -> None:
    script = tmp_path / "script.py"
    script.write_text(
        "import os, sys\n"
        f"sys.path[:0] = [{str(DATA)!r}, {str(EXAMPLES)!r}]\n"
        "import tilelang\n"
        "from gemm import matmul\n"
        "from tilelang.backend.target import determine_target\n"
        "target = determine_target({'kind': 'cuda', 'arch': 'sm_90'}, return_object=True)\n"
        "with target:\n"
        "    tilelang.lower(matmul(128, 128, 128, block_M=64, block_N=64), target=target)\n"
        "child = os.fork()\n"
        "if child == 0:\n"
        "    os.environ['IRTRACE_TEST_MISBEHAVE'] = 'segv:LowerTileOp'  # read when misbehaving is imported\n"
        "    from misbehaving import copy\n"
        "    with target:\n"
        "        tilelang.lower(copy(), target=target)\n"
        "    os._exit(0)\n"
        "_, status = os.waitpid(child, 0)\n"
        "print('child signal', os.WTERMSIG(status) if os.WIFSIGNALED(status) else None, flush=True)\n"
        "with target:\n"
        "    tilelang.lower(matmul(256, 256, 256), target=target)\n"
    )
    output = tmp_path / "t.jsonl"
    done = run_tool("irtrace", "run", "-o", str(output), "--", "python", str(script))
    assert "child signal 11" in done.stdout, done.stdout + done.stderr
    assert done.returncode == ExitCode.LOWERING, done.stderr  # the child's run did not finish
    assert '"record":"footer"' in output.read_text().splitlines()[-1]  # finished, then renamed into place
    trace = load_trace(output)
    assert trace.truncated  # readers say that one run was cut short, and where
    assert [(run.kernel, run.status) for run in trace.runs] == [
        ("matmul", STATUS_OK),  # captured kernels are named after their factory, as record names them
        ("matmul", STATUS_OK),
        ("copy", STATUS_INCOMPLETE),
    ]
    assert trace.runs[2].running == "tl.LowerTileOp"
    assert "copy on cuda:sm_90 in pass tl.LowerTileOp" in done.stdout
    assert_every_tool_reads(output, tmp_path)


@pytest.mark.parametrize(
    ("how", "code", "said"),
    [
        (["os_exit", "3"], ExitCode.SCRIPT, "it called os._exit(3)"),
        # (os._exit(0) and sys.exit(3) take the same path as os._exit(3): with the sweeps, 5 s each)
        pytest.param(["os_exit", "0"], ExitCode.OK, None, marks=pytest.mark.sweep),
        (
            ["keyboard_interrupt"],
            ExitCode.SCRIPT,
            "it raised KeyboardInterrupt itself (no Ctrl-C was received)",
        ),
        pytest.param(
            ["sys_exit", "3"], ExitCode.SCRIPT, "it exited with status 3 (sys.exit)", marks=pytest.mark.sweep
        ),
    ],
)
def test_how_the_script_ended_is_the_documented_code_and_the_trace_is_finished(
    tmp_path: Path, how: list[str], code: ExitCode, said: str | None
) -> None:
    """The attack: os._exit(3) used to leave the trace in .partial and exit 3 ("missing file")
    without a word; a script's own KeyboardInterrupt was reported as a Ctrl-C (130)."""
    output = tmp_path / "t.jsonl"
    done = run_tool(
        "irtrace", "run", "-t", "hip:gfx942", "-o", str(output), "--", "python", str(EXITING), *how
    )
    assert done.returncode == code, done.stderr
    if said is None:
        assert "irtrace: error" not in done.stderr, done.stderr
    else:
        assert one_line(done.stderr).endswith(f"the script failed after 2 captured run(s): {said}")
    trace = load_trace(output)  # in place, with its footer: nothing left in .partial
    assert not trace.truncated and not (tmp_path / "t.jsonl.partial").exists()
    assert [(run.target, run.status) for run in trace.runs] == [
        ("cuda:sm_90", STATUS_OK),
        ("hip:gfx942", STATUS_OK),
    ]
    assert "trace written to" in done.stdout


def test_run_help_documents_how_the_script_ended() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "irtrace.cli", "run", "--help"], capture_output=True, text=True, check=True
    )
    assert "os._exit(N)" in done.stdout and "processes it starts" in done.stdout
    assert f"{int(ExitCode.SCRIPT):>5}  irtrace run: the script failed" in done.stdout
