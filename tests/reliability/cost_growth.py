"""Valid traces whose records of one kind are grown by a factor, built from the schema's record
kinds (``RECORD_TYPES``), and what a reader costs on them: wall time and peak resident memory,
measured in a forked child. ``test_cost_growth.py`` grows each kind 10x for each reader.

The traces are synthetic but valid for every reader: runs of passes (each with its ``start``),
IR texts, source maps onto a kernel file the trace stores, layouts, machine code, benchmarks and
launches, so a reader does its real work on each kind.
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
import io
import os
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path

from irtrace.trace.model import STATUS_OK
from irtrace.trace.resources import BenchResult, KernelResources
from irtrace.trace.schema import (
    RECORD_TYPES,
    BufferLayout,
    Instance,
    KernelRun,
    LaunchArg,
    LaunchSignature,
    LayoutRecord,
    MachineLines,
    PassRecord,
    SourceMapRecord,
)
from irtrace.trace.writer import TraceWriter

KERNEL_FILE = "import tilelang.language as T\n\n\ndef kernel(A, B):\n" + "".join(
    f"    T.copy(A[{i}], B[{i}])\n" for i in range(40)
)
"""The kernel's Python file as the trace stores it: line 5 on are statements the maps name."""
TARGET = "cuda:sm_90"


@dataclass(frozen=True)
class Shape:
    """How many records of each kind a trace holds (per run, but ``runs`` and ``texts``)."""

    runs: int = 1
    passes: int = 8
    texts: int = 4
    source_maps: int = 4
    layouts: int = 2
    machine: int = 1
    benches: int = 1
    launches: int = 1


GROWS: dict[str, str] = {
    "run": "runs",
    "end": "runs",  # one per run
    "start": "passes",  # one per pass: a complete trace has no start without its pass
    "pass": "passes",
    "ir": "texts",
    "srcmap": "source_maps",
    "layout": "layouts",
    "machine": "machine",
    "bench": "benches",
    "launches": "launches",
}
"""Which count of ``Shape`` grows a record kind."""
ONE_PER_FILE = {"header", "footer"}
"""Record kinds a trace holds exactly once."""
BASE: dict[str, int] = {
    "runs": 2,
    "passes": 40,
    "texts": 40,
    "source_maps": 1500,
    "layouts": 1500,
    "machine": 150,
    "benches": 1000,
    "launches": 1000,
}
"""The count each grown trace starts from: enough records of that kind to outweigh the rest, and
for the small records (maps, layouts, benchmarks, launches) enough that a collection rebuilt per
record would show (past the first few, those records are minimal)."""


def kinds() -> list[str]:
    """Every record kind the schema knows that a trace can hold more of."""
    return sorted(set(RECORD_TYPES) - ONE_PER_FILE)


def _ir_text(i: int) -> str:
    body = "".join(f"    T.copy(A[{j}], B[{j}])  # {i}\n" for j in range(6))
    return f"# from tvm.script import tir as T\n@T.prim_func\ndef main{i}(A, B):\n{body}"


def _layout(i: int) -> BufferLayout:
    return BufferLayout(
        buffer=f"A_shared_{i}",
        scope="shared.dyn",
        dtype="float16",
        shape=[64, 64],
        kind="layout",
        input_shape=[64, 64],
        output_shape=[4096],
        forward_vars=["_i", "_j"],
        forward_index=["_i * 64 + _j"],
        summary="linear",
        text="Layout([64, 64] -> [4096])",
    )


def write_trace(path: Path, shape: Shape) -> Path:
    """A valid trace of ``shape``'s counts, written by irtrace's own writer."""
    with TraceWriter(path) as writer:
        kernel_sha = writer.add_text(KERNEL_FILE)
        texts = [writer.add_text(_ir_text(i)) for i in range(max(shape.texts, 3))]
        source = writer.add_text("__global__ void main_kernel() {\n" + "  x = 1;\n" * 20 + "}\n")
        ptx = writer.add_text("// ptx\n" + "  mov.u32 %r1, 1;\n" * 20)
        for r in range(shape.runs):
            _write_run(writer, r, shape, texts, kernel_sha, source, ptx)
    return path


def _write_run(
    writer: TraceWriter, r: int, shape: Shape, texts: list[str], kernel_sha: str, source: str, ptx: str
) -> None:
    run = writer.begin_run(
        KernelRun(
            run_id=0,
            kernel=f"k{r}",
            spec=f"kernels/kernel.py::kernel({r})",
            args={"args": [r], "kwargs": {}},
            target=TARGET,
            target_detail="cuda -arch=sm_90",
            pass_configs={},
            tilelang_version="0.1.15",
            host={"hostname": "h", "platform": "linux", "python": "3.11"},
            kernel_file_sha256=kernel_sha,
            instance=Instance(
                process="pid 1", pid=1, definition="kernels/kernel.py:4", call_site="main.py:9"
            ),
        )
    )
    run_id = run.run_id
    passes = max(shape.passes, 2)
    for i in range(passes):
        record = PassRecord(
            index=i,
            name=f"tl.Pass{i % 7}",
            raw_name=f"tl.Pass{i % 7}",
            phase="lower",
            pipeline="cuda",
            depth=0,
            parent=None,
            start_s=i * 0.001,
            wall_s=0.001,
            self_s=0.001,
            changed=True,
            ir_before=texts[i % len(texts)],
            ir_after=texts[(i + 1) % len(texts)],
        )
        writer.start_pass(run_id, record)
        writer.add_pass(run_id, record)
    writer.add_source_map(  # the input's map, with the lines the frontend ran (one per srcmap grown)
        run_id,
        SourceMapRecord(
            run=run_id,
            ir=texts[0],
            statements=6,
            with_span=6,
            files=["kernels/kernel.py"],
            lines=[(4 + j, 0, 5 + j) for j in range(6)],
            ran=[(0, 5 + j % 40) for j in range(shape.source_maps)],
        ),
    )
    for m in range(shape.source_maps):
        after = m % passes
        writer.add_source_map(
            run_id,
            SourceMapRecord(
                run=run_id,
                after=after,
                ir=texts[(after + 1) % len(texts)],
                statements=6,
                with_span=6,
                files=["kernels/kernel.py"],
                lines=[(4 + j, 0, 5 + (j + m) % 40) for j in range(6 if m < 8 else 1)],
            ),
        )
    for n in range(shape.layouts):
        shown = [_layout(n)] if n < 4 else []
        writer.add_layouts(run_id, LayoutRecord(run=run_id, after=n % passes, layouts=shown))
    writer.end_run(run_id, status=STATUS_OK, error=None, total_s=0.1, input_ir=texts[0], source_sha256=source)
    for m in range(shape.machine):
        stage = PassRecord(
            index=passes + m,
            name="ptx",
            raw_name="ptx",
            phase="machine",
            pipeline=None,
            depth=0,
            parent=None,
            start_s=0.1,
            wall_s=0.001,
            self_s=0.001,
            changed=True,
            ir_before=source,
            ir_after=ptx,
        )
        resources = [
            KernelResources(
                function="main_kernel",
                arch="sm_90",
                registers=32,
                spill_stores=0,
                spill_loads=0,
                static_smem=0,
                barriers=1,
                stack=0,
                dynamic_smem=0,
            )
        ]
        lines = [MachineLines(stage="ptx", ir=ptx, source=source, lines=[(2 + j, 2 + j) for j in range(10)])]
        writer.add_machine_code(run_id, [stage], resources, lines)
    for b in range(shape.benches):
        writer.add_bench(
            run_id, BenchResult(latency_ms=0.01 * (b + 1), device="H100", samples_ms=(0.01,) * 5)
        )
    for n in range(shape.launches):
        signature = LaunchSignature(
            args=[LaunchArg(param="A", shape=[64, 64 + n], dtype="float16", strides=[64 + n, 1])], count=n + 1
        )
        writer.add_launches(run_id, [signature])


def grown_shape(count: str, factor: int) -> Shape:
    """The small shape with ``count`` (a ``Shape`` field, ``GROWS``'s values) at ``BASE`` times
    ``factor``."""
    return replace(Shape(), **{count: BASE[count] * factor})


@dataclass(frozen=True)
class Cost:
    seconds: float
    peak_bytes: int


def measure(reader: Callable[[], object]) -> Cost:
    """What one call of ``reader`` costs, in a forked child: its wall time and its peak resident
    memory (the kernel's count, ``wait4``). The child starts as a copy of this process, so its
    peak includes this process's own memory: compare with ``measure(lambda: None)``."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into the test
        status = 1
        try:
            os.close(read_end)
            # the test process's own objects are no input: a full collection would scan them all,
            # as often as the reader allocates, which no command-line reader pays
            gc.freeze()
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                started = time.perf_counter()
                reader()
                seconds = time.perf_counter() - started
            os.write(write_end, repr(seconds).encode())
            status = 0
        except BaseException:
            os.write(write_end, traceback.format_exc().encode()[-4000:])
        finally:
            os._exit(status)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as answer:
        said = answer.read().decode()
    _, status, usage = os.wait4(pid, 0)
    assert status == 0, said
    return Cost(float(said), usage.ru_maxrss * 1024)


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:12]


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        yield
