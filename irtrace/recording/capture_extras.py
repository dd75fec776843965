"""``irtrace run --machine-code`` and ``--bench``: each captured CUDA run's source compiled to PTX and
SASS as ``irtrace record --machine-code`` does, and each benched with the sizes of the program's
own call (its ``T.const`` values are in the kernel; its ``T.dynamic`` ones come from the instance).

A bench that cannot run (no GPU here, a kernel lowered in another process) is recorded as a
failed bench with the reason: the script's trace is never lost to it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

from irtrace.core.resources import BenchResult
from irtrace.core.trace import KernelRun, text_sha256
from irtrace.core.trace_writer import TraceWriter
from irtrace.recording.bench import REP_MS, WARMUP_MS, cuda_device
from irtrace.recording.loader import CapturedKernel
from irtrace.recording.machine_code import MachineCodeCompiler, compiles_to_machine_code, machine_code_for
from irtrace.recording.recorder import describe_error


def add_machine_code(writer: TraceWriter, runs: Sequence[KernelRun]) -> MachineCodeCompiler:
    """Compile every CUDA run's kernel source (nvcc, no GPU needed) and write its ``ptx`` and
    ``sass`` stages; returns the compiler, for its timings."""
    with machine_code_for(writer, True) as compiler:
        assert compiler is not None
        for run in runs:
            compiler.after_run(run)
    return compiler


def add_benches(
    writer: TraceWriter, runs: Sequence[KernelRun], kernels: Mapping[int, CapturedKernel]
) -> list[KernelRun]:
    """Bench every CUDA run that lowered; ``kernels`` gives the kernel of each run this process
    lowered (by run id). Returns the runs as written, each with its ``bench`` record."""
    benched = [run for run in runs if compiles_to_machine_code(run)]
    if not benched:
        return []
    device = cuda_device()
    no_gpu = (
        "not benched: torch sees no CUDA GPU on this machine; run the script under irtrace run --bench "
        "on a machine with an NVIDIA GPU"
    )
    written = []
    for run in benched:
        kernel = kernels.get(run.run_id)
        if device is None:
            result = BenchResult(latency_ms=None, device="", error=no_gpu)
        elif kernel is None:
            result = BenchResult(
                latency_ms=None,
                device=device,
                error="the kernel was lowered in another process; only the script's own process's "
                "kernels can be benched",
            )
        else:
            result = bench_captured(run, kernel, device)
        written.append(writer.add_bench(run.run_id, result))
    return written


def bench_captured(run: KernelRun, kernel: CapturedKernel, device: str) -> BenchResult:
    """Compile the captured kernel as TileLang does for running it (the run's target and pass
    configs), then time it with TileLang's profiler on random inputs of the call's sizes."""
    import tilelang
    from tilelang import tvm

    source_sha = None
    try:
        func = {str(gv.name_hint): f for gv, f in kernel.obj.functions.items()}[kernel.name]
        target = tvm.target.Target(json.loads(run.target_detail))
        compiled = tilelang.compile(func, target=target, pass_configs=dict(run.pass_configs) or None)
        source_sha = text_sha256(str(compiled.get_kernel_source()))
        profiler = compiled.get_profiler(tensor_supply_type=tilelang.TensorSupplyType.Randn)
        dynamic = dict(run.instance.dynamic) if run.instance is not None else {}
        latency = float(
            profiler.do_bench(warmup=WARMUP_MS, rep=REP_MS, dynamic_symbolic_constraints=dynamic or None)
        )
        return BenchResult(
            latency_ms=latency,
            device=device,
            source_sha256=source_sha,
            backend=str(getattr(compiled, "execution_backend", "")),
            warmup=WARMUP_MS,
            repeat=REP_MS,
        )
    except Exception as error:
        return BenchResult(
            latency_ms=None, device=device, source_sha256=source_sha, error=describe_error(error)
        )


def add_machine_code_and_benches(
    writer: TraceWriter,
    runs: Sequence[KernelRun],
    kernels: Mapping[int, CapturedKernel],
    *,
    machine_code: bool,
    bench: bool,
) -> list[KernelRun]:
    """What ``irtrace run --machine-code/--bench`` adds to the runs; returns them as written."""
    if machine_code:
        add_machine_code(writer, runs)
    if bench:
        add_benches(writer, runs, kernels)
    return [writer.run(run.run_id) for run in runs]
