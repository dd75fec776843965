"""``tilelang-lsp --tcp`` serves only the user: any local process can connect to the port, and
``trusted: true`` makes the server run the files it is sent. Written as the attack."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import stat
from pathlib import Path
from typing import Any

import pytest

from tests.lsp.conftest import SERVER, open_fresh, recording_client, start, wait_published

pytestmark = pytest.mark.asyncio


async def send(writer: asyncio.StreamWriter, message: dict[str, Any]) -> None:
    body = json.dumps({"jsonrpc": "2.0", **message}).encode()
    writer.write(b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
    await writer.drain()


async def receive(reader: asyncio.StreamReader) -> dict[str, Any] | None:
    """The next message, or ``None`` once the server closed the connection."""
    length = 0
    while True:
        line = await reader.readline()
        if not line:
            return None
        if not line.strip():
            break
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":")[1])
    message: dict[str, Any] = json.loads(await reader.readexactly(length))
    return message


def did_open(path: Path) -> dict[str, Any]:
    item = {"uri": path.as_uri(), "languageId": "python", "version": 1, "text": path.read_text()}
    return {"method": "textDocument/didOpen", "params": {"textDocument": item}}


def initialize(**options: Any) -> dict[str, Any]:
    params = {"processId": None, "rootUri": None, "capabilities": {}, "initializationOptions": options}
    return {"id": 1, "method": "initialize", "params": params}


async def attack(port: int, *messages: dict[str, Any], wait_for_answer: bool = True) -> list[dict[str, Any]]:
    """Connect, send ``messages`` and read what comes until the server closes the connection.

    ``wait_for_answer``: read the answer to the first message before sending the rest (sent all
    at once, the rest may still be unread when the server closes, so the answer is lost to a reset).
    """
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    answers = []
    try:
        await send(writer, messages[0])
        if wait_for_answer and (answer := await asyncio.wait_for(receive(reader), 10)) is not None:
            answers.append(answer)
        for message in messages[1:]:
            await send(writer, message)
        while (answer := await asyncio.wait_for(receive(reader), 10)) is not None:
            answers.append(answer)
    except ConnectionError:
        pass  # closed by the server, which is the point
    finally:
        writer.close()
    return answers


def kernel_that_marks(folder: Path, name: str) -> tuple[Path, Path]:
    """A file that analysis would run (it imports tilelang) and that writes a marker when run."""
    marker = folder / f"{name}.ran"
    path = folder / f"{name}.py"
    path.write_text(f"import pathlib\n\nimport tilelang\n\npathlib.Path({str(marker)!r}).write_text('ran')\n")
    return path, marker


async def test_tcp_client_without_the_token_runs_nothing(tmp_path: Path) -> None:
    token_file = tmp_path / "private" / "tcp.token"
    server = await asyncio.create_subprocess_exec(
        *SERVER,
        "--tcp",
        "127.0.0.1:0",
        "--token-file",
        str(token_file),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    assert server.stderr is not None
    lines: list[str] = []
    port = None
    while port is None:
        line = (await asyncio.wait_for(server.stderr.readline(), 60)).decode()
        assert line, lines
        lines.append(line)
        found = re.match(r"tilelang-lsp: listening on 127\.0\.0\.1:(\d+); .*the text of (.+)$", line)
        if found:
            port, named = int(found[1]), found[2]
    drain = asyncio.ensure_future(server.stderr.read())  # the worker's output, not to block on
    try:
        assert named == str(token_file)
        assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
        token = token_file.read_text().strip()

        # 1. trusted: true without a token, with a wrong one, and no initialize at all
        path, marker = kernel_that_marks(tmp_path, "attack")
        opened = [{"method": "initialized", "params": {}}, did_open(path)]
        for first in (initialize(trusted=True), initialize(trusted=True, token="x" * len(token))):
            answers = await attack(port, first, *opened)
            assert len(answers) == 1 and answers[0]["id"] == 1, answers  # an error, then closed
            assert answers[0]["error"]["code"] == -32600
            assert "initializationOptions.token" in answers[0]["error"]["message"]
            assert token not in json.dumps(answers)
        assert (await attack(port, did_open(path)))[0]["error"]["message"].startswith(
            "tilelang-lsp: the first message must be initialize"
        )
        assert "result" not in str(
            await attack(port, initialize(trusted=True), *opened, wait_for_answer=False)
        )
        await asyncio.sleep(2)
        assert not marker.exists()

        # 2. the user, with the token: the same file runs (so the attacks above would have run it)
        user = recording_client()
        await user.start_tcp("127.0.0.1", port)
        await start(user, trusted=True, token=token, extraTargets=[], summary=False)
        assert not [m.message for m in user.messages if "unknown option" in m.message]  # token taken out
        uri, version = open_fresh(user, path)
        await wait_published(user, uri, version)
        assert marker.read_text() == "ran"

        # 3. while the user is served, nobody else gets in, token or not
        second, second_marker = kernel_that_marks(tmp_path, "second")
        with contextlib.suppress(ConnectionError):  # refused: the port is closed
            answers = await attack(port, initialize(trusted=True, token=token), *opened[:1], did_open(second))
            assert all("result" not in a for a in answers), answers
        await asyncio.sleep(2)
        assert not second_marker.exists()

        await user.shutdown_session()
        await user.stop()
        assert await asyncio.wait_for(server.wait(), 30) == 0
        assert not token_file.exists()  # removed when the server ends
    finally:
        if server.returncode is None:
            server.kill()
            await server.wait()
        drain.cancel()


async def test_tcp_cannot_listen_is_one_line_and_exit_2(tmp_path: Path) -> None:
    blocker = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    port = blocker.sockets[0].getsockname()[1]
    try:
        server = await asyncio.create_subprocess_exec(
            *SERVER,
            "--tcp",
            f"127.0.0.1:{port}",
            "--token-file",
            str(tmp_path / "t"),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
        )
        _, err = await asyncio.wait_for(server.communicate(), 120)
    finally:
        blocker.close()
    assert server.returncode == 2
    lines = [line for line in err.decode().splitlines() if not line.startswith("[worker]")]
    assert lines == [f"tilelang-lsp: cannot listen on 127.0.0.1:{port}: Address already in use"]
