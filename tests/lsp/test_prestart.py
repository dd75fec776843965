"""The worker started before the server's imports: adopted once, or stopped, never left behind."""

from __future__ import annotations

import asyncio
import sys

from tilelang_lsp import worker_client
from tilelang_lsp.worker_client import WorkerClient, discard_prestarted, prestart_worker, take_prestarted


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

    async def adopt() -> dict[str, object]:
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
    assert ready["event"] == "ready" and ready["pid"] == early.pid
