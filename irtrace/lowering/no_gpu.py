"""``irtrace run --no-gpu`` and ``IRTRACE_NO_GPU=1``: a GPU program runs to its end on a machine
without a GPU, and every kernel it builds is lowered for real and captured.

Each compilation runs TileLang's own pipeline up to and including codegen (so the captured passes
and kernel source are those a GPU machine gives), but the device compiler is not called and the
compiled kernel is a stand-in: calling it launches nothing and returns outputs of the declared
shapes on PyTorch's ``meta`` device. The program's other GPU work is made harmless with the
language server's stand-ins (``irtrace.lowering.resolve.entry_point``): tensors asked for on
``cuda`` are made on ``meta`` (with CPU twins of the values known without a GPU: ``twins``),
``torch.cuda`` answers for the target, comparisons of meta tensors pass. That also makes the
program's references cheap: ``a @ b`` on meta tensors computes nothing, where a CPU fallback can
take minutes. An ``@autotune`` kernel is built with its first config
only (nothing can be timed). Every run captured this way says ``stand_in`` in its instance, and
``--bench`` refuses it: no result of a stand-in is ever shown as a real one.
"""

from __future__ import annotations

import contextlib
import os
import sys
import traceback
import types
from collections.abc import Iterator
from typing import Any

from irtrace.lowering.resolve.entry_point import replace_for
from irtrace.targets.backends import TargetSpec

NO_GPU_ENV = "IRTRACE_NO_GPU"
"""Set to ``1`` (``irtrace run --no-gpu`` sets it for the script and the processes it starts),
captures in this process run the program's GPU work on stand-ins."""

STAND_IN_LATENCY_MS = 1.0
"""What a stand-in's bench or a CUDA event's timing answers: not 0, which programs divide by."""
STAND_IN_SMS = {80: 108, 90: 132, 100: 148}
"""SMs the stand-in GPU reports per compute capability (A100, H100 SXM, B200): persistent kernels
size their grid by it (``driver.get_num_sms()``), so it must match the GPU a trace is compared with."""
DEFAULT_SMS = 132

_ACTIVE: list[bool] = []
"""Non-empty while this process's GPU work runs on stand-ins."""


def requested() -> bool:
    """Whether this process's environment asks for stand-ins (``IRTRACE_NO_GPU=1``)."""
    return os.environ.get(NO_GPU_ENV) == "1"


def active() -> bool:
    """Whether kernels compiled now are stand-ins (their runs are marked ``stand_in``)."""
    return bool(_ACTIVE)


class StandInAdapter:
    """What a compiled kernel runs through under ``--no-gpu``: the lowered artifact's facts (source,
    parameters) are real, the launch is a stand-in returning meta tensors."""

    def __init__(self, func: Any, out_idx: Any, artifact: Any) -> None:
        from irtrace.lowering.resolve.entry_point import StandInKernel

        self.stand_in = StandInKernel(func, out_idx)
        self.func = self.stand_in
        self.result_idx = self.stand_in.outputs
        self.params = artifact.params
        self.artifact = artifact

    def get_kernel_source(self, kernel_only: bool = True) -> str:
        return str(self.artifact.kernel_source or "")

    def get_host_source(self) -> str:
        return str(self.artifact.host_mod) if self.artifact.host_mod is not None else ""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.stand_in(*args, **kwargs)


def _answer_torch_cuda(stack: contextlib.ExitStack, target: TargetSpec) -> None:
    """Tensors on ``cuda`` made on ``meta`` and ``torch.cuda``'s device queries answered (the
    language server's stand-ins); then ``torch.cuda.is_available()`` says yes, so a program that
    picks its device by it takes the cheap meta path rather than a CPU reference."""
    import torch

    from irtrace.lowering.resolve.entry_point import _harmless_gpu_work  # the resolver's stand-ins

    if torch.cuda.is_available():
        return  # a real GPU answers for itself; only the kernels are stand-ins
    _harmless_gpu_work(stack, target.name)

    def nothing(*_args: Any, **_kwargs: Any) -> None:
        return None

    major, minor = torch.cuda.get_device_capability()  # the stand-in's answer for ``target``
    properties = types.SimpleNamespace(
        name=f"stand-in for {target.name}",
        major=major,
        minor=minor,
        multi_processor_count=STAND_IN_SMS.get(major * 10 + minor, DEFAULT_SMS),
        total_memory=80 << 30,
        L2_cache_size=50 << 20,
        warp_size=32,
        max_threads_per_multi_processor=2048,
        is_integrated=False,
        is_multi_gpu_board=False,
        shared_memory_per_block=48 << 10,  # the default limit per block on A100, H100 and B200
    )

    class Event:
        """Timings of nothing: 1 ms each, so a program dividing by one goes on."""

        def __init__(self, *_args: Any, **_kwargs: Any) -> None:
            pass

        record = synchronize = wait = nothing

        def query(self) -> bool:
            return True  # nothing was queued before it

        def elapsed_time(self, _other: Any) -> float:
            return STAND_IN_LATENCY_MS

    answers: list[tuple[str, Any]] = [
        ("is_available", lambda: True),
        ("device_count", lambda: 1),
        ("get_device_properties", lambda *_a, **_k: properties),
        ("Event", Event),
        ("set_device", nothing),
        ("empty_cache", nothing),
        ("manual_seed", nothing),
        ("manual_seed_all", nothing),
        # ``with torch.cuda.device(t.device.index):`` (flash-qla wraps each op in one)
        ("_exchange_device", lambda *_a, **_k: -1),
        ("_maybe_exchange_device", lambda *_a, **_k: -1),
        ("is_current_stream_capturing", lambda: False),
    ]
    for attr, value in answers:
        replace_for(stack, torch.cuda, attr, value)
    _answer_streams_and_tools(stack, Event)
    # TileLang's driver asks ``torch.device(0)`` first, which fails where torch has no accelerator
    with contextlib.suppress(ImportError):
        from tilelang.carver.arch.driver import cuda_driver

        replace_for(stack, cuda_driver, "get_cuda_device_properties", lambda *_a, **_k: properties)
    _answer_compute_version(stack, f"{major}.{minor}")
    _answer_tvm_device(stack, properties, f"{major}.{minor}")
    _auto_is_the_target(stack, target)


def _answer_tvm_device(stack: contextlib.ExitStack, properties: Any, version: str) -> None:
    """TVM's ``tvm.runtime.cuda(0)``, which TileLang's carver asks (``carver.arch.CUDA``: whether the
    GPU exists, its SMs, warp size and compute version): the stand-in GPU's facts, the same that
    ``torch.cuda.get_device_properties`` answers. Only GPU 0 exists, as ``device_count()`` says."""
    import tvm.runtime

    original = tvm.runtime.cuda
    device = types.SimpleNamespace(
        exist=True,
        device_type=2,  # DLPack's kDLCUDA
        device_id=0,
        device_name=properties.name,
        multi_processor_count=properties.multi_processor_count,
        warp_size=properties.warp_size,
        compute_version=version,
        max_shared_memory_per_block=properties.shared_memory_per_block,
        max_threads_per_block=1024,
    )

    def cuda(dev_id: int = 0) -> Any:
        return device if int(dev_id) == 0 else original(dev_id)

    replace_for(stack, tvm.runtime, "cuda", cuda)


def _auto_is_the_target(stack: contextlib.ExitStack, target: TargetSpec) -> None:
    """``target="auto"`` means the target asked for (``--auto-target``). TileLang's own detectors
    would ask the stand-in: its CUDA one takes ``torch.cuda.is_available()`` for a CUDA GPU, so
    ``--auto-target hip:gfx942`` (or ``metal``) would lower for CUDA."""
    import tilelang.backend.target as backend_target

    from irtrace.lowering.tvm_targets import make_tvm_target

    chosen = make_tvm_target(target)
    replace_for(stack, backend_target, "auto_detect_target", lambda: chosen)


def _answer_streams_and_tools(stack: contextlib.ExitStack, event: type) -> None:
    """Streams, ``torch.cuda.init()``, the profiler's start and stop and NVTX ranges, which a CPU
    build of torch refuses: on the stand-in GPU all work is the stand-ins' (nothing runs), so every
    stream is done, and there is nothing to profile or annotate. No value is invented: a stream's
    ``query()`` is true because nothing was queued; the default stream's handle is 0, as CUDA's is."""
    import torch

    def nothing(*_args: Any, **_kwargs: Any) -> None:
        return None

    class Stream:
        """A stream of the stand-in GPU: nothing is ever queued on it."""

        def __init__(self, device: Any = None, priority: int = 0, **_kwargs: Any) -> None:
            self.device = torch.device("cuda", 0)
            self.priority = priority

        synchronize = wait_stream = wait_event = nothing

        def query(self) -> bool:
            return True

        def record_event(self, recorded: Any = None) -> Any:
            return recorded if recorded is not None else event()

    default = Stream()
    default.cuda_stream = 0  # type: ignore[attr-defined]  # CUDA's legacy default stream
    ranges: list[str] = []

    def range_push(message: str) -> int:
        ranges.append(message)
        return len(ranges) - 1  # NVTX's answer: the depth of the range started

    def range_pop() -> int:
        if ranges:
            ranges.pop()
        return len(ranges)

    started: list[str] = []

    def range_start(message: str) -> int:
        started.append(message)
        return len(started)  # a handle for ``range_end``

    places: list[tuple[Any, str, Any]] = [
        (torch.cuda, "init", nothing),
        (torch.cuda, "Stream", Stream),
        (torch.cuda, "current_stream", lambda *_a, **_k: default),
        (torch.cuda, "default_stream", lambda *_a, **_k: default),
        (torch.cuda, "set_stream", nothing),
        (torch.cuda, "stream", lambda *_a, **_k: contextlib.nullcontext()),
        (torch.cuda.profiler, "start", nothing),
        (torch.cuda.profiler, "stop", nothing),
        (torch.cuda.profiler, "profile", contextlib.nullcontext),
        (torch.cuda.nvtx, "range_push", range_push),
        (torch.cuda.nvtx, "range_pop", range_pop),
        (torch.cuda.nvtx, "range_start", range_start),
        (torch.cuda.nvtx, "range_end", nothing),
        (torch.cuda.nvtx, "mark", nothing),
        (torch.cuda.nvtx, "range", lambda *_a, **_k: contextlib.nullcontext()),
    ]
    for owner, attr, value in places:
        replace_for(stack, owner, attr, value)


def _answer_compute_version(stack: contextlib.ExitStack, version: str) -> None:
    """TileLang's (and TVM's) ``nvcc.get_target_compute_version()``: with no target arch to read,
    it asks the GPU (``tvm.cuda(0)``) and raises without one; then the stand-in's capability answers.
    Libraries pick their kernels by it at import (flash-qla: sm_90 or sm_100 kernels)."""
    for name in ("tilelang.contrib.nvcc", "tvm.contrib.nvcc"):
        module = sys.modules.get(name)
        original = getattr(module, "get_target_compute_version", None)
        if module is None or original is None:
            continue

        def compute_version(target: Any = None, _original: Any = original) -> str:
            try:
                return str(_original(target))
            except ValueError:  # "No CUDA architecture was specified or GPU detected"
                return version

        replace_for(stack, module, "get_target_compute_version", compute_version)


VALUE_READ_FAILURES = (
    "cannot be called on meta tensors",  # .item(), int(), float()
    "Cannot copy out of meta tensor",  # .tolist(), .cpu(), .numpy() via .cpu()
    "meta device type tensor to numpy",  # .numpy()
)
"""PyTorch's messages when a program reads the values of a tensor that has none under the stand-ins."""


def why_values_stopped(error: BaseException) -> str | None:
    """Where and why a program stopped under the stand-ins reading values that only a GPU run has
    (a kernel's output, random data: never guessed), in words; ``None`` for any other failure."""
    shaped_by = values_shaped_call(error)
    if shaped_by is None and not any(words in str(error) for words in VALUE_READ_FAILURES):
        return None
    where = _program_line(error.__traceback__)
    reads = f"{shaped_by}() is shaped by" if shaped_by else "the program reads"
    return (
        f"{where + ': ' if where else ''}{reads} the values of a tensor that only a GPU computes (a "
        "kernel's output or random data); --no-gpu has no such values and never guesses them, so "
        "the program stops here; the kernels built before were captured"
    )


def values_shaped_call(error: BaseException) -> str | None:
    """The call whose result's shape needed values (``bincount``), if that is why ``error`` came."""
    from irtrace.lowering.resolve.twins import VALUES_NEEDED

    name = getattr(error, VALUES_NEEDED, None)
    return str(name) if name is not None else None


def _program_line(tb: types.TracebackType | None) -> str:
    """``file.py:LINE``, the program's own frame nearest the failure: not torch's, TileLang's,
    the standard library's or irtrace's."""
    import sysconfig

    libraries = {sysconfig.get_path(name) for name in ("stdlib", "platstdlib", "purelib", "platlib")}
    libraries.add(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # irtrace's own
    found = ""
    for frame in traceback.extract_tb(tb):
        path = os.path.abspath(frame.filename)
        if frame.filename.startswith("<") or any(path.startswith(lib + os.sep) for lib in libraries if lib):
            continue
        found = f"{os.path.relpath(path) if path.startswith(os.getcwd() + os.sep) else path}:{frame.lineno}"
    return found


def _first_config_only(tuner: Any, *_args: Any, **_kwargs: Any) -> Any:
    """``AutoTuner.run`` under ``--no-gpu``: compile (and so capture) the first config only."""
    from tilelang.autotuner.tuner import AutotuneResult

    if callable(tuner.configs):
        kernel_args, kernel_kwargs = tuner._kernel_parameters
        tuner.configs = tuner.configs(*kernel_args, **dict(kernel_kwargs))
    configs = list(tuner.configs or [])
    first = dict(configs[0]) if configs else {}
    compile_func, _elaborate = tuner._ensure_jit_functions()
    if _tunables_given(tuner, first):  # as TileLang does: no tuning, the call's own values
        kernel = compile_func()
        return AutotuneResult(libcode=kernel.get_kernel_source(), func=kernel.prim_func, kernel=kernel)
    kernel = compile_func(**_compile_arguments(first))
    with contextlib.suppress(AttributeError):  # programs read ``kernel.config`` as the tuner sets it
        kernel.update_tuner_result(latency=STAND_IN_LATENCY_MS, config=first, ref_latency=STAND_IN_LATENCY_MS)
    return AutotuneResult(
        latency=STAND_IN_LATENCY_MS,
        config=first,
        ref_latency=STAND_IN_LATENCY_MS,
        libcode=kernel.get_kernel_source(),
        func=kernel.prim_func,
        kernel=kernel,
    )


def _compile_arguments(config: dict[str, Any]) -> dict[str, Any]:
    """A config as TileLang's tuner hands it to its compile function: its ``pass_configs`` (those
    of this config only) under the tuner's own key, the rest as the kernel's arguments."""
    from tilelang.autotuner import tuner as tuner_module

    key = getattr(tuner_module, "_PASS_CONFIGS_KEY", None)
    if key is None:  # a release without per-config pass configs: the config as it is (fails as it would)
        return dict(config)
    arguments = {name: value for name, value in config.items() if name != "pass_configs"}
    arguments[key] = config.get("pass_configs")
    return arguments


def _tunables_given(tuner: Any, config: dict[str, Any]) -> bool:
    """Whether the call already gave a tunable value (by keyword or position): TileLang's
    ``AutoTuner.run`` then compiles the call as it is, without tuning."""
    if tuner._kernel_parameters is None:
        return False
    given_args, given_kwargs = tuner._kernel_parameters
    names = list(tuner._function_parameters or {})
    tunables = [key for key in config if key != "pass_configs"]
    by_keyword = {key for key, _value in given_kwargs}
    return any(key in by_keyword for key in tunables) or any(
        key in names and names.index(key) < len(given_args) for key in tunables
    )


@contextlib.contextmanager
def gpu_stand_ins(target: TargetSpec) -> Iterator[None]:
    """While active, kernels compile without the device compiler into stand-ins, and the program's
    GPU work is answered (see the module's docstring). ``target`` is what ``torch.cuda`` answers for."""
    import tilelang.engine.lower
    from tilelang.autotuner.tuner import AutoTuner
    from tilelang.jit.kernel import JITKernel

    from irtrace.lowering.resolve.entry_point import StandInProfiler

    def create_stand_in_adapter(
        kernel: Any, func: Any, out_idx: Any, artifact: Any, *_args: Any, **_kwargs: Any
    ) -> StandInAdapter:
        return StandInAdapter(func, out_idx, artifact)

    class TimedStandInProfiler(StandInProfiler):
        def do_bench(self, *_args: Any, **_kwargs: Any) -> float:
            return STAND_IN_LATENCY_MS

    def stand_in_profiler(kernel: Any, *_args: Any, **_kwargs: Any) -> StandInProfiler:
        return TimedStandInProfiler(kernel)  # ``profiler.func(...)`` launches the (stand-in) kernel

    def no_bench(*_args: Any, **_kwargs: Any) -> float:
        return STAND_IN_LATENCY_MS

    # the module by name: the attribute ``tilelang.engine.lower`` is the function
    engine_lower = sys.modules["tilelang.engine.lower"]
    with contextlib.ExitStack() as stack:
        patches: list[tuple[Any, str, Any]] = [
            # codegen runs as TileLang runs it, minus nvcc/hipcc (``*_without_compile``)
            (engine_lower, "device_codegen", engine_lower.device_codegen_without_compile),
            (JITKernel, "_create_adapter_from_artifact", create_stand_in_adapter),
            (JITKernel, "get_profiler", stand_in_profiler),
            (AutoTuner, "run", _first_config_only),
        ]
        import tilelang.profiler

        patches.append((tilelang.profiler, "do_bench", no_bench))
        bench_module = sys.modules.get("tilelang.profiler.bench")
        if bench_module is not None and hasattr(bench_module, "do_bench"):
            patches.append((bench_module, "do_bench", no_bench))
        for owner, attr, value in patches:
            replace_for(stack, owner, attr, value)
        with contextlib.suppress(ImportError):
            _answer_torch_cuda(stack, target)
        _ACTIVE.append(True)
        stack.callback(_ACTIVE.pop)
        yield
