"""The MCP server's side of its worker: the client the language server uses too
(``irtrace.edge.worker_client``), for ``python -m tilelang_mcp.worker`` and its typed jobs.

The worker bounds each job itself (a child killed at its time limit); this side adds a margin
and kills a worker that does not answer by then, so a stuck worker costs one tool call, never
the server.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from irtrace.edge.worker_client import RequestCancelled, RequestFailed, WorkerError
from irtrace.edge.worker_client import WorkerClient as SharedWorkerClient
from tilelang_mcp.protocol import Job

__all__ = ["RequestCancelled", "RequestFailed", "WorkerClient", "WorkerError"]

START_TIMEOUT_S = 300.0
"""Importing tilelang and warming up; generous, because a loaded machine is slow."""
ANSWER_MARGIN_S = 30.0
"""How long past a job's own time limit the worker may take to answer before it is killed."""


class WorkerClient(SharedWorkerClient):
    """The shared client for ``python -m tilelang_mcp.worker``."""

    def __init__(self, python: str | None = None, scratch: Path | None = None) -> None:
        env = {**os.environ, "TMPDIR": str(scratch)} if scratch is not None else None
        super().__init__("tilelang_mcp.worker", python, env=env, start_timeout_s=START_TIMEOUT_S)
        self.scratch = scratch
        """The worker's ``TMPDIR``: its jobs' scratch files go where the server removes them."""

    async def job(self, request: Job) -> Any:
        """Run one job; its answer, or ``RequestFailed`` with the job's error, or ``WorkerError``
        when the worker died or did not answer within the job's time limit and a margin."""
        return await self.request(request, timeout=request.timeout_s + ANSWER_MARGIN_S)
