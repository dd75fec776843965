"""The worker's limits hold while it works: memory is watched as it grows, and nothing a kernel file
forks outlives the worker or the server. Each test is the attack, run against the real server."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from pytest_lsp import LanguageClient

from tests.lsp.conftest import (
    EXAMPLES,
    SERVER,
    open_fresh,
    recording_client,
    start,
    wait_published,
    whole_file_server,
)

LIMIT_MB = 1024
client = whole_file_server(
    trusted=True, workerMemoryLimitMb=LIMIT_MB, analysisTimeoutS=90, extraTargets=[], summary=False
)
pytestmark = pytest.mark.asyncio(loop_scope="module")

HOG = """import os
import pathlib
import time

import tilelang.language as T

REPORT = pathlib.Path({report!r})


def resident_mb():
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def hog(N=128):
    chunks = []
    with REPORT.open("a") as report:
        for _ in range(64):  # 4 GiB in 64 MiB chunks, each written so that it is resident
            chunks.append(b"\\x01" * (64 << 20))
            report.write(f"{{time.time()}} {{resident_mb():.0f}}\\n")
            report.flush()
    time.sleep(60)  # then hold it: only a watcher sees this before the request answers

    @T.prim_func
    def main(A: T.Tensor((N,), T.float32)):
        with T.Kernel(1, threads=128) as bx:
            s = T.alloc_shared((N,), T.float32)
            T.copy(A, s)

    return main
"""

FORKS = """import os
import pathlib
import time

import tilelang.language as T

if os.fork() == 0:  # a sleeper child, as a kernel file that starts helpers would leave one
    pathlib.Path({pids!r}).write_text(str(os.getpid()))
    time.sleep(600)
    os._exit(0)


def kernel(N=128):
    @T.prim_func
    def main(A: T.Tensor((N,), T.float32)):
        with T.Kernel(1, threads=128) as bx:
            s = T.alloc_shared((N,), T.float32)
            T.copy(A, s)

    return main
"""


FORKED_HOG = """import os
import pathlib
import time

import tilelang.language as T


def spawner(N=128):
    if os.fork() == 0:  # the child allocates 4 GiB: no process alone is the worker
        pathlib.Path({pids!r}).write_text(str(os.getpid()))
        chunks = [b"\\x01" * (64 << 20) for _ in range(64)]
        time.sleep(600)
        os._exit(0)
    time.sleep(60)

    @T.prim_func
    def main(A: T.Tensor((N,), T.float32)):
        with T.Kernel(1, threads=128) as bx:
            s = T.alloc_shared((N,), T.float32)
            T.copy(A, s)

    return main
"""


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie is dead: init may be slow to reap it in a container)."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


async def wait_for_pid(path: Path, timeout: float = 120) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().strip():
            return int(path.read_text())
        await asyncio.sleep(0.05)
    raise TimeoutError(f"no pid in {path}")


async def wait_dead(pid: int, timeout: float) -> float:
    """Seconds until ``pid`` is dead; fails past ``timeout``."""
    began = time.monotonic()
    while alive(pid):
        assert time.monotonic() - began < timeout, f"process {pid} still alive after {timeout} s"
        await asyncio.sleep(0.05)
    return time.monotonic() - began


async def test_memory_hog_is_killed_while_it_allocates(client: LanguageClient, tmp_path: Path) -> None:
    """A kernel that allocates 4 GiB under a 1 GiB limit, then holds it: the worker is killed
    while it allocates (the old check, when a request answered, came a minute later), the user
    reads why at the kernel, and the next analysis runs in a fresh worker."""
    report = tmp_path / "allocated.txt"
    path = tmp_path / "hog.py"
    text = HOG.format(report=str(report))
    uri, version = open_fresh(client, path, text)
    published = await wait_published(client, uri, version, timeout=120)
    seen = time.time()
    steps = [(float(at), float(mb)) for at, mb in (line.split() for line in report.read_text().splitlines())]
    # when the worker passed the limit: the first step over it, or (killed during the next chunk,
    # before it could write) the last one written, which makes the delay below an upper bound
    over = next((at for at, mb in steps if mb > LIMIT_MB), steps[-1][0])
    stopped = [d for d in published.diagnostics if d.code == "analysis"]
    assert len(stopped) == 1, published.diagnostics
    message = stopped[0].message
    assert re.fullmatch(
        r"TileLang analysis stopped: the worker grew to \d+ MB while building hog, past the 1024 MB limit "
        r"\(workerMemoryLimitMb\); hints show what the source alone says",
        message,
    ), message
    assert stopped[0].range.start.line == text.splitlines().index("def hog(N=128):")
    # killed while it worked: far from the 4 GiB it asked for, and told soon after it passed 1 GiB
    assert steps[-1][1] < 2048, steps[-1]
    assert seen - over < 2.0, seen - over
    print(
        f"last seen at {steps[-1][1]:.0f} MB resident; diagnostic {seen - over:.2f} s after passing the limit"
    )
    uri, version = open_fresh(client, EXAMPLES / "gemm.py")
    published = await wait_published(client, uri, version, timeout=120)
    assert list(published.diagnostics) == []
    assert any(
        re.fullmatch(
            r"the TileLang worker grew to \d+ MB while building hog, past its limit of 1024 MB "
            r"\(workerMemoryLimitMb\), and was restarted",
            m.message,
        )
        for m in client.messages
    ), [m.message for m in client.messages]


async def test_forked_child_dies_with_the_worker(client: LanguageClient, tmp_path: Path) -> None:
    """A kernel file forks a sleeper; the worker is killed: the sleeper goes with it (it held the
    worker's pipes, so before, not even the worker's death was noticed while it lived)."""
    pids = tmp_path / "child.pid"
    uri, version = open_fresh(client, tmp_path / "forks.py", FORKS.format(pids=str(pids)))
    child = await wait_for_pid(pids)
    await wait_published(client, uri, version)
    status = await client.protocol.send_request_async("tilelang/workerStatus", {})
    assert alive(child) and os.getsid(child) == status.pid  # in the worker's session
    os.kill(status.pid, signal.SIGKILL)
    print(f"sleeper gone {await wait_dead(child, timeout=5):.2f} s after the worker was killed")


async def test_forked_memory_hog_is_killed_with_the_worker(client: LanguageClient, tmp_path: Path) -> None:
    """The memory is a child's, not the worker's: the watcher adds up the session, kills it all."""
    pids = tmp_path / "child.pid"
    text = FORKED_HOG.format(pids=str(pids))
    uri, version = open_fresh(client, tmp_path / "spawner.py", text)
    child = await wait_for_pid(pids)
    published = await wait_published(client, uri, version, timeout=120)
    messages = [d.message for d in published.diagnostics if d.code == "analysis"]
    assert len(messages) == 1 and re.fullmatch(
        r"TileLang analysis stopped: the worker grew to \d+ MB while building spawner, past the 1024 MB "
        r"limit \(workerMemoryLimitMb\); hints show what the source alone says",
        messages[0],
    ), messages
    await wait_dead(child, timeout=5)


async def _server_with_sleeper(tmp_path: Path) -> tuple[LanguageClient, int, int]:
    """A fresh trusted server whose worker ran a file that forked a sleeper: (client, sleeper, worker)."""
    lsp = recording_client()
    await lsp.start_io(*SERVER)
    await start(lsp, trusted=True, extraTargets=[], summary=False)
    pids = tmp_path / "child.pid"
    uri, version = open_fresh(lsp, tmp_path / "forks.py", FORKS.format(pids=str(pids)))
    child = await wait_for_pid(pids)
    await wait_published(lsp, uri, version)
    status = await lsp.protocol.send_request_async("tilelang/workerStatus", {})
    assert alive(child) and alive(status.pid)
    return lsp, child, status.pid


async def test_forked_child_dies_when_the_server_shuts_down(tmp_path: Path) -> None:
    lsp, child, worker = await _server_with_sleeper(tmp_path)
    await lsp.shutdown_session()
    await lsp.stop()
    await wait_dead(child, timeout=5)
    assert not alive(worker)


async def test_forked_child_dies_when_the_server_is_killed(tmp_path: Path) -> None:
    """SIGKILL leaves the server no time to clean up: the worker sees its input close and kills
    its own process group, the sleeper included."""
    lsp, child, worker = await _server_with_sleeper(tmp_path)
    server = lsp._server  # the server process pygls started
    assert server is not None
    server.kill()
    await wait_dead(child, timeout=5)
    await wait_dead(worker, timeout=5)
    await lsp.stop()


async def test_memory_is_measured_over_the_whole_session() -> None:
    """The watcher adds up the worker and what it forked (found by session, orphans included)."""
    from tilelang_lsp.worker_client import kill_session, session_members, session_rss_mb

    code = (
        "import os, sys, time\n"
        "ballast = b'x' * (200 << 20)\n"
        "if os.fork() == 0:\n"
        "    if os.fork() == 0:\n"
        "        grandchild = b'y' * (300 << 20)\n"
        "        print(os.getpid(), flush=True)\n"
        "        time.sleep(600)\n"
        "    os._exit(0)\n"  # the grandchild is orphaned: not a child of anyone in the session
        "time.sleep(600)\n"
    )
    leader = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, start_new_session=True)
    try:
        assert leader.stdout is not None
        grandchild = int(leader.stdout.readline())
        time.sleep(0.3)
        assert grandchild in session_members(leader.pid)
        assert session_rss_mb(leader.pid) > 500  # 200 MiB + (200 shared + 300) MiB
    finally:
        kill_session(leader.pid)
        leader.wait()
    deadline = time.monotonic() + 5
    while alive(grandchild) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(grandchild)
