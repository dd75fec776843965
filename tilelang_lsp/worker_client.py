"""The language server's side of its worker: the shared client (``irtrace.edge.worker_client``)
for ``python -m tilelang_lsp.worker``, started early while the server imports, with the language
server's requests typed (``tilelang_lsp.protocol``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, overload

from irtrace.edge.worker_client import (
    CANCEL_GRACE_S,
    START_TIMEOUT_S,
    STREAM_LIMIT,
    Building,
    RequestCancelled,
    RequestFailed,
    WorkerError,
    WorkerKilled,
    WorkerOutOfMemory,
    WorkerTimeout,
    adopt,
    discard,
    kill_session,
    neutral_folder,
    session_members,
    session_rss_mb,
)
from irtrace.edge.worker_client import WorkerClient as SharedWorkerClient
from irtrace.edge.worker_protocol import Request
from irtrace.targets.backends import DEFAULT_TARGET
from tilelang_lsp.protocol import (
    AnalysisResult,
    Analyze,
    IrAfterPass,
    IrText,
    LineMaps,
    SourceLines,
    Trace,
    TraceResult,
)

__all__ = [
    "CANCEL_GRACE_S",
    "START_TIMEOUT_S",
    "STREAM_LIMIT",
    "Building",
    "RequestCancelled",
    "RequestFailed",
    "WorkerClient",
    "WorkerError",
    "WorkerKilled",
    "WorkerOutOfMemory",
    "WorkerTimeout",
    "discard",
    "kill_session",
    "session_members",
    "session_rss_mb",
]

WORKER_MODULE = "tilelang_lsp.worker"

_prestarted: subprocess.Popen[bytes] | None = None


def worker_environment(warmup_target: str = DEFAULT_TARGET) -> dict[str, str]:
    env = dict(os.environ)
    env["TILELANG_LSP_WARMUP_TARGET"] = warmup_target
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


def prestart_worker() -> None:
    """Launch the worker with this interpreter before the server's own imports.

    Importing tilelang takes seconds; starting it while pygls loads makes the first hints come
    sooner. It runs no user code: it only imports tilelang and waits. The server adopts it, or
    stops it when the workspace is not trusted or another interpreter is configured.
    """
    global _prestarted
    _prestarted = subprocess.Popen(
        [sys.executable, "-m", WORKER_MODULE],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=worker_environment(),
        start_new_session=True,
        cwd=neutral_folder(),
    )


def environment_of(python: str) -> Path:
    """The environment an interpreter runs in: the virtual environment it belongs to (the folder
    with ``pyvenv.cfg`` above its ``bin/``), else its installation prefix.

    Not the resolved binary: a venv's ``python`` is a symlink to its base interpreter, so two
    venvs resolve to one binary while each has its own ``sys.prefix`` and packages.
    """
    found = shutil.which(python) or python
    link = Path(os.path.abspath(found))  # the path as named: symlinks kept
    for folder in (link.parent.parent, link.parent):
        if (folder / "pyvenv.cfg").is_file():
            return folder.resolve()
    return Path(os.path.realpath(found)).parent.parent


def same_environment(python: str | None) -> bool:
    """Whether ``python`` (``None``: this one) runs in this process's environment (``sys.prefix``)."""
    if python is None:
        return True
    return environment_of(python) == Path(sys.prefix).resolve()


def take_prestarted(python: str | None) -> subprocess.Popen[bytes] | None:
    """The early worker if the interpreter ``python`` names runs in its environment and it is
    alive; it is handed out once."""
    global _prestarted
    early, _prestarted = _prestarted, None
    if early is None:
        return None
    if early.poll() is None and same_environment(python):
        return early
    discard(early)
    return None


def discard_prestarted() -> None:
    """Stop the early worker if nobody adopted it (an untrusted workspace)."""
    early = take_prestarted(None)
    if early is not None:
        discard(early)


class WorkerClient(SharedWorkerClient):
    """The shared client for ``python -m tilelang_lsp.worker``; its first start adopts the worker
    that ``prestart_worker`` launched while the server was still importing, when it runs the same
    interpreter."""

    def __init__(
        self,
        python: str | None = None,
        *,
        memory_limit_mb: float = 6144,
        warmup_target: str = DEFAULT_TARGET,
        on_restart: Callable[[str], None] | None = None,
    ) -> None:
        super().__init__(
            WORKER_MODULE,
            python,
            memory_limit_mb=memory_limit_mb,
            env=worker_environment(warmup_target),
            on_restart=on_restart,
        )
        self.warmup_target = warmup_target

    async def spawn(self) -> Any:
        early = take_prestarted(self.python)
        return await adopt(early) if early is not None else await super().spawn()

    @overload
    async def request(self, request: Analyze, *, timeout: float) -> AnalysisResult: ...
    @overload
    async def request(self, request: Trace, *, timeout: float) -> TraceResult: ...
    @overload
    async def request(self, request: IrAfterPass, *, timeout: float) -> IrText: ...
    @overload
    async def request(self, request: LineMaps, *, timeout: float) -> SourceLines: ...
    @overload
    async def request(self, request: Request, *, timeout: float) -> Any: ...

    async def request(self, request: Request, *, timeout: float) -> Any:
        return await super().request(request, timeout=timeout)
