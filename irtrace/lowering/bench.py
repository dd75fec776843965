"""``irtrace record --bench``: run each recorded CUDA kernel on the GPU with TileLang's profiler on
random inputs and keep its latency in the run, so a change in a pass can be tied to a change in
speed. ``plan_inputs`` binds symbolic dimensions and describes the inputs, ``prepare_bench`` also
compiles (neither needs a GPU); ``launch_bench`` launches. tilelang and torch are imported lazily.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from irtrace.base.errors import IrtraceError
from irtrace.lowering.recorder import describe_error
from irtrace.perf.bench_shapes import (
    BENCH_REPEAT,
    DEFAULT_BENCH,
    NO_SHAPES,
    BenchSettings,
    CommandLineShapes,
    median_ms,
    resolve_shape,
)
from irtrace.trace.model import KernelRun, text_sha256
from irtrace.trace.resources import BenchResult
from irtrace.trace.schema import Instance, LaunchArg, LaunchSignature
from irtrace.trace.writer import TraceWriter

if TYPE_CHECKING:
    from irtrace.lowering.api import PreparedLowering

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


@dataclass(frozen=True)
class BenchInput:
    """One argument the kernel is launched with: a tensor of ``param``'s shape and dtype, or an int."""

    name: str
    """The parameter's buffer name (``A`` for ``A_handle``), or a scalar parameter's name."""
    param: Any
    """TileLang's ``KernelParam`` with every dimension a number (``None`` for a scalar)."""
    scalar: int | float | bool | None = None
    """A scalar parameter's value: the size of the symbolic dimension it names, or what the most
    launched signature passed it."""
    launched: Any = None
    """The integer or bool tensor the most launched signature passed (its values kept at launch),
    used instead of a random one: offsets, lengths and masks must be the program's."""

    @property
    def shape(self) -> tuple[int, ...]:
        return () if self.param is None else tuple(int(dim) for dim in self.param.shape)

    @property
    def dtype(self) -> str:
        return "int" if self.param is None else str(self.param.dtype)


@dataclass(frozen=True)
class BenchPlan:
    """What the kernel is launched with: its symbolic dimensions' sizes and its inputs."""

    shape: dict[str, int]
    shape_from: str
    inputs: tuple[BenchInput, ...]


@dataclass
class PreparedBench:
    """A run's kernel compiled by ``tilelang.compile`` with its profiler and inputs: all but the launch."""

    kernel: Any
    """TileLang's ``JITKernel``."""
    profiler: Any
    """``kernel.get_profiler(TensorSupplyType.Randn)``."""
    source_sha256: str
    """SHA-256 of the kernel source ``tilelang.compile`` built (compared with the run's)."""
    backend: str
    plan: BenchPlan = field(default_factory=lambda: BenchPlan({}, "", ()))


def symbolic_dims(func: Any) -> list[str]:
    """The names of the variables in the shapes of ``func``'s buffer parameters, in parameter order."""
    return list(dict.fromkeys(str(var.name) for var in _shape_vars(func)))


def _launch_args(func: Any, launches: Sequence[LaunchSignature]) -> dict[str, LaunchArg]:
    """The most launched signature's arguments, by the name of the parameter each went to (the
    buffer's name too)."""
    if not launches:
        return {}
    by_name = {arg.param: arg for arg in launches[0].args if arg.param}
    for param in func.params:
        buffer = func.buffer_map.get(param)
        if buffer is not None and str(param.name) in by_name:
            by_name.setdefault(str(buffer.name), by_name[str(param.name)])
    return by_name


def launch_scalars(func: Any, launches: Sequence[LaunchSignature]) -> dict[str, Any]:
    """The scalar parameters' values at the most launched signature (``num_chunks``)."""
    args = _launch_args(func, launches)
    return {
        str(p.name): args[str(p.name)].value
        for p in func.params
        if func.buffer_map.get(p) is None and str(p.name) in args and args[str(p.name)].value is not None
    }


def captured_sizes(
    func: Any, instance: Instance | None, launches: Sequence[LaunchSignature] = ()
) -> dict[str, int]:
    """The sizes a captured call gave the symbolic dimensions: ``T.dynamic`` values as TileLang bound
    them, any other dimension read from the call's tensor of that parameter, and, for a kernel
    compiled from plain numbers that sees its tensors only at launch, the tensors of its most
    launched signature (``_bind_dimensions``: a dimension written ``n + 1`` is solved)."""
    sizes: dict[str, int] = {}
    launched_dims = []
    for name, arg in _launch_args(func, launches).items():
        param = next((p for p in func.params if str(p.name) == name), None)
        buffer = func.buffer_map.get(param) if param is not None else None
        if buffer is None or arg.shape is None or len(arg.shape) != len(buffer.shape):
            continue
        launched_dims += list(zip(buffer.shape, arg.shape, strict=True))
    _bind_dimensions(sizes, launched_dims)
    if instance is None:
        return sizes
    sizes = {**sizes, **{name: int(size) for name, size in instance.dynamic.items()}}
    called_dims = []
    for param in func.params:
        buffer = func.buffer_map.get(param)
        # an eager kernel's parameter is named as the Python argument; a PrimFunc's buffer may be
        tensor = instance.tensors.get(str(param.name)) or (
            instance.tensors.get(str(buffer.name)) if buffer is not None else None
        )
        if buffer is None or tensor is None or len(tensor.shape) != len(buffer.shape):
            continue
        called_dims += list(zip(buffer.shape, tensor.shape, strict=True))
    _bind_dimensions(sizes, called_dims)
    return sizes


def _bind_dimensions(sizes: dict[str, int], dims: Sequence[tuple[Any, int]]) -> None:
    """Add to ``sizes`` what ``(dimension, size)`` pairs give a variable not bound yet: bare
    dimensions first, then affine ones (``n + 1`` of a ``cu_seqlens``, ``solve_dimension``)."""
    from tvm import tirx

    for dim, size in dims:
        if isinstance(dim, tirx.Var):
            sizes.setdefault(str(dim.name), int(size))
    for dim, size in dims:
        solved = solve_dimension(dim, int(size))
        if solved is not None:
            sizes.setdefault(*solved)


def solve_dimension(dim: Any, size: int) -> tuple[str, int] | None:
    """``(name, value)`` of the one variable of an affine dimension ``a * n + b`` that gives it
    ``size``, proven by substituting the value back; ``None`` for a bare variable or a number, a
    dimension of several variables, or one no integer value gives ``size``."""
    from tvm import arith, tirx

    found = _variables(dim)
    if isinstance(dim, tirx.Var) or len({str(v.name) for v in found}) != 1:
        return None
    var = found[0]
    analyzer = arith.Analyzer()

    def at(value: int) -> Any:
        return analyzer.simplify(tirx.stmt_functor.substitute(dim, {var: tirx.IntImm(var.dtype, value)}))

    base, step = at(0), at(1)
    if not isinstance(base, tirx.IntImm) or not isinstance(step, tirx.IntImm):
        return None
    slope = int(step) - int(base)
    if slope == 0 or (size - int(base)) % slope:
        return None
    value = (size - int(base)) // slope
    proof = at(value)
    return (str(var.name), value) if isinstance(proof, tirx.IntImm) and int(proof) == size else None


def plan_inputs(
    func: Any,
    kernel: str,
    *,
    command_line: CommandLineShapes,
    manifest: Mapping[str, int] | None = None,
    instance: Instance | None = None,
    launches: Sequence[LaunchSignature] = (),
    launch_values: Mapping[str, Any] | None = None,
) -> BenchPlan:
    """Bind the kernel's symbolic dimensions and describe its inputs as TileLang's profiler makes
    them (``KernelParam`` of each parameter, every dimension a number). Needs no GPU and no compile;
    ``MissingShapeError`` when a dimension has no size."""
    from tilelang.engine.param import KernelParam
    from tvm import arith, tirx

    shape, shape_from = resolve_shape(
        kernel,
        symbolic_dims(func),
        command_line=command_line.for_kernel(kernel),
        manifest=manifest or {},
        captured=captured_sizes(func, instance, launches),
    )
    scalars = launch_scalars(func, launches)
    by_var = {var: tirx.IntImm(var.dtype, shape[str(var.name)]) for var in _shape_vars(func)}
    analyzer = arith.Analyzer()
    inputs = []
    for param in func.params:
        buffer = func.buffer_map.get(param)
        if buffer is None:
            value = shape.get(str(param.name), scalars.get(str(param.name)))
            if value is None:
                raise BenchError(
                    f"not benched: {kernel} takes the scalar parameter {param.name}, which no launch "
                    "was captured with (--bench gives tensors and symbolic dimensions' sizes)"
                )
            inputs.append(BenchInput(str(param.name), None, value))
            continue
        dims = [int(analyzer.simplify(tirx.stmt_functor.substitute(dim, by_var))) for dim in buffer.shape]
        kept = (launch_values or {}).get(str(param.name))
        if kept is not None and (
            list(kept.shape) != dims or str(kept.dtype).removeprefix("torch.") != str(buffer.dtype)
        ):
            kept = None  # the sizes benched are not those of that launch
        inputs.append(BenchInput(str(buffer.name), KernelParam(buffer.dtype, dims), launched=kept))
    return BenchPlan(shape, shape_from, tuple(inputs))


def _shape_vars(func: Any) -> list[Any]:
    """Every variable in the shapes of ``func``'s buffer parameters (a dimension may be ``2 * n``)."""

    found: list[Any] = []
    for param in func.params:
        buffer = func.buffer_map.get(param)
        for dim in [] if buffer is None else buffer.shape:
            found += _variables(dim)
    return found


def _variables(expr: Any) -> list[Any]:
    """Every variable in ``expr`` (a dimension may be ``2 * n``), in visiting order."""
    from tvm import tirx

    found: list[Any] = []
    tirx.stmt_functor.post_order_visit(
        expr, lambda node: found.append(node) if isinstance(node, tirx.Var) else None
    )
    return found


def prepare_bench(prepared: PreparedLowering, command_line: CommandLineShapes = NO_SHAPES) -> PreparedBench:
    """Bind the kernel's sizes, then compile it as TileLang does for running it, with its target and
    configs (the manifest's ``bench_shape`` comes with ``prepared``)."""
    assert prepared.built is not None
    plan = plan_inputs(
        prepared.built.func, prepared.name, command_line=command_line, manifest=prepared.bench_shape
    )
    return compile_for_bench(prepared.built.func, prepared.tvm_target, prepared.pass_configs, plan)


def compile_for_bench(
    func: Any, target: Any, pass_configs: Mapping[str, Any], plan: BenchPlan
) -> PreparedBench:
    """``tilelang.compile`` with the run's target and pass configs, and TileLang's profiler."""
    import tilelang

    kernel = tilelang.compile(func, target=target, pass_configs=dict(pass_configs) or None)
    profiler = kernel.get_profiler(tensor_supply_type=tilelang.TensorSupplyType.Randn)
    return PreparedBench(
        kernel,
        profiler,
        text_sha256(str(kernel.get_kernel_source())),
        str(getattr(kernel, "execution_backend", "")),
        plan,
    )


def make_inputs(plan: BenchPlan) -> list[Any]:
    """The launch's arguments on the current GPU: random tensors as TileLang's profiler makes them
    (``TensorSupplyType.Randn``), the program's own integer and bool tensors where their values were
    kept at launch, each symbolic dimension's size for a scalar."""
    import tilelang
    from tilelang.utils.tensor import get_tensor_supply

    supply = get_tensor_supply(tilelang.TensorSupplyType.Randn)
    return [
        item.scalar
        if item.param is None
        else item.launched.clone()
        if item.launched is not None
        else supply(item.param)
        for item in plan.inputs
    ]


def kernel_inputs(kernel: Any, arguments: list[Any]) -> list[Any]:
    """The arguments the compiled kernel takes: all its parameters but those it allocates and
    returns itself (``out_idx``, from ``tilelang.jit(out_idx=...)`` or ``T.empty``)."""
    outputs = getattr(kernel, "out_idx", None) or []
    if isinstance(outputs, int):
        outputs = [outputs]
    returned = {index % len(arguments) for index in outputs} if arguments else set()
    return [argument for index, argument in enumerate(arguments) if index not in returned]


def launch_bench(bench: PreparedBench, device: str, repeat: int = BENCH_REPEAT) -> BenchResult:
    """Time the kernel on the GPU: one warm-up ``do_bench``, then ``repeat`` more (CUDA events, each
    the mean of its timed launches) on the same inputs; the latency is their median."""
    inputs = kernel_inputs(bench.kernel, make_inputs(bench.plan))
    bench.profiler.do_bench(warmup=WARMUP_MS, rep=REP_MS, input_tensors=inputs)  # clocks up, caches
    samples = tuple(
        float(bench.profiler.do_bench(warmup=WARMUP_MS, rep=REP_MS, input_tensors=inputs))
        for _ in range(repeat)
    )
    driver, clocks = gpu_facts()  # right after the timed launches: the clocks they ran at
    return BenchResult(
        latency_ms=median_ms(samples),
        device=device,
        source_sha256=bench.source_sha256,
        backend=bench.backend,
        warmup=WARMUP_MS,
        repeat=REP_MS,
        samples_ms=samples,
        shape=bench.plan.shape,
        shape_from=bench.plan.shape_from,
        driver=driver,
        clocks_mhz=clocks,
    )


def failed_bench(error: BaseException, device: str, source_sha256: str | None = None) -> BenchResult:
    """A bench that could not run, with why: an irtrace error's own message, else the exception."""
    message = error.message if isinstance(error, IrtraceError) else describe_error(error)
    return BenchResult(latency_ms=None, device=device, source_sha256=source_sha256, error=message)


def bench_run(
    prepared: PreparedLowering,
    device: str,
    settings: BenchSettings = DEFAULT_BENCH,
) -> BenchResult:
    """Compile and time one kernel; a failure is the result's ``error``, never raised."""
    source_sha = None
    try:
        bench = prepare_bench(prepared, settings.shapes)
        source_sha = bench.source_sha256
        return launch_bench(bench, device, settings.repeat)
    except Exception as error:
        return failed_bench(error, device, source_sha)


_SMI_FIELDS = "uuid,driver_version,clocks.sm,clocks.mem,clocks.max.sm"


def gpu_facts() -> tuple[str, dict[str, int]]:
    """The driver version and the clocks (MHz) of torch's current GPU, from ``nvidia-smi``;
    ``("", {})`` when it is not there or says nothing usable (facts, never a reason to fail)."""
    import shutil
    import subprocess

    import torch

    smi = shutil.which("nvidia-smi")
    if smi is None:
        return "", {}
    try:
        done = subprocess.run(
            [smi, f"--query-gpu={_SMI_FIELDS}", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=20,
        )
        uuid = str(getattr(torch.cuda.get_device_properties(torch.cuda.current_device()), "uuid", ""))
    except (OSError, subprocess.SubprocessError, RuntimeError):
        return "", {}
    return parse_gpu_query(done.stdout, uuid)


def parse_gpu_query(text: str, uuid: str) -> tuple[str, dict[str, int]]:
    """``nvidia-smi --query-gpu=uuid,driver_version,clocks.sm,clocks.mem,clocks.max.sm`` output (one
    line per GPU): the line of the GPU whose UUID ends with ``uuid`` (torch prints it without the
    ``GPU-`` prefix), else the only line; values that are not numbers (``[N/A]``) are left out."""
    rows = [[cell.strip() for cell in line.split(",")] for line in text.splitlines() if line.count(",") == 4]
    chosen = [row for row in rows if uuid and row[0].endswith(uuid)] or (rows if len(rows) == 1 else [])
    if not chosen:
        return "", {}
    _, driver, sm, memory, sm_max = chosen[0]
    clocks = {
        key: int(value)
        for key, value in (("sm", sm), ("memory", memory), ("sm_max", sm_max))
        if value.isdigit()
    }
    return driver if driver[:1].isdigit() else "", clocks


def benchable(run: KernelRun, prepared: PreparedLowering | None) -> bool:
    """A CUDA run that lowered, built in this process (so its PrimFunc is at hand)."""
    from irtrace.lowering.machine_code import compiles_to_machine_code

    return prepared is not None and prepared.built is not None and compiles_to_machine_code(run)


@contextmanager
def bench_for(
    writer: TraceWriter,
    enabled: bool,
    settings: BenchSettings = DEFAULT_BENCH,
) -> Iterator[Callable[[KernelRun, PreparedLowering | None], None] | None]:
    """A hook to call after each recorded run that benches CUDA runs and writes their ``bench``
    record (``None`` when not ``enabled``). Raises ``BenchError`` at once without a GPU."""
    if not enabled:
        yield None
        return
    device = require_gpu()

    def after_run(run: KernelRun, prepared: PreparedLowering | None) -> None:
        if prepared is not None and benchable(run, prepared):
            writer.add_bench(run.run_id, bench_run(prepared, device, settings))

    yield after_run
