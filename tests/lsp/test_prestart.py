"""The worker started before the server's imports: adopted once, or stopped, never left behind."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tilelang_lsp import worker_client
from tilelang_lsp.protocol import Ready
from tilelang_lsp.worker_client import (
    WorkerClient,
    WorkerError,
    discard,
    discard_prestarted,
    environment_of,
    prestart_worker,
    take_prestarted,
)


def test_untrusted_workspace_stops_the_early_worker() -> None:
    prestart_worker()
    early = worker_client._prestarted
    assert early is not None and early.poll() is None
    discard_prestarted()
    assert early.poll() is not None  # killed and reaped
    assert take_prestarted(sys.executable) is None


def test_another_interpreter_stops_the_early_worker() -> None:
    prestart_worker()
    early = worker_client._prestarted
    assert early is not None
    assert take_prestarted("/nonexistent/python3") is None
    assert early.poll() is not None


def test_client_adopts_the_early_worker_and_it_answers() -> None:
    prestart_worker()
    early = worker_client._prestarted
    assert early is not None

    async def adopt() -> Ready:
        client = WorkerClient(sys.executable)
        await client.start()
        try:
            assert client.pid == early.pid
            assert worker_client._prestarted is None  # handed out once
            assert client.ready is not None
            return await asyncio.wait_for(asyncio.shield(client.ready), 120)
        finally:
            await client.stop()

    ready = asyncio.run(adopt())
    assert isinstance(ready, Ready) and ready.pid == early.pid


def test_concurrent_starts_make_one_worker() -> None:
    """The early start from ``initialized`` racing the first request must not leave a second worker."""
    import psutil

    prestart_worker()

    async def start_twice() -> tuple[int | None, list[int]]:
        client = WorkerClient(sys.executable)
        try:
            await asyncio.gather(client.start(), client.start())
            workers = [
                child.pid
                for child in psutil.Process().children()
                if "tilelang_lsp.worker" in " ".join(child.cmdline())
            ]
            return client.pid, workers
        finally:
            await client.stop()

    pid, workers = asyncio.run(start_twice())
    assert pid is not None and workers == [pid]


def test_missing_interpreter_is_a_worker_error() -> None:
    async def start() -> None:
        await WorkerClient("/nonexistent/python3").start()

    with pytest.raises(WorkerError, match="cannot start the TileLang worker with /nonexistent/python3"):
        asyncio.run(start())


@pytest.fixture(scope="module")
def other_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A second virtual environment made from the same base interpreter as this one."""
    folder = tmp_path_factory.mktemp("venvs") / "other"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True)
    return folder


def test_another_venv_of_the_same_base_interpreter_is_another_interpreter(other_venv: Path) -> None:
    """Both venvs' ``python`` resolve to one base binary, yet each has its own packages: the early
    worker (this environment's tilelang) must not serve the other."""
    other_python = other_venv / "bin" / "python"
    assert os.path.realpath(other_python) == os.path.realpath(sys.executable)  # what fooled it
    prefix = subprocess.run(
        [str(other_python), "-c", "import sys; print(sys.prefix)"], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert Path(prefix).resolve() == environment_of(str(other_python)) == other_venv.resolve()
    assert environment_of(sys.executable) == Path(sys.prefix).resolve()
    prestart_worker()
    early = worker_client._prestarted
    assert early is not None
    assert take_prestarted(str(other_python)) is None
    assert early.poll() is not None  # stopped, not adopted
    prestart_worker()
    early = worker_client._prestarted
    assert early is not None
    this_python = Path(sys.prefix) / "bin" / Path(sys.executable).name
    assert take_prestarted(str(this_python)) is early  # this environment's python, however named
    discard(early)


def test_the_early_worker_imports_nothing_from_the_folder_it_was_started_in(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The attack: an untrusted workspace holding its own ``tilelang`` package, with the server
    started in it (as editors do). The worker starts before trust is known, and ``python -m`` puts
    the current folder first on ``sys.path``: it must still import the installed tilelang."""
    marker = tmp_path / "pwned"
    planted = tmp_path / "tilelang"
    planted.mkdir()
    (planted / "__init__.py").write_text(f"open({str(marker)!r}, 'w').write('ran')\n")
    monkeypatch.chdir(tmp_path)

    async def wait_ready() -> Ready:
        client = WorkerClient(sys.executable)
        await client.start()
        try:
            assert client.ready is not None
            return await asyncio.wait_for(asyncio.shield(client.ready), 120)
        finally:
            await client.stop()

    prestart_worker()
    assert isinstance(asyncio.run(wait_ready()), Ready)  # the early one, adopted
    discard_prestarted()
    assert isinstance(asyncio.run(wait_ready()), Ready)  # and one started by the client itself
    assert not marker.exists()
