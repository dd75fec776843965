"""Past the kernel source: compile a CUDA run's source as TileLang does, keep its PTX and SASS as
stages of the run and what each kernel function uses (registers, spills, shared memory).

TileLang's CUDA backend (``tilelang_callback_cuda_compile`` in ``tilelang/cuda/backend.py``) runs
``nvcc -ccbin=CXX --cubin -O3 -lineinfo -arch=sm_XX -std=c++20 -I<templates> -I<cutlass>`` plus
the run's ``tl.device_compile_flags``, ``--use_fast_math`` and ``--register-usage-level``
configs. ``compile_source`` runs that very command with ptxas in verbose mode (what TileLang adds
under ``TILELANG_VERBOSE``: it changes no code) and ``-keep``, so the PTX ptxas compiled is kept,
then disassembles the cubin with nvdisasm (or cuobjdump), as TileLang's ``get_sass_from_source``.
Nothing here needs a GPU. Only ``plan_compile`` imports tilelang.
"""

from __future__ import annotations

import contextlib
import csv
import importlib.metadata
import json
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from irtrace.base.errors import IrtraceError
from irtrace.lowering.machine_lines import (
    PTX_STAGE,
    SASS_STAGE,
    SOURCE_NAME,
    machine_line_maps,
    sass_source_lines,
)
from irtrace.targets.backends import TARGETS
from irtrace.trace.model import (
    PHASE_CODEGEN,
    PHASE_MACHINE,
    STATUS_FAILED,
    STATUS_OK,
    KernelRun,
    PassRecord,
    text_sha256,
)
from irtrace.trace.resources import KernelResources
from irtrace.trace.writer import TraceWriter

INSTALL_HINT = "pip install 'tilelang-devtools[cuda]'"

_PIP_PACKAGES = {
    "nvcc": "nvidia-cuda-nvcc",
    "nvdisasm": "nvidia-cuda-nvdisasm",
    "cuobjdump": "nvidia-cuda-cuobjdump",
}


class MachineCodeError(IrtraceError):
    """The CUDA tools that machine code needs are missing (nvcc, and nvdisasm or cuobjdump)."""


# ----------------------------------------------------------------------------- tools


@dataclass(frozen=True)
class CudaTools:
    """The CUDA programs machine code runs."""

    nvcc: str
    disassembler: str = ""
    """nvdisasm, else cuobjdump; empty where none was looked for (ptxas's figures only)."""

    @property
    def disassembler_name(self) -> str:
        return Path(self.disassembler).name

    def disassemble_command(self, cubin: Path) -> list[str]:
        """Code sections only: nvdisasm labels branch targets, which diff better than addresses."""
        if self.disassembler_name.startswith("nvdisasm"):
            return [self.disassembler, "--print-code", str(cubin)]
        return [self.disassembler, "--dump-sass", str(cubin)]


def _from_pip_package(program: str) -> str | None:
    """The program as the ``nvidia-cuda-*`` package on PyPI installs it, if installed."""
    try:
        files = importlib.metadata.files(_PIP_PACKAGES[program]) or []
    except importlib.metadata.PackageNotFoundError:
        return None
    for file in files:
        if file.name == program:
            located = Path(str(file.locate()))
            if located.is_file() and os.access(located, os.X_OK):
                return str(located)
    return None


def _cuda_home() -> str | None:
    """CUDA's folder the way TileLang finds it (``tilelang.env._find_cuda_home``), without tilelang."""
    home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
    if home:
        return home
    nvcc = shutil.which("nvcc")
    if nvcc is not None:
        visible = Path(nvcc).parent.parent
        if (visible / "include" / "cuda_runtime.h").exists():
            return str(visible)
        return str(Path(os.path.realpath(nvcc)).parent.parent)
    pip_nvcc = _from_pip_package("nvcc")
    if pip_nvcc is not None:
        return str(Path(pip_nvcc).parent.parent)
    return "/usr/local/cuda" if Path("/usr/local/cuda").exists() else None


def find_cuda_tools(*, disassembler: bool = True) -> CudaTools:
    """nvcc as TileLang finds it (``CUDA_HOME``, ``PATH``, the ``nvidia-cuda-nvcc`` package), and a
    disassembler beside it, on ``PATH`` or from its PyPI package (unless ``disassembler`` is
    False: ptxas's resource figures need nvcc only). Raises ``MachineCodeError`` saying what is
    missing and how to get it."""
    home = _cuda_home()
    nvcc = None
    if home is not None and os.access(Path(home, "bin", "nvcc"), os.X_OK):
        nvcc = str(Path(home, "bin", "nvcc"))
    nvcc = nvcc or shutil.which("nvcc") or _from_pip_package("nvcc")
    if nvcc is None:
        raise MachineCodeError(
            "machine code needs CUDA's nvcc, and there is none in CUDA_HOME, on PATH or from the "
            f"nvidia-cuda-nvcc package; install the CUDA toolkit or `{INSTALL_HINT}`"
        )
    if not disassembler:
        return CudaTools(nvcc)
    folders = [Path(nvcc).parent] + ([Path(home, "bin")] if home else [])
    for program in ("nvdisasm", "cuobjdump"):
        for folder in folders:
            if os.access(folder / program, os.X_OK):
                return CudaTools(nvcc, str(folder / program))
        found = shutil.which(program) or _from_pip_package(program)
        if found is not None:
            return CudaTools(nvcc, found)
    raise MachineCodeError(
        f"machine code needs nvdisasm or cuobjdump to print SASS; nvcc is {nvcc}, but neither is "
        f"beside it, on PATH or from the nvidia-cuda-nvdisasm or nvidia-cuda-cuobjdump packages; "
        f"`{INSTALL_HINT}`"
    )


# ----------------------------------------------------------------------------- compiling


@dataclass(frozen=True)
class CompilePlan:
    """How TileLang compiles a run's kernel source: nvcc's options, without input and output."""

    tools: CudaTools
    arch: str
    """SASS architecture (``sm_90a``)."""
    options: tuple[str, ...]
    """nvcc's options as TileLang passes them (``-ccbin``, ``--cubin``, ``-O3``, ..., ``-I``)."""
    timeout_s: float | None = None
    """TileLang's compile timeout (``TILELANG_COMPILE_TIMEOUT``), if any."""

    def to_json(self) -> dict[str, Any]:
        """For another process (the language server compiles what its worker planned)."""
        return {
            "nvcc": self.tools.nvcc,
            "disassembler": self.tools.disassembler,
            "arch": self.arch,
            "options": list(self.options),
            "timeout_s": self.timeout_s,
        }

    def nvcc_command(self, source: Path, output: Path, keep_dir: Path | None = None) -> list[str]:
        """The command: TileLang's, plus verbose ptxas (resources) and ``-keep`` (the PTX)."""
        extra = ["--ptxas-options=--verbose"]
        if keep_dir is not None:
            extra += ["-keep", f"--keep-dir={keep_dir}", f"--time={keep_dir / 'phases.csv'}"]
        return [self.tools.nvcc, *self.options, *extra, "-o", str(output), str(source)]


def plan_compile(
    target_detail: str | Mapping[str, Any], pass_configs: Mapping[str, Any], tools: CudaTools | None = None
) -> CompilePlan:
    """nvcc's options for a run, from its target and pass configs, built as TileLang builds them
    (``tilelang_callback_cuda_compile`` and ``nvcc.compile_cuda``)."""
    import shlex

    from tilelang.contrib import nvcc
    from tilelang.contrib.cc import get_cplus_compiler
    from tilelang.env import CUTLASS_INCLUDE_DIR, TILELANG_TEMPLATE_PATH, env
    from tilelang.transform import PassConfigKey
    from tvm.target import Target

    tools = tools or find_cuda_tools()
    detail = json.loads(target_detail) if isinstance(target_detail, str) else dict(target_detail)
    target_arch, target_code = nvcc.get_target_arch_and_code(Target(detail))
    codes = nvcc.get_target_code_list(target_code)
    gencode = nvcc.format_target_code_for_gencode(target_code)
    arch = (
        [f"-arch=sm_{target_arch}"]
        if gencode is None
        else ["-gencode", f"arch=compute_{target_arch},code={gencode}"]
    )
    options = [
        f"-ccbin={get_cplus_compiler()}",
        "--fatbin" if len(codes) > 1 else "--cubin",
        "-O3",
        "-lineinfo",
    ]
    options += [*arch, "-std=c++20", "-I" + TILELANG_TEMPLATE_PATH, "-I" + CUTLASS_INCLUDE_DIR]
    extra = pass_configs.get(PassConfigKey.TL_DEVICE_COMPILE_FLAGS.value)
    if extra:
        for flag in [extra] if isinstance(extra, str) else extra:
            options += shlex.split(flag) if isinstance(flag, str) else [str(flag)]
    if pass_configs.get(PassConfigKey.TL_ENABLE_FAST_MATH.value, False):
        options.append("--use_fast_math")
    level = pass_configs.get(PassConfigKey.TL_PTXAS_REGISTER_USAGE_LEVEL.value)
    if level is not None:
        options.append(f"--ptxas-options=--register-usage-level={int(level)}")
    return CompilePlan(tools, f"sm_{target_arch}", tuple(options), env.get_compile_timeout_seconds())


@dataclass(frozen=True)
class MachineCode:
    """What compiling one kernel source gave: PTX, SASS, resources, times, or where it failed."""

    ptx: str | None
    sass: str | None
    resources: tuple[KernelResources, ...]
    ptx_s: float
    """Seconds of nvcc's front end (preprocessing and cicc): source to PTX."""
    sass_s: float
    """Seconds of ptxas and the disassembler: PTX to SASS."""
    error: str | None = None
    """nvcc's or the disassembler's error; the stage without text is the one that failed."""
    log: str = ""
    """What nvcc printed (ptxas's resource lines among it)."""
    sass_lines: tuple[tuple[int, int], ...] | None = None
    """``(sass_line, source_line)`` by nvdisasm's line information (``line_info=True``); ``None``
    when not asked for, or when nvdisasm's annotated listing is not the SASS plus comments"""

    @property
    def failed_stage(self) -> str | None:
        if self.error is None:
            return None
        return PTX_STAGE if self.ptx is None else SASS_STAGE


def compile_source(
    plan: CompilePlan,
    source: str,
    *,
    dynamic_smem: Mapping[str, int | None] | None = None,
    disassemble: bool = True,
    line_info: bool = False,
) -> MachineCode:
    """Compile ``source`` with ``plan`` in a temporary folder; never raises for a compile error.

    ``dynamic_smem`` (from ``dynamic_smem_from_ir``) fills each function's dynamic shared memory;
    ptxas only knows the static part. ``disassemble=False`` leaves out the SASS (resources only).
    ``line_info`` also maps the SASS lines to the source's (nvdisasm only; ``sass_source_lines``).
    """
    key = text_sha256("\0".join([source, *plan.options]))[:20]
    with build_folder(key) as work:
        source_path = work / SOURCE_NAME
        source_path.write_text(source, encoding="utf-8")
        cubin = work / "tvm_kernels.cubin"
        began = time.perf_counter()
        try:
            done = subprocess.run(
                plan.nvcc_command(source_path, cubin, keep_dir=work),
                capture_output=True,
                text=True,
                timeout=plan.timeout_s,
                cwd=work,
            )
            log, returncode = done.stdout + done.stderr, done.returncode
        except subprocess.TimeoutExpired:
            log, returncode = f"nvcc timed out after {plan.timeout_s:g} s", -1
        nvcc_s = time.perf_counter() - began
        phases = _phase_times(work / "phases.csv")
        ptx_s = phases.get("front", nvcc_s)
        ptxas_s = phases.get("ptxas", max(0.0, nvcc_s - ptx_s))
        ptx = _kept_ptx(work, str(source_path))
        if returncode != 0:
            error = _compile_error(log, returncode)
            return MachineCode(ptx, None, (), ptx_s, ptxas_s, error, log)
        resources = tuple(parse_ptxas_info(log, plan.arch, dynamic_smem or {}))
        if not disassemble:
            return MachineCode(ptx, None, resources, ptx_s, ptxas_s, None, log)
        began = time.perf_counter()
        disassembled = subprocess.run(
            plan.tools.disassemble_command(cubin), capture_output=True, text=True, cwd=work
        )
        sass_s = ptxas_s + time.perf_counter() - began
        if disassembled.returncode != 0 or not disassembled.stdout.strip():
            error = (
                f"{plan.tools.disassembler_name} failed: {_tail(disassembled.stderr or disassembled.stdout)}"
            )
            return MachineCode(ptx, None, resources, ptx_s, sass_s, error, log)
        sass_lines = None
        if line_info and plan.tools.disassembler_name.startswith("nvdisasm"):
            annotated = subprocess.run(
                [plan.tools.disassembler, "--print-code", "--print-line-info-inline", str(cubin)],
                capture_output=True,
                text=True,
                cwd=work,
            )
            if annotated.returncode == 0:
                found = sass_source_lines(annotated.stdout, disassembled.stdout, str(source_path))
                sass_lines = tuple(found) if found is not None else None
        return MachineCode(ptx, disassembled.stdout, resources, ptx_s, sass_s, None, log, sass_lines)


@contextlib.contextmanager
def build_folder(key: str) -> Iterator[Path]:
    """An empty folder to compile in, named by ``key`` (the source and options) and locked while used.

    nvcc names a translation unit's internal symbols after the folder it compiles in
    (``_INTERNAL_3f49297c_14_tvm_kernels_cu``), so a fresh temporary folder per build would make the
    same source give a different PTX each time, and ``irtrace check`` see a change that is none.
    The folder lives in a per-user directory only that user can enter; when that directory is not
    safely ours (another owner, a link), a fresh temporary folder is used instead.
    """
    import fcntl

    base = Path(tempfile.gettempdir()) / f"irtrace-nvcc-{os.getuid()}"
    try:
        base.mkdir(mode=0o700, exist_ok=True)
        info = base.lstat()
        safe = not base.is_symlink() and info.st_uid == os.getuid() and info.st_mode & 0o077 == 0
    except OSError:
        safe = False
    if not safe:
        with tempfile.TemporaryDirectory(prefix="irtrace-nvcc-") as fresh:
            yield Path(fresh)
        return
    folder = base / key
    with open(base / f"{key}.lock", "w") as lock:  # a few bytes of lock file stay behind
        fcntl.flock(lock, fcntl.LOCK_EX)  # the same source compiled twice at once waits its turn
        shutil.rmtree(folder, ignore_errors=True)  # what a killed build left
        folder.mkdir()
        try:
            yield folder
        finally:
            shutil.rmtree(folder, ignore_errors=True)


def _kept_ptx(work: Path, source_path: str) -> str | None:
    """The PTX nvcc kept; the temporary folder in its ``.file`` directive is dropped, so the same
    source gives the same text from build to build."""
    kept = sorted(work.glob("*.ptx"))
    if not kept:
        return None
    text = kept[0].read_text(encoding="utf-8", errors="replace")
    return text.replace(f'"{source_path}"', f'"{SOURCE_NAME}"')


def _phase_times(path: Path) -> dict[str, float]:
    """Seconds of nvcc's front end (everything before ptxas) and of ptxas, from ``--time``."""
    try:
        rows = list(csv.reader(path.read_text(encoding="utf-8").splitlines()))
    except OSError:
        return {}
    times = {"front": 0.0, "ptxas": 0.0}
    for row in rows[1:]:
        if len(row) < 8:
            continue
        phase, metric, unit = row[1].strip(), row[6].strip(), row[7].strip()
        try:
            seconds = float(metric) / (1000 if unit == "ms" else 1)
        except ValueError:
            continue
        if phase.startswith("ptxas"):
            times["ptxas"] += seconds
        elif not phase.startswith(("nvcc (driver)", "fatbinary", "nvlink")):
            times["front"] += seconds
    return times


def _tail(text: str, lines: int = 12) -> str:
    kept = [line for line in text.strip().splitlines() if line.strip()]
    return "\n".join(kept[-lines:])


def _compile_error(log: str, returncode: int) -> str:
    """nvcc's error lines (its warnings about TileLang's headers are noise here)."""
    errors = [line for line in log.splitlines() if " error" in line or line.startswith(("ptxas", "nvcc"))]
    errors = [line for line in errors if "warning" not in line and "ptxas info" not in line]
    body = "\n".join(errors[:12]) if errors else _tail(log)
    first = (errors or [line for line in log.splitlines() if line.strip()] or [""])[0]
    headline = first.split(": error", 1)[1].lstrip(": ") if ": error" in first else first.strip()
    return f"nvcc failed (exit {returncode}): {headline}\n{body}"


# ----------------------------------------------------------------------------- parsing

_ENTRY = re.compile(r"ptxas info\s*: Compiling entry function '([^']+)' for '([^']+)'")
_PROPERTIES = re.compile(r"ptxas info\s*: Function properties for (\S+)")
_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"ptxas info\s*: Used (\d+) registers(.*)")
_BARRIERS = re.compile(r"used (\d+) barriers")
_SMEM = re.compile(r"(\d+) bytes smem")


def parse_ptxas_info(
    log: str, arch: str = "", dynamic_smem: Mapping[str, int | None] | None = None
) -> list[KernelResources]:
    """Each entry function's resources from ``ptxas -v`` output (``ptxas info`` lines)."""
    found: dict[str, dict[str, Any]] = {}
    frames: dict[str, tuple[int, int, int]] = {}
    current: str | None = None
    pending_frame: str | None = None
    for line in log.splitlines():
        if pending_frame is not None:
            frame = _FRAME.search(line)
            if frame:
                frames[pending_frame] = (int(frame[1]), int(frame[2]), int(frame[3]))
            pending_frame = None
        if match := _ENTRY.search(line):
            current = match[1]
            found[current] = {"arch": match[2]}
        elif match := _PROPERTIES.search(line):
            pending_frame = match[1]
        elif (match := _USED.search(line)) and current is not None:
            rest = match[2]
            barriers, smem = _BARRIERS.search(rest), _SMEM.search(rest)
            found[current].update(
                registers=int(match[1]),
                barriers=int(barriers[1]) if barriers else 0,
                static_smem=int(smem[1]) if smem else 0,
            )
    dynamic = dynamic_smem or {}
    resources = []
    for function, facts in found.items():
        if "registers" not in facts:
            continue
        stack, stores, loads = frames.get(function, (0, 0, 0))
        resources.append(
            KernelResources(
                function=function,
                arch=facts.get("arch") or arch,
                registers=facts["registers"],
                spill_stores=stores,
                spill_loads=loads,
                static_smem=facts["static_smem"],
                dynamic_smem=dynamic.get(function, 0),
                barriers=facts["barriers"],
                stack=stack,
            )
        )
    return resources


_DEF = re.compile(r"^\s*def (\w+)\(", re.MULTILINE)
_FUNC_ATTR = re.compile(r"^\s*T\.func_attr\((\{.*\})\)\s*$", re.MULTILINE)
_DYN_SMEM = re.compile(r'"dyn_shared_memory_buf": ([^,}]+)')
_GLOBAL_SYMBOL = re.compile(r'"global_symbol": "([^"]+)"')
_INT = re.compile(r"(?:T\.int(?:32|64)\()?(\d+)\)?")


def dynamic_smem_from_ir(ir_text: str) -> dict[str, int | None]:
    """Bytes of dynamic shared memory per kernel function of the module codegen received (its
    ``dyn_shared_memory_buf`` attribute, what TileLang launches with); ``None`` when symbolic."""
    sizes: dict[str, int | None] = {}
    for match in _DEF.finditer(ir_text):
        attrs = _FUNC_ATTR.match(ir_text, ir_text.find("\n", match.end()) + 1)
        if attrs is None:
            continue
        symbol = _GLOBAL_SYMBOL.search(attrs[1])
        name = symbol[1] if symbol else match[1]
        size = _DYN_SMEM.search(attrs[1])
        if size is None:
            sizes[name] = 0
            continue
        number = _INT.fullmatch(size[1].strip())
        sizes[name] = int(number[1]) if number else None
    return sizes


def dynamic_smem_from_module(mod: Any) -> dict[str, int | None]:
    """``dynamic_smem_from_ir`` on the module object itself (the device module codegen received)."""
    sizes: dict[str, int | None] = {}
    for gvar, func in mod.functions.items():
        attrs = getattr(func, "attrs", None) or {}
        if "calling_conv" not in attrs or int(attrs["calling_conv"]) != 2:
            continue
        name = str(attrs["global_symbol"]) if "global_symbol" in attrs else str(gvar.name_hint)
        size = attrs["dyn_shared_memory_buf"] if "dyn_shared_memory_buf" in attrs else 0  # noqa: SIM401 (DictAttrs)
        try:
            sizes[name] = int(size)
        except (TypeError, ValueError):
            sizes[name] = None  # symbolic
    return sizes


# ----------------------------------------------------------------------------- recording


def compiles_to_machine_code(run: KernelRun) -> bool:
    """A run whose kernel source nvcc compiles: a CUDA target that lowered to its source."""
    spec = TARGETS.get(run.target)
    return (
        spec is not None
        and spec.backend == "cuda"
        and run.status == STATUS_OK
        and run.source_sha256 is not None
        and bool(run.target_detail)
    )


def codegen_input(run: KernelRun) -> str | None:
    """SHA-256 of the module codegen received (for its ``dyn_shared_memory_buf`` attributes)."""
    for record in run.passes:
        if record.phase == PHASE_CODEGEN and record.depth == 0:
            return record.ir_before
    return None


def machine_passes(
    run: KernelRun, code: MachineCode, writer: TraceWriter, *, started_s: float
) -> list[PassRecord]:
    """The run's ``ptx`` and ``sass`` stages (their texts stored in ``writer``), after its last pass."""
    assert run.source_sha256 is not None
    index = max((p.index for p in run.passes), default=-1) + 1
    stages = [(PTX_STAGE, "nvcc", code.ptx, code.ptx_s), (SASS_STAGE, "ptxas", code.sass, code.sass_s)]
    records: list[PassRecord] = []
    before: str | None = run.source_sha256
    start = started_s
    for name, raw_name, text, seconds in stages:
        if before is None:
            break  # the stage before failed: this one never ran
        after = writer.add_text(text) if text is not None else None
        failed = text is None
        records.append(
            PassRecord(
                index=index,
                name=name,
                raw_name=raw_name,
                phase=PHASE_MACHINE,
                pipeline=None,
                depth=0,
                parent=None,
                start_s=start,
                wall_s=seconds,
                self_s=seconds,
                changed=not failed,
                ir_before=before,
                ir_after=after,
                scope="device",
                status=STATUS_FAILED if failed else STATUS_OK,
                error=code.error if failed else None,
            )
        )
        index += 1
        start += seconds
        before = after
    return records


@dataclass
class _Job:
    run_id: int
    submitted: float
    future: Future[MachineCode]


@dataclass
class MachineCodeCompiler:
    """Compiles each CUDA run's kernel source in a background thread while the next kernel lowers,
    and writes its ``machine`` record from the recording thread (a ``TraceWriter`` is not shared
    between threads): call ``submit`` after each run, ``write_ready`` between runs, ``finish`` last.
    """

    writer: TraceWriter
    tools: CudaTools = field(default_factory=find_cuda_tools)
    workers: int = field(default_factory=lambda: os.cpu_count() or 2)
    """Compiles at once: one per core. nvcc takes longer than most lowerings, so a queue of
    compiles builds up; sharing the cores with the lowering finishes sooner than one at a time."""
    waited_s: float = 0.0
    """Seconds the recording waited for compiles in ``finish``: what machine code added to it."""
    compile_s: float = 0.0
    """Seconds of compiling in all (nvcc and the disassembler), overlapped or not."""
    compiled: int = 0
    """Runs submitted for compiling."""
    _jobs: list[_Job] = field(default_factory=list)
    _pool: ThreadPoolExecutor | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def submit(self, run: KernelRun) -> bool:
        """Start compiling ``run``'s source, if it is a CUDA run with one; returns whether it was."""
        if not compiles_to_machine_code(run):
            return False
        trace = self.writer.trace()
        source = trace.text(run.source_sha256)
        codegen = codegen_input(run)
        dynamic = dynamic_smem_from_ir(trace.text(codegen)) if codegen else {}
        plan = plan_compile(run.target_detail, run.pass_configs, self.tools)
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="irtrace-nvcc")
        future = self._pool.submit(self._compile, plan, source, dynamic, bool(run.source_maps))
        self._jobs.append(_Job(run.run_id, time.perf_counter(), future))
        self.compiled += 1
        return True

    def _compile(
        self, plan: CompilePlan, source: str, dynamic: Mapping[str, int | None], line_info: bool = False
    ) -> MachineCode:
        began = time.perf_counter()
        try:
            return compile_source(plan, source, dynamic_smem=dynamic, line_info=line_info)
        finally:
            with self._lock:
                self.compile_s += time.perf_counter() - began

    def after_run(self, run: KernelRun, prepared: object = None) -> None:
        """The recording hook: write what finished, then start compiling ``run``."""
        self.write_ready()
        self.submit(run)

    def write_ready(self) -> list[KernelRun]:
        """Write the records of the compiles that are done, in submission order."""
        written = []
        while self._jobs and self._jobs[0].future.done():
            written.append(self._write(self._jobs.pop(0)))
        return written

    def finish(self) -> list[KernelRun]:
        """Wait for every compile and write its record."""
        began = time.perf_counter()
        written = []
        try:
            while self._jobs:
                job = self._jobs.pop(0)
                job.future.result()
                written.append(self._write(job))
        finally:
            self.waited_s += time.perf_counter() - began
            self.close()
        return written

    def close(self) -> None:
        """Drop compiles not yet written (after an interrupt); the runs keep no machine record."""
        for job in self._jobs:
            job.future.cancel()
        self._jobs.clear()
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None

    def _write(self, job: _Job) -> KernelRun:
        run = self.writer.run(job.run_id)
        code = job.future.result()
        passes = machine_passes(run, code, self.writer, started_s=run.total_s or 0.0)
        texts = [text for text in (code.ptx, code.sass) if text is not None]
        shas = {text_sha256(text): text for text in texts}
        line_maps = machine_line_maps(run, passes, shas, code.sass_lines)
        return self.writer.add_machine_code(job.run_id, passes, code.resources, line_maps)


@contextlib.contextmanager
def machine_code_for(writer: TraceWriter, enabled: bool) -> Iterator[MachineCodeCompiler | None]:
    """A compiler whose ``after_run`` is called after each recorded run (``None`` when not
    ``enabled``); leaving the block waits for the compiles and writes their records, an error
    or interrupt drops the compiles not yet written."""
    if not enabled:
        yield None
        return
    compiler = MachineCodeCompiler(writer)
    try:
        yield compiler
    except BaseException:
        compiler.close()
        raise
    compiler.finish()


def describe_resources(resources: Sequence[KernelResources]) -> list[str]:
    """One line per function: ``gemm_kernel (sm_90a): 240 registers, 0 B spilled, ...``."""
    from irtrace.trace.resources import format_bytes

    lines = []
    for item in resources:
        dynamic = "symbolic" if item.dynamic_smem is None else format_bytes(item.dynamic_smem)
        lines.append(
            f"{item.function} ({item.arch}): {item.registers} registers, "
            f"spills {item.spill_stores} B stored / {item.spill_loads} B loaded, "
            f"smem {format_bytes(item.static_smem)} static + {dynamic} dynamic, "
            f"{item.barriers} barriers, {item.stack} B stack"
        )
    return lines
