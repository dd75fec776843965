"""``tilelang-lsp --tcp``: serve one client over TCP, and only one that proves it is the user.

Any local user can connect to a port on 127.0.0.1, and ``trusted: true`` makes the server execute
the files it is sent. So the server writes a random token to a file only its user can read (0600)
and serves a connection only when its first message is ``initialize`` with that token in
``initializationOptions.token``; any other connection gets an error and is closed before a byte
of it reaches the language server. Once a client is in, the port closes: one client per server,
as over stdio.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import logging
import os
import secrets
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pygls.io_ import run_async

if TYPE_CHECKING:
    from tilelang_lsp.server import TileLangLanguageServer

log = logging.getLogger(__name__)

TOKEN_OPTION = "token"
"""The key in ``initializationOptions`` that carries the token; removed before the server sees it."""
FIRST_MESSAGE_TIMEOUT_S = 10.0
FIRST_MESSAGE_LIMIT = 1 << 20
"""Largest ``initialize`` message read before the client is known (bytes)."""


class ListenError(Exception):
    """The server cannot listen (address in use, no permission) or cannot write its token file."""


class Refused(Exception):
    """A connection that is not served; the message says what a client must send."""


def default_token_file(port: int) -> Path:
    """``$XDG_RUNTIME_DIR/tilelang-lsp/tcp-PORT.token`` (a folder only the user can open), else the
    same under ``~/.cache``."""
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    base = Path(runtime) if runtime and Path(runtime).is_dir() else Path.home() / ".cache"
    return base / "tilelang-lsp" / f"tcp-{port}.token"


def write_token_file(path: Path, token: str) -> None:
    """Write ``token`` to ``path``, readable by the user alone (0600), replacing an older file."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    partial = path.with_name(f"{path.name}.{os.getpid()}.partial")
    with contextlib.suppress(FileNotFoundError):
        partial.unlink()
    descriptor = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(descriptor, "w", encoding="ascii") as file:
        file.write(token + "\n")
    os.replace(partial, path)


def admit(body: bytes, token: str, token_file: Path) -> dict[str, Any]:
    """The first message without its token, when it is ``initialize`` carrying ``token``."""
    need = (
        f"this TCP server serves a client whose initialize sends initializationOptions.token ({token_file})"
    )
    try:
        message = json.loads(body)
    except (ValueError, RecursionError):
        raise Refused(f"the first message is not JSON; {need}") from None
    if not isinstance(message, dict) or message.get("method") != "initialize":
        raise Refused(f"the first message must be initialize; {need}")
    params = message.get("params")
    options = params.get("initializationOptions") if isinstance(params, dict) else None
    given = options.pop(TOKEN_OPTION, None) if isinstance(options, dict) else None
    if not isinstance(given, str) or not hmac.compare_digest(given.encode(), token.encode()):
        raise Refused(f"wrong or missing token; {need}")
    return message


async def read_message(reader: asyncio.StreamReader) -> bytes:
    """One LSP message body (``Content-Length`` framing), at most ``FIRST_MESSAGE_LIMIT`` bytes."""
    length = None
    while True:
        line = await reader.readline()
        if not line:
            raise Refused("the connection closed before its first message")
        if not line.strip():
            break
        name, _, value = line.decode("latin-1").partition(":")
        if name.strip().lower() == "content-length" and value.strip().isdigit():
            length = int(value)
    if length is None or not 0 < length <= FIRST_MESSAGE_LIMIT:
        raise Refused("the first message has no usable Content-Length")
    return await reader.readexactly(length)


def _frame(message: dict[str, Any]) -> bytes:
    body = json.dumps(message).encode("utf-8")
    return b"Content-Length: %d\r\n\r\n%s" % (len(body), body)


def serve_tcp(server: TileLangLanguageServer, host: str, port: int, token_file: Path | None) -> None:
    """Listen on ``host:port`` (0: any free port), print where, and serve the first client that
    sends the token; the token file is removed when the server ends."""
    token = secrets.token_urlsafe(32)
    written: list[Path] = []
    try:
        asyncio.run(_serve(server, host, port, token, token_file, written))
    finally:
        for path in written:
            with contextlib.suppress(OSError):
                path.unlink()


async def _serve(
    server: TileLangLanguageServer,
    host: str,
    port: int,
    token: str,
    token_file: Path | None,
    written: list[Path],
) -> None:
    stop_event = threading.Event()
    server._stop_event = stop_event
    finished = asyncio.Event()
    taken = False
    where = Path()

    async def connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal taken
        body = b""
        try:
            body = await asyncio.wait_for(read_message(reader), FIRST_MESSAGE_TIMEOUT_S)
            if taken:
                raise Refused("this TCP server already serves a client")
            message = admit(body, token, where)
        except (Refused, asyncio.TimeoutError, asyncio.IncompleteReadError, ValueError, OSError) as error:
            await _refuse(writer, body, error)
            return
        taken = True
        listener.close()  # nobody else connects while (or after) this client is served
        log.info("client admitted over TCP")
        server.protocol.set_writer(writer)  # type: ignore[arg-type]
        try:
            server.protocol.handle_message(
                json.loads(json.dumps(message), object_hook=server.protocol.structure_message)
            )
            await run_async(
                stop_event=stop_event,
                reader=reader,
                protocol=server.protocol,
                logger=log,
                error_handler=server.report_server_error,
            )
        finally:
            server.shutdown()  # type: ignore[no-untyped-call]
            finished.set()

    try:
        listener = await asyncio.start_server(connection, host, port)
    except OSError as error:
        reason = os.strerror(error.errno) if error.errno else str(error)
        raise ListenError(f"cannot listen on {host}:{port}: {reason}") from None
    bound = listener.sockets[0].getsockname()[1]
    where = token_file or default_token_file(bound)
    try:
        write_token_file(where, token)
    except OSError as error:
        listener.close()
        raise ListenError(f"cannot write the token file {where}: {error.strerror or error}") from None
    written.append(where)
    print(
        f"tilelang-lsp: listening on {host}:{bound}; a client is served only if its initialize sends "
        f"initializationOptions.token, the text of {where}",
        file=sys.stderr,
        flush=True,
    )
    await finished.wait()


async def _refuse(writer: asyncio.StreamWriter, body: bytes, error: BaseException) -> None:
    """Answer the first request with an error naming what is missing, then close the connection."""
    reason = str(error) if isinstance(error, Refused) else "no valid first message in time"
    log.warning("refused a TCP connection: %s", reason)
    request_id = None
    with contextlib.suppress(ValueError, RecursionError, AttributeError, TypeError):
        request_id = json.loads(body).get("id")
    if not isinstance(request_id, (int, str)):
        request_id = None
    with contextlib.suppress(OSError):
        writer.write(
            _frame(
                {
                    "jsonrpc": "2.0",
                    "id": request_id,
                    "error": {"code": -32600, "message": f"tilelang-lsp: {reason}"},
                }
            )
        )
        await writer.drain()
    writer.close()
    with contextlib.suppress(OSError):
        await writer.wait_closed()
