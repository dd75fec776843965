"""A real ``tilelang-mcp`` server driven by the MCP SDK's own client over stdio.

The client session lives on an event loop in a thread of its own, so one server (and its warm
worker) serves every test of a module while the tests stay plain functions: entering and leaving
the SDK's stdio client must happen in one task, which a pytest fixture cannot promise.
"""

from __future__ import annotations

import asyncio
import os
import sys
import threading
from collections.abc import Iterator, Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import IO, Any

import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.types import CallToolResult

from ..conftest import DATA as TEST_DATA
from ..conftest import EXAMPLES, ROOT

DATA = Path(__file__).resolve().parent / "data"
GEMM = "gemm.py::matmul(256, 256, 256)"
"""The bundled GEMM, small; relative to the first root (the examples folder)."""

CALL_TIMEOUT_S = 600.0


class McpServer:
    """``python -m tilelang_mcp`` with the given arguments, and a session to it."""

    def __init__(self, args: Sequence[str], errlog: IO[str], env: dict[str, str] | None = None) -> None:
        self.args = list(args)
        self.env = env or {}
        self.errlog = errlog
        self.unparsed: list[Exception] = []
        """What arrived on the client's stdin that was not an MCP message (a dirty stdout)."""
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.session: ClientSession | None = None
        self.opened: Future[None] = Future()
        self.closing: asyncio.Event | None = None
        self.done = asyncio.run_coroutine_threadsafe(self._hold(), self.loop)
        self.opened.result(timeout=CALL_TIMEOUT_S)

    async def _on_message(self, message: Any) -> None:
        if isinstance(message, Exception):
            self.unparsed.append(message)

    async def _hold(self) -> None:
        self.closing = asyncio.Event()
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
        env.update(self.env)
        params = StdioServerParameters(
            command=sys.executable, args=["-m", "tilelang_mcp", *self.args], env=env, cwd=str(ROOT)
        )
        try:
            async with (
                stdio_client(params, errlog=self.errlog) as (read, write),
                ClientSession(read, write, message_handler=self._on_message) as session,
            ):
                await session.initialize()
                self.session = session
                self.opened.set_result(None)
                await self.closing.wait()
        except BaseException as error:
            if not self.opened.done():
                self.opened.set_exception(error)
            raise

    def run(self, coroutine: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout=CALL_TIMEOUT_S)

    def call(self, tool: str, **arguments: Any) -> CallToolResult:
        assert self.session is not None
        return self.run(self.session.call_tool(tool, arguments))  # type: ignore[no-any-return]

    def ok(self, tool: str, **arguments: Any) -> dict[str, Any]:
        """The structured result of a call that must succeed."""
        answer = self.call(tool, **arguments)
        assert not answer.isError, answer.content[0].text  # type: ignore[union-attr]
        assert answer.structuredContent is not None
        return answer.structuredContent

    def error(self, tool: str, **arguments: Any) -> str:
        """The message of a call that must fail as a tool error."""
        answer = self.call(tool, **arguments)
        assert answer.isError, answer.content
        return answer.content[0].text  # type: ignore[union-attr,no-any-return]

    def close(self) -> None:
        assert self.closing is not None
        self.loop.call_soon_threadsafe(self.closing.set)
        self.done.result(timeout=60)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)


def start_server(
    args: Sequence[str], errlog: IO[str], env: dict[str, str] | None = None
) -> Iterator[McpServer]:
    server = McpServer(args, errlog, env)
    try:
        yield server
    finally:
        server.close()


@pytest.fixture(scope="module")
def server_log(tmp_path_factory: pytest.TempPathFactory) -> Iterator[IO[str]]:
    """The server's stderr, kept in a file the tests can read."""
    with open(tmp_path_factory.mktemp("mcp") / "stderr.txt", "w+", encoding="utf-8") as log:
        yield log


@pytest.fixture(scope="module")
def mcp_server(server_log: IO[str]) -> Iterator[McpServer]:
    """One server for the module, allowed to run the bundled examples and the test data."""
    yield from start_server(
        ["--root", str(EXAMPLES), "--root", str(TEST_DATA), "--root", str(DATA)], server_log
    )
