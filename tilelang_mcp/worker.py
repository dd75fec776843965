"""The lowering worker: ``python -m tilelang_mcp.worker``, one per server, restarted when it dies.

It imports tilelang once and warms up on a bundled kernel, then answers the worker protocol the
language server's worker speaks (``irtrace.core.worker_protocol``), with the MCP server's jobs as
its requests (``tilelang_mcp.protocol``): each ``Call`` gets a ``Result`` or a ``Failure``; a
request that does not follow the schema is refused with the field that is wrong. Each job runs in
a child forked for it (``backend.run_job``), so kernel code never runs here and a hang or a crash
ends only that child. The protocol keeps a copy of the original stdout; file descriptor 1 is
pointed at stderr, so whatever TileLang, TVM or a kernel prints goes there. The worker reads
stdin on its one thread: forking from a process with other threads is unsafe, so a ``Cancel``
is read only between jobs (each job ends at its own time limit) and has nothing left to stop.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import IO

from irtrace.core.worker_protocol import (
    Call,
    Cancel,
    Failure,
    ProtocolError,
    Ready,
    Result,
    Warm,
    encode,
    message_id,
    raw,
    resident_mb,
)
from tilelang_mcp.protocol import CODEC, JobRequest


def send(out: IO[bytes], message: bytes) -> None:
    out.write(message)
    out.flush()


def warm_up() -> float:
    """Lower the bundled warm-up kernel for the default target; seconds it took."""
    from irtrace.core.specs import parse_spec
    from irtrace.core.trace_writer import TraceWriter
    from irtrace.recording.api import RecordRequest, record_kernels
    from irtrace.recording.resolve.entry_point import warm_meta_tensors
    from irtrace.recording.warmup import WARMUP_KERNEL

    began = time.perf_counter()
    warm_meta_tensors()  # what the resolver's entry-point runs use
    with tempfile.TemporaryDirectory(prefix="tilelang-mcp-warmup-") as folder:
        path = Path(folder) / "tilelang_mcp_warmup.py"
        path.write_text(WARMUP_KERNEL, encoding="utf-8")
        try:
            record_kernels(
                [RecordRequest(parse_spec(f"{path}::warmup()"), ("cuda:sm_90",))], TraceWriter(None)
            )
        except Exception:
            traceback.print_exc()
    return time.perf_counter() - began


def answer(line: bytes, protocol_fd: int) -> bytes | None:
    """The protocol line answering ``line``: the job's ``Result``, or a ``Failure`` saying why (a
    request that does not follow the schema names the field, and runs nothing); ``None`` for a
    ``Cancel`` or a line without a readable id."""
    try:
        message = CODEC.decode_to_worker(line)
    except ProtocolError as error:
        print(f"tilelang-mcp worker: {error}", file=sys.stderr)
        request_id = message_id(line)
        return encode(Failure(id=request_id, error=str(error))) if request_id is not None else None
    if isinstance(message, Cancel):
        return None  # read only once its job has ended (see the module's docstring)
    return encode(handle(message, protocol_fd))


def handle(call: Call[JobRequest], protocol_fd: int) -> Result | Failure:
    from tilelang_mcp.backend import IrtraceError, JobError, describe_job_error, run_job

    try:
        body = run_job(call.request, (protocol_fd,))
        return Result(id=call.id, body=raw(body), rss_mb=resident_mb())
    except (JobError, IrtraceError) as error:
        return Failure(id=call.id, error=describe_job_error(error))
    except Exception as error:  # a bug of ours: say what it was, keep serving
        traceback.print_exc()
        return Failure(id=call.id, error=f"internal error in the worker: {type(error).__name__}: {error}")


def main() -> None:
    protocol_fd = os.dup(1)
    protocol = os.fdopen(protocol_fd, "wb")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    started = time.perf_counter()
    try:
        import tilelang
    except Exception as error:
        print(
            f"tilelang-mcp worker: cannot import tilelang: {type(error).__name__}: {error}", file=sys.stderr
        )
        sys.exit(1)
    import_s = time.perf_counter() - started
    warmup_s = warm_up()  # before Ready: every job's child is forked warm
    folder = os.path.dirname(tilelang.__file__ or "")
    version = str(getattr(tilelang, "__version__", "?"))
    ready = Ready(
        pid=os.getpid(), import_s=import_s, prefix=sys.prefix, tilelang=folder, tilelang_version=version
    )
    send(protocol, encode(ready))
    send(protocol, encode(Warm(warmup_s=warmup_s)))
    for line in sys.stdin.buffer:
        if not line.strip():
            continue
        reply = answer(line, protocol_fd)
        if reply is not None:
            send(protocol, reply)
    # nothing is left to flush: skip the interpreter's slow teardown of tilelang and TVM
    os._exit(0)


if __name__ == "__main__":
    main()
