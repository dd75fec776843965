"""``irtrace run --machine-code`` and ``--bench``: each captured CUDA run's source compiled to PTX and
SASS as ``irtrace record --machine-code`` does, and each benched with the sizes of the program's
own call (its ``T.const`` values are in the kernel; its ``T.dynamic`` ones come from the instance,
or from ``--bench-shape``).

A bench that cannot run (no GPU here, a kernel lowered in another process) is recorded as a
failed bench with the reason: the script's trace is never lost to it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from irtrace.lowering.bench import (
    PreparedBench,
    compile_for_bench,
    cuda_device,
    failed_bench,
    launch_bench,
    plan_inputs,
)
from irtrace.lowering.loader import CapturedKernel
from irtrace.lowering.machine_code import MachineCodeCompiler, compiles_to_machine_code, machine_code_for
from irtrace.perf.bench_shapes import DEFAULT_BENCH, BenchSettings
from irtrace.trace.model import KernelRun
from irtrace.trace.resources import BenchResult
from irtrace.trace.writer import TraceWriter


def add_machine_code(writer: TraceWriter, runs: Sequence[KernelRun]) -> MachineCodeCompiler:
    """Compile every CUDA run's kernel source (nvcc, no GPU needed) and write its ``ptx`` and
    ``sass`` stages; returns the compiler, for its timings."""
    with machine_code_for(writer, True) as compiler:
        assert compiler is not None
        for run in runs:
            compiler.after_run(run)
    return compiler


def add_benches(
    writer: TraceWriter,
    runs: Sequence[KernelRun],
    kernels: Mapping[int, CapturedKernel],
    settings: BenchSettings = DEFAULT_BENCH,
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
        if run.instance is not None and run.instance.stand_in:
            result = BenchResult(latency_ms=None, device=device or "", error=STAND_IN_REFUSAL)
        elif device is None:
            result = unlaunched_bench(run, kernel, settings, no_gpu)
        elif kernel is None:
            result = BenchResult(
                latency_ms=None,
                device=device,
                error="the kernel was lowered in another process; only the script's own process's "
                "kernels can be benched",
            )
        else:
            result = bench_captured(run, kernel, device, settings)
        written.append(writer.add_bench(run.run_id, result))
    return written


STAND_IN_REFUSAL = (
    "not benched: the kernel was captured on GPU stand-ins (--no-gpu, IRTRACE_NO_GPU=1), so no time "
    "of it would be real; run the script under irtrace run --bench on a machine with an NVIDIA GPU"
)


def unlaunched_bench(
    run: KernelRun, kernel: CapturedKernel | None, settings: BenchSettings, why: str
) -> BenchResult:
    """A bench that cannot launch here, with the sizes it would have used (so a trace made without a
    GPU still shows them), or the missing size, which would have failed it anyway."""
    if kernel is None:
        return BenchResult(latency_ms=None, device="", error=why)
    try:
        plan = plan_inputs(
            captured_func(kernel),
            run.kernel,
            command_line=settings.shapes,
            instance=run.instance,
            launches=run.launches,
        )
    except Exception as error:
        return failed_bench(error, "")
    return BenchResult(latency_ms=None, device="", error=why, shape=plan.shape, shape_from=plan.shape_from)


def prepare_captured_bench(
    run: KernelRun, kernel: CapturedKernel, settings: BenchSettings = DEFAULT_BENCH
) -> PreparedBench:
    """Bind the captured kernel's symbolic dimensions (``--bench-shape``, else the script's call)
    and compile it as TileLang does for running it, with the run's target and pass configs."""
    from tilelang import tvm

    func = captured_func(kernel)
    plan = plan_inputs(
        func,
        run.kernel,
        command_line=settings.shapes,
        instance=run.instance,
        launches=run.launches,
        launch_values=kernel.launch_values,
    )
    target = tvm.target.Target(json.loads(run.target_detail))
    return compile_for_bench(func, target, run.pass_configs, plan)


def captured_func(kernel: CapturedKernel) -> Any:
    """The captured module's PrimFunc of that kernel, found by its ``GlobalVar`` (the run may show
    another name: a PrimFunc called ``main`` is recorded under its factory's name)."""
    functions = dict(kernel.obj.functions.items())
    if kernel.function is not None and kernel.function in functions:
        return functions[kernel.function]
    by_name = {str(gv.name_hint): f for gv, f in functions.items()}
    if kernel.name in by_name:
        return by_name[kernel.name]
    raise LookupError(f"the captured module has no function for kernel {kernel.name!r}")


def bench_captured(
    run: KernelRun, kernel: CapturedKernel, device: str, settings: BenchSettings = DEFAULT_BENCH
) -> BenchResult:
    """Time the captured kernel on random inputs of the call's sizes; a failure is the result's error."""
    source_sha = None
    try:
        bench = prepare_captured_bench(run, kernel, settings)
        source_sha = bench.source_sha256
        return launch_bench(bench, device, settings.repeat)
    except Exception as error:
        return failed_bench(error, device, source_sha)


def add_machine_code_and_benches(
    writer: TraceWriter,
    runs: Sequence[KernelRun],
    kernels: Mapping[int, CapturedKernel],
    *,
    machine_code: bool,
    bench: BenchSettings | None,
) -> list[KernelRun]:
    """What ``irtrace run --machine-code/--bench`` adds to the runs (``bench``: the ``--bench``
    options, ``None`` without it); returns them as written."""
    if machine_code:
        add_machine_code(writer, runs)
    if bench is not None:
        add_benches(writer, runs, kernels, bench)
    return [writer.run(run.run_id) for run in runs]
