"""How a long-lived worker process gets ready: tilelang imported, meta tensors ready, the warm-up
kernel lowered once through the recorder (both servers' workers do it this one way)."""

from __future__ import annotations


def prepare_process() -> tuple[str, str]:
    """Import tilelang (the slow import) and ready the meta tensors that entry-point runs use:
    PyTorch imports torch._dynamo on the first meta operation (1-6 s), which must not land in any
    request's time limit. Once per process; the folder tilelang came from and its version."""
    import os

    import tilelang

    from irtrace.lowering.resolve.entry_point import warm_meta_tensors

    warm_meta_tensors()
    return os.path.dirname(tilelang.__file__ or ""), str(getattr(tilelang, "__version__", "?"))


def warm_up(target: str) -> float:
    """Lower ``WARMUP_KERNEL`` once for ``target`` through the recorder, as every request will
    (after ``prepare_process``); the seconds it took. Both servers' workers warm up this one way; a
    failure is printed, never raised: a cold worker still works."""
    import tempfile
    import time
    import traceback
    from pathlib import Path

    from irtrace.lowering.api import RecordRequest, record_kernels
    from irtrace.lowering.warmup import WARMUP_KERNEL
    from irtrace.targets.specs import parse_spec
    from irtrace.trace.writer import TraceWriter

    began = time.perf_counter()
    prepare_process()
    with tempfile.TemporaryDirectory(prefix="irtrace-warmup-") as folder:
        path = Path(folder) / "irtrace_warmup.py"
        path.write_text(WARMUP_KERNEL, encoding="utf-8")
        try:
            record_kernels([RecordRequest(parse_spec(f"{path}::warmup()"), (target,))], TraceWriter(None))
        except Exception:
            traceback.print_exc()
    return time.perf_counter() - began
