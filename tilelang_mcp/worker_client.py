"""The server's side of the worker: start it, send one request at a time, replace it when it dies.

The worker bounds each job itself (a child killed at its time limit); this side adds a margin
and kills a worker that does not answer by then, so a stuck worker costs one tool call, never
the server. Its stderr is the server's: TileLang's logs stay off the protocol.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
from pathlib import Path
from typing import Any

START_TIMEOUT_S = 300.0
"""Importing tilelang and warming up; generous, because a loaded machine is slow."""
ANSWER_MARGIN_S = 30.0
"""How long past a job's own time limit the worker may take to answer before it is killed."""
STREAM_LIMIT = 64 * 2**20
"""Longest protocol line read from the worker."""


class WorkerError(Exception):
    """The worker could not answer: it failed to start, died, or hung; or the job failed."""


class WorkerClient:
    """An asyncio client for ``python -m tilelang_mcp.worker``."""

    def __init__(self, python: str | None = None, scratch: Path | None = None) -> None:
        self.python = python or sys.executable
        self.scratch = scratch
        """The worker's ``TMPDIR``: its jobs' scratch files go where the server removes them."""
        self.process: asyncio.subprocess.Process | None = None
        self.ready_info: dict[str, Any] = {}
        self.restarts = 0
        self.next_id = 0
        self.lock = asyncio.Lock()
        """One request in flight: the worker serves them in order."""

    async def start(self) -> None:
        """Start the worker unless one is running; returns once it is warm."""
        if self.process is not None and self.process.returncode is None:
            return
        if self.process is not None:
            self.restarts += 1
        self.process = await asyncio.create_subprocess_exec(
            self.python,
            "-m",
            "tilelang_mcp.worker",
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=None,
            limit=STREAM_LIMIT,
            env={**os.environ, "TMPDIR": str(self.scratch)} if self.scratch is not None else None,
        )
        try:
            message = await asyncio.wait_for(self._read_message(), START_TIMEOUT_S)
        except asyncio.TimeoutError:
            await self.kill()
            raise WorkerError(f"the TileLang worker did not start within {START_TIMEOUT_S:g} s") from None
        if message.get("event") != "ready":
            await self.kill()
            raise WorkerError(str(message.get("error") or "the TileLang worker failed to start"))
        self.ready_info = message

    async def _read_message(self) -> dict[str, Any]:
        assert self.process is not None and self.process.stdout is not None
        while True:
            line = await self.process.stdout.readline()
            if not line:
                code = await self.process.wait()
                raise WorkerError(
                    f"the TileLang worker exited (code {code}); it is restarted on the next call"
                )
            try:
                message = json.loads(line)
            except json.JSONDecodeError:
                message = None
            if isinstance(message, dict):
                return message
            # the worker points everything else at stderr; a stray line here is a bug to see
            print(
                f"tilelang-mcp: the worker wrote a line that is no message: {line[:200]!r}", file=sys.stderr
            )

    async def request(self, method: str, params: dict[str, Any], *, timeout_s: float, memory_mb: int) -> Any:
        """Run one job; its result, or ``WorkerError`` with the job's or the worker's error."""
        async with self.lock:
            await self.start()
            assert self.process is not None and self.process.stdin is not None
            self.next_id += 1
            request_id = self.next_id
            line = {
                "id": request_id,
                "method": method,
                "params": params,
                "timeout_s": timeout_s,
                "memory_mb": memory_mb,
            }
            try:
                self.process.stdin.write((json.dumps(line) + "\n").encode("utf-8"))
                await self.process.stdin.drain()
                message = await asyncio.wait_for(self._answer(request_id), timeout_s + ANSWER_MARGIN_S)
            except asyncio.TimeoutError:
                await self.kill()
                raise WorkerError(
                    f"the TileLang worker did not answer within {timeout_s + ANSWER_MARGIN_S:g} s and was "
                    "restarted"
                ) from None
            except (BrokenPipeError, ConnectionResetError):
                await self.kill()
                raise WorkerError(
                    "the TileLang worker had exited; it is restarted on the next call"
                ) from None
            except asyncio.CancelledError:
                await self.kill()  # the client gave up: an answer left in the pipe would go to the next call
                raise
        if "error" in message:
            raise WorkerError(str(message["error"]))
        return message.get("result")

    async def _answer(self, request_id: int) -> dict[str, Any]:
        while True:
            message = await self._read_message()
            if message.get("id") == request_id:
                return message

    async def kill(self) -> None:
        process = self.process
        if process is None or process.returncode is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            process.kill()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(process.wait(), 10)

    async def stop(self) -> None:
        """End the worker at shutdown: close its stdin, then kill it if it lingers."""
        process = self.process
        if process is None or process.returncode is not None:
            return
        if process.stdin is not None:
            process.stdin.close()
        try:  # a client waits about 2 s for the server to exit before it sends SIGTERM
            await asyncio.wait_for(process.wait(), 1)
        except asyncio.TimeoutError:
            await self.kill()
