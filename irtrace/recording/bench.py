"""``irtrace record --bench``: run each recorded CUDA kernel on the GPU with TileLang's profiler on
random inputs and keep its latency in the run, so a change in a pass can be tied to a change in
speed. ``prepare_bench`` does everything up to the launch (and needs no GPU); ``launch_bench``
launches. tilelang and torch are imported lazily.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from irtrace.core.errors import IrtraceError
from irtrace.core.resources import BenchResult
from irtrace.core.trace import KernelRun, text_sha256
from irtrace.core.trace_writer import TraceWriter
from irtrace.recording.recorder import describe_error

if TYPE_CHECKING:
    from irtrace.recording.api import PreparedLowering

WARMUP_MS = 25
"""TileLang's ``do_bench`` default: milliseconds of warm-up launches."""
REP_MS = 100
"""TileLang's ``do_bench`` default: milliseconds of timed launches."""


class BenchError(IrtraceError):
    """``--bench`` cannot run here: no CUDA GPU, or combined with options it cannot serve."""


def cuda_device() -> str | None:
    """The name of the first CUDA GPU torch sees, or ``None``."""
    import torch

    if not torch.cuda.is_available():
        return None
    return str(torch.cuda.get_device_name(0))


def require_gpu() -> str:
    """The GPU to bench on; ``BenchError`` saying why there is none."""
    import torch

    device = cuda_device()
    if device is not None:
        return device
    build = torch.__version__
    why = (
        "it is a CPU-only build"
        if torch.version.cuda is None
        else f"it is built for CUDA {torch.version.cuda}"
    )
    raise BenchError(
        f"--bench launches the kernels on a CUDA GPU, and torch {build} sees none ({why}; "
        "no driver or GPU visible?); record without --bench, or on a machine with an NVIDIA GPU"
    )


@dataclass
class PreparedBench:
    """A run's kernel compiled by ``tilelang.compile`` with its profiler: all but the launch."""

    kernel: Any
    """TileLang's ``JITKernel``."""
    profiler: Any
    """``kernel.get_profiler(TensorSupplyType.Randn)``."""
    source_sha256: str
    """SHA-256 of the kernel source ``tilelang.compile`` built (compared with the run's)."""
    backend: str


def prepare_bench(prepared: PreparedLowering) -> PreparedBench:
    """Compile the prepared kernel as TileLang does for running it, with its target and configs."""
    import tilelang

    assert prepared.built is not None
    kernel = tilelang.compile(
        prepared.built.func, target=prepared.tvm_target, pass_configs=prepared.pass_configs or None
    )
    profiler = kernel.get_profiler(tensor_supply_type=tilelang.TensorSupplyType.Randn)
    return PreparedBench(
        kernel,
        profiler,
        text_sha256(str(kernel.get_kernel_source())),
        str(getattr(kernel, "execution_backend", "")),
    )


def launch_bench(bench: PreparedBench, device: str) -> BenchResult:
    """Time the kernel on the GPU: TileLang's ``do_bench`` (CUDA events, mean of the timed launches)."""
    latency = float(bench.profiler.do_bench(warmup=WARMUP_MS, rep=REP_MS))
    return BenchResult(
        latency_ms=latency,
        device=device,
        source_sha256=bench.source_sha256,
        backend=bench.backend,
        warmup=WARMUP_MS,
        repeat=REP_MS,
    )


def bench_run(prepared: PreparedLowering, device: str) -> BenchResult:
    """Compile and time one kernel; a failure is the result's ``error``, never raised."""
    source_sha = None
    try:
        bench = prepare_bench(prepared)
        source_sha = bench.source_sha256
        return launch_bench(bench, device)
    except Exception as error:
        return BenchResult(
            latency_ms=None, device=device, source_sha256=source_sha, error=describe_error(error)
        )


def benchable(run: KernelRun, prepared: PreparedLowering | None) -> bool:
    """A CUDA run that lowered, built in this process (so its PrimFunc is at hand)."""
    from irtrace.recording.machine_code import compiles_to_machine_code

    return prepared is not None and prepared.built is not None and compiles_to_machine_code(run)


@contextmanager
def bench_for(
    writer: TraceWriter, enabled: bool
) -> Iterator[Callable[[KernelRun, PreparedLowering | None], None] | None]:
    """A hook to call after each recorded run that benches CUDA runs and writes their ``bench``
    record (``None`` when not ``enabled``). Raises ``BenchError`` at once without a GPU."""
    if not enabled:
        yield None
        return
    device = require_gpu()

    def after_run(run: KernelRun, prepared: PreparedLowering | None) -> None:
        if prepared is not None and benchable(run, prepared):
            writer.add_bench(run.run_id, bench_run(prepared, device))

    yield after_run
