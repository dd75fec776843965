"""The lowering worker: ``python -m tilelang_mcp.worker``, one per server, restarted when it dies.

It imports tilelang once and warms up on a bundled kernel, then answers one JSON line per
request on stdin: ``{"id": 1, "method": "record", "params": {...}, "timeout_s": 60,
"memory_mb": 8192}`` gets ``{"id": 1, "result": {...}}`` or ``{"id": 1, "error": "..."}``. Each
request runs in a child forked for it (``backend.run_job``), so kernel code never runs here and a
hang or a crash ends only that child. The protocol keeps a copy of the original stdout; file
descriptor 1 is pointed at stderr, so whatever TileLang, TVM or a kernel prints goes there. The
worker reads stdin on its one thread: forking from a process with other threads is unsafe.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import IO, Any


def send(out: IO[str], message: dict[str, Any]) -> None:
    out.write(json.dumps(message) + "\n")
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


def handle(message: dict[str, Any], protocol_fd: int) -> dict[str, Any]:
    from tilelang_mcp.backend import IrtraceError, JobError, JobLimits, describe_job_error, run_job

    request_id = message.get("id")
    limits = JobLimits(float(message.get("timeout_s", 60)), int(message.get("memory_mb", 8192)))
    try:
        result = run_job(str(message.get("method")), message.get("params") or {}, limits, (protocol_fd,))
        return {"id": request_id, "result": result}
    except (JobError, IrtraceError) as error:
        return {"id": request_id, "error": describe_job_error(error)}
    except Exception as error:  # a bug of ours: say what it was, keep serving
        traceback.print_exc()
        return {"id": request_id, "error": f"internal error in the worker: {type(error).__name__}: {error}"}


def main() -> None:
    protocol_fd = os.dup(1)
    protocol = os.fdopen(protocol_fd, "w", encoding="utf-8")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    started = time.perf_counter()
    try:
        import tilelang
    except Exception as error:
        send(
            protocol, {"event": "failed", "error": f"cannot import tilelang: {type(error).__name__}: {error}"}
        )
        return
    import_s = time.perf_counter() - started
    warmup_s = warm_up()
    send(
        protocol,
        {
            "event": "ready",
            "pid": os.getpid(),
            "tilelang": str(getattr(tilelang, "__version__", "?")),
            "import_s": import_s,
            "warmup_s": warmup_s,
        },
    )
    for line in sys.stdin:
        try:
            message = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(message, dict):
            send(protocol, handle(message, protocol_fd))
    # nothing is left to flush: skip the interpreter's slow teardown of tilelang and TVM
    os._exit(0)


if __name__ == "__main__":
    main()
