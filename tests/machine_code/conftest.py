"""Bundled CUDA examples recorded with ``irtrace record --machine-code``, once per session, and the
oracle: the same kernels lowered by a plain ``tilelang.lower`` in another process (run meanwhile
on the other core), their sources compiled by the test itself with nvcc and ``-Xptxas -v``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from irtrace.trace.model import Trace
from irtrace.trace.reader import load_trace

from ..conftest import EXAMPLES, ROOT

# (manifest spec, target): kernels in each style real code uses (a PrimFunc factory, Hopper
# warp-specialized TMA, flash attention, eager @tilelang.jit, @autotune, expression arguments).
CASES = [
    ("gemm.py::matmul(1024, 1024, 1024)", "cuda:sm_90a"),
    ("gemm.py::matmul(1024, 1024, 1024)", "cuda:sm_80"),
    ("hopper_tma_gemm.py::hopper_ws_gemm()", "cuda:sm_90a"),
    ("flash_attention.py::flash_attention_fwd()", "cuda:sm_90a"),
    # sm_90a: for sm_90, TileLang 0.1.15 emits tl::warpgroup_reg_alloc, which nvcc rejects there
    ("eager_gemm.py::token_matmul(N=4096, K=1024)", "cuda:sm_90a"),
    ("autotune_gemm.py::matmul_relu(1024, 1024, 1024)", "cuda:sm_80"),
    ("fp8_quant.py::per_token_quant(1 << 14, HIDDEN, out_dtype=determine_fp8_type())", "cuda:sm_90"),
]

# The kernel sources of a plain tilelang.lower with no instrument, and the dynamic shared memory
# its device functions launch with, read from the lowered module's objects.
_PLAIN_LOWER = """
import json, sys
import tilelang, tvm
from irtrace.lowering.api import RecordRequest, prepare_request
from irtrace.targets.specs import parse_spec

out = {}
for item in json.loads(sys.argv[1]):
    base = __import__("pathlib").Path(sys.argv[2])
    configs = item.get("configs", {})
    request = RecordRequest(parse_spec(item["spec"]), (item["target"],), configs, base_dir=base)
    for prepared in prepare_request(request):
        with tvm.transform.PassContext(opt_level=3, config=prepared.pass_configs), prepared.tvm_target:
            artifact = tilelang.lower(prepared.built.func, target=prepared.tvm_target)
        dynamic = {}
        for gvar, func in artifact.device_mod.functions.items():
            attrs = func.attrs or {}
            if "calling_conv" in attrs and int(attrs["calling_conv"]) == 2:
                size = attrs["dyn_shared_memory_buf"] if "dyn_shared_memory_buf" in attrs else 0
                dynamic[str(gvar.name_hint)] = int(size)
        out[prepared.name + "|" + item["target"]] = {
            "source": artifact.kernel_source, "dynamic_smem": dynamic, "pass_configs": {
                str(k): v for k, v in prepared.pass_configs.items() if isinstance(v, (bool, int, str))}
        }
print(json.dumps(out))
"""


@dataclass
class Recorded:
    """The session's recording and what the oracle process lowered."""

    trace: Trace
    path: Path
    plain: dict[tuple[str, str], dict[str, object]]
    """(kernel, target) -> {source, dynamic_smem} of a plain ``tilelang.lower``."""
    record_s: float
    """Wall time of the ``irtrace record --machine-code`` command."""
    stderr: str


def tilelang_includes() -> list[str]:
    """TileLang's include folders in the wheel, found without asking irtrace."""
    import importlib.util

    spec = importlib.util.find_spec("tilelang")
    assert spec is not None and spec.submodule_search_locations
    root = Path(next(iter(spec.submodule_search_locations)))
    return [f"-I{root / 'src'}", f"-I{root / '3rdparty' / 'cutlass' / 'include'}"]


def oracle_nvcc() -> str:
    found = shutil.which("nvcc")
    if found is None:
        pytest.skip("no nvcc on PATH for the oracle")
    return found


def ptxas_verbose(source: str, arch: str, folder: Path, extra: tuple[str, ...] = ()) -> tuple[str, Path]:
    """``nvcc -cubin -Xptxas -v`` with TileLang's flags (``tilelang/cuda/backend.py``), run here."""
    folder.mkdir(parents=True, exist_ok=True)
    cu = folder / "kernel.cu"
    cu.write_text(source)
    cubin = folder / "kernel.cubin"
    command = [oracle_nvcc(), "--cubin", "-O3", "-lineinfo", f"-arch={arch}", "-std=c++20"]
    command += [*tilelang_includes(), *extra, "-Xptxas", "-v", "-o", str(cubin), str(cu)]
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    return done.stdout + done.stderr, cubin


_USED = re.compile(r"Used (\d+) registers(?:, used (\d+) barriers)?(?:, (\d+) bytes smem)?")
_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_ENTRY = re.compile(r"Compiling entry function '(\w+)'")


def oracle_resources(log: str) -> dict[str, dict[str, int]]:
    """function -> registers, barriers, static smem, stack, spills, from ``ptxas info`` lines."""
    found: dict[str, dict[str, int]] = {}
    function = None
    for line in log.splitlines():
        if match := _ENTRY.search(line):
            function = match[1]
            found[function] = {}
        elif function and (match := _FRAME.search(line)):
            found[function].update(stack=int(match[1]), spill_stores=int(match[2]), spill_loads=int(match[3]))
        elif function and (match := _USED.search(line)):
            found[function].update(
                registers=int(match[1]), barriers=int(match[2] or 0), static_smem=int(match[3] or 0)
            )
    return found


def record_machine_code(folder: Path, cases: list[tuple[str, str]], *extra: str) -> tuple[Path, str, float]:
    """Run ``irtrace record --machine-code`` on a manifest of ``cases``; (trace, stderr, seconds)."""
    import time

    manifest = folder / "irtrace.toml"
    manifest.write_text(
        "".join(
            f'[[kernel]]\nspec = "{EXAMPLES / spec}"\ntargets = ["{target}"]\n\n' for spec, target in cases
        )
    )
    path = folder / "machine.jsonl"
    irtrace = Path(sys.executable).with_name("irtrace")
    began = time.perf_counter()
    done = subprocess.run(
        [str(irtrace), "record", "--machine-code", "-m", str(manifest), "-o", str(path), *extra],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "NO_COLOR": "1"},
    )
    assert done.returncode == 0, done.stderr
    return path, done.stderr, time.perf_counter() - began


def start_plain_lower(
    cases: list[tuple[str, str]], configs: dict[str, object] | None = None
) -> subprocess.Popen[str]:
    """A process lowering ``cases`` with a plain ``tilelang.lower`` (see ``finish_plain_lower``)."""
    items = [{"spec": spec, "target": target, "configs": configs or {}} for spec, target in cases]
    return subprocess.Popen(
        [sys.executable, "-c", _PLAIN_LOWER, json.dumps(items), str(EXAMPLES)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        cwd=ROOT,
    )


def finish_plain_lower(process: subprocess.Popen[str]) -> dict[tuple[str, str], dict[str, object]]:
    """(kernel, target) -> {source, dynamic_smem}."""
    output, _ = process.communicate()
    assert process.returncode == 0, "the plain tilelang.lower process failed"
    found = json.loads(output.strip().splitlines()[-1])
    return {(key.split("|", 1)[0], key.split("|", 1)[1]): value for key, value in found.items()}


@pytest.fixture(scope="session")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Recorded:
    folder = tmp_path_factory.mktemp("machine")
    oracle = start_plain_lower(CASES)
    path, stderr, seconds = record_machine_code(folder, CASES)
    return Recorded(load_trace(path), path, finish_plain_lower(oracle), seconds, stderr)
