"""The server's side of the nvcc job for the resource lens: start it, read its answers, kill it.

The job (``python -m tilelang_lsp.worker.machine_code``) runs with the server's interpreter in a
session of its own, so nvcc dies with it when the document changes or the server shuts down; the
server process itself never imports the compiler's side (``irtrace.lowering``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
from collections.abc import AsyncIterator, Sequence

import msgspec

from tilelang_lsp.protocol import CompiledKernel, CompileJob, ProtocolError, decode_body

log = logging.getLogger(__name__)

JOB_MODULE = "tilelang_lsp.worker.machine_code"


async def compile_kernels(jobs: Sequence[CompileJob]) -> AsyncIterator[CompiledKernel]:
    """Each kernel's resources or error, as the job finishes it; closing the iterator (a cancelled
    caller) kills the job and the nvcc it runs."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        JOB_MODULE,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        start_new_session=True,
    )
    assert process.stdin is not None and process.stdout is not None
    try:
        process.stdin.write(msgspec.json.encode(list(jobs)))
        await process.stdin.drain()
        process.stdin.close()
        while line := await process.stdout.readline():
            try:
                yield decode_body(line, CompiledKernel, "a machine code job")
            except ProtocolError as error:
                log.warning("%s", error)
        await process.wait()
    finally:
        if process.returncode is None:
            with contextlib.suppress(OSError):
                os.killpg(process.pid, signal.SIGKILL)
