"""``irtrace run --no-gpu`` on this machine (no GPU) captures the same kernels, with identical IR
after every pass and identical kernel source, as ``irtrace run`` of the same program on a GPU.

The oracle is the GPU run: the traces in ``tests/data/gpu_oracle/`` are made on an NVIDIA GPU
(``irtrace run -- python PROGRAM`` with no option, by ``tests/data/gpu_oracle/make_oracle.sh``),
where every kernel is really compiled by nvcc and launched, and each program's own check runs.
The GPU run is never the code under test here: only the ``--no-gpu`` side runs. A case whose GPU
trace is not there is skipped, saying so. The traces here were made on an H100 on 2026-12-07.

The bundled GPU examples are checked always. TileLang's own examples (their code is not kept in
this repository) are checked when ``TILELANG_EXAMPLES`` names a checkout of tile-ai/tilelang's
``examples`` folder; the GPU traces say which example each one is.

Compared per kernel: the pass names in order, the SHA-256 of the IR after each pass, and the
kernel source's SHA-256. TileLang writes the absolute path of the example's file into
``device_assert`` messages (gemm_sp's ``_compress_fn``): that folder, which differs between the two
machines, is written ``<EXAMPLE>/FOLDER/`` in both before hashing. Only the codegen step's raw name
differs by design (``..._without_compile``: no device compiler runs under ``--no-gpu``). TileLang
numbers the two reduction workspaces of the paged MLA decode kernel by heap address: untraced
lowerings in fresh processes give ``workspace``/``workspace_1`` either way round
(``tests/data/mla_workspace_order.py`` shows it, no irtrace involved), so for that example, and
only there, those names are compared without their numbers. An
``@autotune`` kernel is built for every config on the GPU and for the first config only under
``--no-gpu``: that run must equal one of the GPU's.

The bundled examples take about 20 s (``make test``); TileLang's 28 are a ``sweep`` (about 5 min).
"""

from __future__ import annotations

import gzip
import hashlib
import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from irtrace.trace.model import KernelRun, Trace
from irtrace.trace.reader import load_trace

from ..conftest import DATA, EXAMPLES, ROOT

ORACLE = DATA / "gpu_oracle"
BUNDLED: dict[str, list[str]] = {"gemm_on_gpu": [], "eager_gemm": [], "autotune_gemm": []}
"""Bundled examples with a GPU trace, and the arguments both runs gave them."""
TUNED = {"autotune_gemm"}
TILELANG_EXAMPLES = os.environ.get("TILELANG_EXAMPLES")


def load_gz(path: Path, folder: Path) -> Trace:
    plain = folder / path.name.removesuffix(".gz")
    plain.write_bytes(gzip.decompress(path.read_bytes()))
    return load_trace(plain)


Fingerprint = tuple[str, tuple[tuple[str, str | None], ...], str | None]

ADDRESS_DEPENDENT = {"deepseek_mla_example_mla_decode_paged"}
"""Examples whose reduction workspaces TileLang numbers by heap address (the module's docstring)."""
WORKSPACE = re.compile(r"\bworkspace(_\d+)?\b")


def fingerprint(trace: Trace, run: KernelRun, folder: str, renumbered: bool = False) -> Fingerprint:
    """What must be identical: the kernel's name, each pass with the IR after it, the source
    (``renumbered``: with ``workspace_N`` written ``workspace``)."""
    # a path ending in the example's folder, as C writes it too (``\\/``), whatever comes before
    path = re.compile(r"(?:\\?/[\w.+-]+)+?\\?/" + re.escape(folder) + r"\\?/")

    def key(sha: str | None) -> str | None:
        text = trace.texts.get(sha) if sha else None
        if text is None:
            return sha
        same = path.sub(f"<EXAMPLE>/{folder}/", text)
        if renumbered:
            same = WORKSPACE.sub("workspace", same)
        return sha if same == text else hashlib.sha256(same.encode()).hexdigest()

    return run.kernel, tuple((p.name, key(p.ir_after)) for p in run.passes), key(run.source_sha256)


def no_gpu_run(script: Path, args: list[str], folder: Path) -> Trace:
    work = folder / "work" / script.parent.name  # the same folder name as on the GPU machine
    shutil.copytree(script.parent, work, ignore=shutil.ignore_patterns("__pycache__", "*.jsonl*"))
    out = folder / "no_gpu.jsonl"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "irtrace.cli",
            "run",
            "--no-gpu",
            "-q",
            "-o",
            str(out),
            "--",
            "python",
            script.name,
            *args,
        ],
        capture_output=True,
        text=True,
        cwd=work,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])},
        timeout=900,
    )
    assert out.exists(), done.stderr[-2000:]
    return load_trace(out)


def differences(gpu: Trace, cpu: Trace, tuned: bool, folder: str, renumbered: bool = False) -> list[str]:
    found = []
    gpu_runs = [fingerprint(gpu, run, folder, renumbered) for run in gpu.runs]
    cpu_runs = [fingerprint(cpu, run, folder, renumbered) for run in cpu.runs]
    if not tuned and [r[0] for r in gpu_runs] != [r[0] for r in cpu_runs]:
        found.append(f"kernels: GPU {[r[0] for r in gpu_runs]}, --no-gpu {[r[0] for r in cpu_runs]}")
    for run, fp in zip(cpu.runs, cpu_runs, strict=True):
        assert run.instance is not None and run.instance.stand_in
        if tuned and fp not in gpu_runs:
            found.append(f"{run.kernel}: no GPU run has the same passes and source")
    if not tuned:
        for index, (g, c) in enumerate(zip(gpu_runs, cpu_runs, strict=False)):
            if g[1] != c[1]:
                names_g, names_c = [p[0] for p in g[1]], [p[0] for p in c[1]]
                if names_g != names_c:
                    found.append(f"run {index} {c[0]}: pass lists differ")
                else:
                    first = next(i for i, (a, b) in enumerate(zip(g[1], c[1], strict=True)) if a != b)
                    found.append(f"run {index} {c[0]}: IR differs first after pass {first} {names_c[first]}")
            if g[2] != c[2]:
                found.append(f"run {index} {c[0]}: kernel source differs")
    return found


@pytest.mark.parametrize("example", sorted(BUNDLED))
def test_bundled_gpu_example_captures_on_stand_ins_as_on_the_gpu(example: str, tmp_path: Path) -> None:
    oracle = ORACLE / f"{example}.jsonl.gz"
    if not oracle.exists():
        pytest.skip(f"no GPU trace of {example} yet: tests/data/gpu_oracle/README.md says how to make it")
    gpu = load_gz(oracle, tmp_path)
    cpu = no_gpu_run(EXAMPLES / f"{example}.py", BUNDLED[example], tmp_path)
    assert cpu.runs
    assert differences(gpu, cpu, example in TUNED, EXAMPLES.name) == []


def _tilelang_cases() -> list[str]:
    return sorted(path.name.removesuffix(".jsonl.gz") for path in (ORACLE / "tilelang").glob("*.jsonl.gz"))


@pytest.mark.sweep  # 28 programs run to their end on stand-ins: about 5 min on 2 cores
@pytest.mark.skipif(
    not TILELANG_EXAMPLES, reason="set TILELANG_EXAMPLES to tile-ai/tilelang's examples folder"
)
@pytest.mark.parametrize("case", _tilelang_cases())
def test_tilelang_example_captures_on_stand_ins_as_on_the_gpu(case: str, tmp_path: Path) -> None:
    folder, _, name = case.partition("_example_")
    script = Path(str(TILELANG_EXAMPLES)) / folder / f"example_{name}.py"
    if not script.exists():  # folder names with an underscore, nested folders: find the file by its name
        matches = list(Path(str(TILELANG_EXAMPLES)).rglob(f"example_{name}.py"))
        assert matches, case
        script = matches[0]
    gpu = load_gz(ORACLE / "tilelang" / f"{case}.jsonl.gz", tmp_path)
    cpu = no_gpu_run(script, [], tmp_path)
    renumbered = case in ADDRESS_DEPENDENT
    assert differences(gpu, cpu, tuned=False, folder=script.parent.name, renumbered=renumbered) == []


FLASH_QLA = ORACLE / "flash_qla.fingerprints.json"


@pytest.mark.sweep  # 11 kernels, the backward's 70 s of lowering: about 4 min on 2 cores
@pytest.mark.skipif(
    importlib.util.find_spec("flash_qla") is None,
    reason="flash-qla is not installed (pip install --no-deps flash-qla==0.1.3)",
)
def test_flash_qla_forward_and_backward_capture_on_stand_ins_as_on_the_gpu(tmp_path: Path) -> None:
    """A published library this project does not ship: flash-qla 0.1.3's gated delta rule, forward
    and backward (``tests/data/gpu_oracle/flash_qla_check.py``). Its GPU run is kept as fingerprints
    (pass names, the SHA-256 of the IR after each, the kernel source's), the ``ptx``/``sass`` stages
    of its ``--machine-code`` left out. The script ends at its digest (``.cpu()`` of a stand-in), after
    every kernel is built."""
    import json

    oracle = json.loads(FLASH_QLA.read_text())["runs"]
    runs = no_gpu_run(ORACLE / "flash_qla_check.py", [], tmp_path).runs
    got = [
        {
            "kernel": r.kernel,
            "target": r.target,
            "passes": [[p.name, p.ir_after] for p in r.passes],
            "source": r.source_sha256,
        }
        for r in runs
    ]
    assert [r["kernel"] for r in got] == [r["kernel"] for r in oracle]
    assert all(r.instance is not None and r.instance.stand_in for r in runs)
    assert got == oracle
