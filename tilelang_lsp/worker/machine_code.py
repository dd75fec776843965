"""The resource lens's nvcc work: the worker plans it, a short-lived job runs it.

``compile_input`` runs in the worker after a full CUDA lowering: TileLang's nvcc command for the
run (``irtrace.lowering.machine_code.plan_compile``, which needs tilelang) and the kernel source.
``python -m tilelang_lsp.worker.machine_code`` compiles those the server sends it, one kernel at a
time, and answers each with a ``CompiledKernel`` line; the server starts it with its own
interpreter and kills it when the document changes, so neither the server process nor the worker
waits on nvcc. The job imports no tilelang.
"""

from __future__ import annotations

import sys
from typing import Any

import msgspec

from irtrace.facts.instruction_classes import sass_line_costs
from irtrace.lowering.machine_code import (
    CompilePlan,
    CudaTools,
    MachineCodeError,
    compile_source,
    dynamic_smem_from_module,
    find_cuda_tools,
    plan_compile,
)
from tilelang_lsp.protocol import CompiledKernel, CompileInput, CompileJob, encode


def compile_input(recorded: Any) -> tuple[CompileInput | None, str | None]:
    """What the job needs to compile a recorded CUDA run's source, or why it cannot (no nvcc)."""
    try:
        # the lens shows ptxas's figures only: nvcc is all it needs (no disassembler)
        tools = find_cuda_tools(disassembler=False)
        plan = plan_compile(recorded.run.target_detail, recorded.run.pass_configs, tools)
    except MachineCodeError as error:
        return None, error.message
    return (
        CompileInput(
            nvcc=plan.tools.nvcc,
            disassembler=plan.tools.disassembler,
            arch=plan.arch,
            options=plan.options,
            timeout_s=plan.timeout_s,
            source=recorded.kernel_source,
            dynamic_smem=dynamic_smem_from_module(recorded.stopped_module),
        ),
        None,
    )


def compile_kernel(job: CompileJob) -> CompiledKernel:
    """ptxas's resources for each function of the kernel's source, or nvcc's error (no SASS)."""
    given = job.input
    plan = CompilePlan(CudaTools(given.nvcc, given.disassembler), given.arch, given.options, given.timeout_s)
    lines = job.python_lines
    code = compile_source(
        plan,
        given.source,
        dynamic_smem=given.dynamic_smem,
        disassemble=lines is not None,
        line_info=lines is not None,
    )
    if code.error:
        return CompiledKernel(kernel=job.kernel, error=code.error)
    if lines is None:
        return CompiledKernel(kernel=job.kernel, resources=code.resources)
    if code.sass is None or code.sass_lines is None:
        return CompiledKernel(kernel=job.kernel, error="nvdisasm gave no line table for the SASS")
    costs = sass_line_costs(code.sass, code.sass_lines, ((cu, "", py) for cu, py in lines))
    counts = tuple((item.line, item.counts) for item in costs.lines)
    return CompiledKernel(kernel=job.kernel, resources=code.resources, line_counts=counts)


def sass_input(run: Any, source: str) -> tuple[CompileInput | None, str | None]:
    """What the hover's nvcc job needs to list a recorded CUDA run's SASS with its line table (the
    source and TileLang's nvcc command, nvdisasm beside it), or why it cannot."""
    try:
        plan = plan_compile(run.target_detail, run.pass_configs, find_cuda_tools())
    except MachineCodeError as error:
        return None, error.message
    if not plan.tools.disassembler_name.startswith("nvdisasm"):
        return None, "the SASS line table needs nvdisasm (only cuobjdump was found)"
    return (
        CompileInput(
            nvcc=plan.tools.nvcc,
            disassembler=plan.tools.disassembler,
            arch=plan.arch,
            options=plan.options,
            timeout_s=plan.timeout_s,
            source=source,
        ),
        None,
    )


def main() -> None:
    """Read the jobs (one JSON array on stdin), answer one line per kernel on stdout."""
    try:
        jobs = msgspec.json.decode(sys.stdin.buffer.read(), type=list[CompileJob])
    except msgspec.DecodeError as error:
        print(f"tilelang-lsp machine code: malformed jobs: {error}", file=sys.stderr)
        sys.exit(2)
    for job in jobs:
        sys.stdout.buffer.write(encode(compile_kernel(job)))
        sys.stdout.buffer.flush()


if __name__ == "__main__":
    main()
