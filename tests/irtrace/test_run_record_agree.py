"""A kernel whose outputs TileLang's JIT allocates (``@tilelang.jit(out_idx=...)``, ``T.empty``)
compares as equal between ``irtrace run`` and ``irtrace record``: the recording lowers the PrimFunc
TileLang's JIT compiles, with the definition's ``out_idx`` and the calling convention of the
execution backend TileLang resolves for the target.

The oracle is TileLang's own compile path: the captured run is what ``tilelang.compile`` (a
``@tilelang.jit`` call) lowered in the program. The tests read both traces' IR texts pass by pass
(not through passdiff's alignment or ``irtrace check``), then ask ``irtrace check`` too. The
examples/gemm.py case (no ``out_idx``) is in ``test_record_resolved.py``.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from importlib.util import find_spec
from pathlib import Path

import pytest

from irtrace.base.errors import ExitCode
from irtrace.cli.main import main
from irtrace.trace.model import KernelRun, Trace
from irtrace.trace.reader import load_trace

from ..conftest import DATA, ROOT

KERNELS = DATA / "jit_outputs.py"
"""A lazy ``@tilelang.jit(out_idx=[-1])`` kernel and an eager ``T.empty`` one, and a ``__main__``."""
TILELANG_EXAMPLES = os.environ.get("TILELANG_EXAMPLES")
CALLEE_ALLOCATED = '"tilelang_callee_allocated_outputs": 1'
"""How TileLang's JIT marks outputs the host wrapper allocates (``tilelang/jit/abi.py``)."""
HOST_WRAPPER_PASSES = 7
"""Passes a compile runs after the device codegen, for the host wrapper; a recording has none."""


def irtrace(
    *arguments: str, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    python_path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    return subprocess.run(
        [sys.executable, "-m", "irtrace.cli", *arguments],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**os.environ, **(env or {}), "PYTHONPATH": python_path},
        timeout=900,
    )


Irtrace = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture
def in_process(capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Irtrace:
    """``irtrace`` run in this process: the answer is the point, not a process boundary."""

    def run(*arguments: str, cwd: Path) -> subprocess.CompletedProcess[str]:
        monkeypatch.chdir(cwd)
        capfd.readouterr()
        code = main(list(arguments))
        out, err = capfd.readouterr()
        return subprocess.CompletedProcess(["irtrace", *arguments], code, out, err)

    return run


def assert_same_lowering(recorded: Trace, record_run: KernelRun, captured: Trace, run: KernelRun) -> None:
    """The oracle: the captured compile ran the recorded passes with the same IR texts, from the
    same input, then only the host wrapper's passes."""
    assert run.kernel == record_run.kernel
    assert captured.text(run.input_ir) == recorded.text(record_run.input_ir)
    assert len(run.passes) == len(record_run.passes) + HOST_WRAPPER_PASSES
    for mine, theirs in zip(record_run.passes, run.passes, strict=False):
        assert mine.name == theirs.name
        assert recorded.text(mine.ir_after or mine.ir_before) == captured.text(
            theirs.ir_after or theirs.ir_before
        )
    assert all(p.scope == "host" for p in run.passes[len(record_run.passes) :])
    assert run.source_sha256 == record_run.source_sha256


def assert_check_finds_no_difference(
    in_process: Irtrace, run: str, record: str, kernels: int, cwd: Path
) -> None:
    check = in_process("check", run, "--baseline", record, cwd=cwd)
    assert check.returncode == ExitCode.OK, check.stdout
    assert f"{kernels} unchanged" in check.stdout, check.stdout
    assert "differs" not in check.stdout and "changed" not in check.stdout.replace("unchanged", "")


def test_a_jit_kernel_with_out_idx_and_an_eager_t_empty_kernel_agree_run_and_record(
    tmp_path: Path, in_process: Irtrace
) -> None:
    """The program compiles both for CUDA; ``-t hip:gfx942`` lowers its modules again for HIP,
    with the outputs marked as TileLang's JIT marks them for HIP (the next test's oracle)."""
    shutil.copy(KERNELS, tmp_path / KERNELS.name)
    done = irtrace(
        "run",
        "--no-gpu",
        "-q",
        "-t",
        "hip:gfx942",
        "-o",
        "run.jsonl",
        "--",
        sys.executable,
        KERNELS.name,
        cwd=tmp_path,
    )
    assert done.returncode == ExitCode.OK, done.stderr[-3000:]
    recorded = in_process(
        "record",
        f"{KERNELS.name}::add_one(1024)",
        f"{KERNELS.name}::double(N=1024)",
        "-t",
        "cuda:sm_90a",
        "-t",
        "hip:gfx942",
        "-o",
        "rec.jsonl",
        cwd=tmp_path,
    )
    assert recorded.returncode == ExitCode.OK, recorded.stderr[-3000:]

    captured, record = load_trace(tmp_path / "run.jsonl"), load_trace(tmp_path / "rec.jsonl")
    compiled = [r for r in captured.runs if r.target == "cuda:sm_90a"]
    recorded_cuda = [r for r in record.runs if r.target == "cuda:sm_90a"]
    assert [r.kernel for r in compiled] == [r.kernel for r in recorded_cuda] == ["add_one", "double"]
    for run, record_run in zip(compiled, recorded_cuda, strict=True):
        # TileLang's JIT marked the outputs (0.1.15: allocated by the host wrapper): not vacuous
        assert "tilelang_out_idx" in captured.text(run.input_ir)
        assert_same_lowering(record, record_run, captured, run)
    for run in captured.runs:
        if run.target == "hip:gfx942":  # HIP's backend allocates no outputs in the host wrapper
            assert CALLEE_ALLOCATED not in captured.text(run.input_ir)
    assert_check_finds_no_difference(in_process, "run.jsonl", "rec.jsonl", 4, tmp_path)


_COMPILING_FOR = """
import tilelang
from tilelang.backend.target import determine_target
from jit_outputs import add_one

for spec in ({"kind": "hip", "mcpu": "gfx942"}, "metal"):
    target = determine_target(spec, return_object=True)
    tilelang.compile(add_one.get_tir(1024), out_idx=add_one.out_idx, target=target)
"""


def test_each_targets_execution_backend_decides_the_outputs_as_tilelangs_compile_does(
    tmp_path: Path, in_process: Irtrace
) -> None:
    """HIP's TVM-FFI backend keeps caller-allocated outputs (``tilelang_out_idx`` only), Metal's
    torch backend takes the PrimFunc as built: the recordings follow the program's compiles."""
    shutil.copy(KERNELS, tmp_path / KERNELS.name)
    (tmp_path / "compiling.py").write_text(_COMPILING_FOR)
    done = irtrace(
        "run", "--no-gpu", "-q", "-o", "run.jsonl", "--", sys.executable, "compiling.py", cwd=tmp_path
    )
    assert done.returncode == ExitCode.OK, done.stderr[-3000:]
    recorded = in_process(
        "record",
        f"{KERNELS.name}::add_one(1024)",
        "-t",
        "hip:gfx942",
        "-t",
        "metal",
        "-o",
        "rec.jsonl",
        cwd=tmp_path,
    )
    assert recorded.returncode == ExitCode.OK, recorded.stderr[-3000:]

    captured, record = load_trace(tmp_path / "run.jsonl"), load_trace(tmp_path / "rec.jsonl")
    assert [r.target for r in captured.runs] == [r.target for r in record.runs] == ["hip:gfx942", "metal"]
    hip, metal = captured.runs
    assert "tilelang_out_idx" in captured.text(hip.input_ir) and CALLEE_ALLOCATED not in captured.text(
        hip.input_ir
    )
    assert "tilelang_out_idx" not in captured.text(metal.input_ir)
    for run, record_run in zip(captured.runs, record.runs, strict=True):
        assert captured.text(run.input_ir) == record.text(record_run.input_ir)
        assert [p.name for p in run.passes[: len(record_run.passes)]] == [p.name for p in record_run.passes]
    assert_check_finds_no_difference(in_process, "run.jsonl", "rec.jsonl", 2, tmp_path)


_TILELANG_REFUSES = """
import sys
import tilelang
from tilelang.backend.target import determine_target
from jit_outputs import add_one

try:
    tilelang.compile(add_one.get_tir(1024), out_idx=add_one.out_idx,
                     target=determine_target({"kind": "cuda", "arch": "sm_90a"}, return_object=True))
except ValueError as error:
    sys.exit("refused: " + str(error))
"""


def test_a_backend_tilelang_cannot_resolve_here_leaves_the_function_as_built_quietly(tmp_path: Path) -> None:
    """``TILELANG_EXECUTION_BACKEND=cutedsl`` names no backend of CUDA targets: TileLang's compile
    refuses, so there is no ABI to copy; the recording lowers the PrimFunc as the definition
    builds it, and says nothing about it."""
    shutil.copy(KERNELS, tmp_path / KERNELS.name)
    (tmp_path / "refused.py").write_text(_TILELANG_REFUSES)
    env = {"TILELANG_EXECUTION_BACKEND": "cutedsl"}
    oracle = subprocess.run(
        [sys.executable, "refused.py"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, **env, "PYTHONPATH": str(ROOT)},
        timeout=600,
    )
    assert oracle.returncode != 0 and "refused: " in oracle.stderr and "cutedsl" in oracle.stderr

    done = irtrace(
        "record",
        f"{KERNELS.name}::add_one(1024)",
        "-t",
        "cuda:sm_90a",
        "-o",
        "rec.jsonl",
        cwd=tmp_path,
        env=env,
    )
    assert done.returncode == ExitCode.OK, done.stderr[-3000:]
    (run,) = load_trace(tmp_path / "rec.jsonl").runs
    trace = load_trace(tmp_path / "rec.jsonl")
    assert run.status == "ok"
    assert "tilelang_out_idx" not in trace.text(run.input_ir)
    assert "cutedsl" not in done.stderr + done.stdout and "backend" not in done.stderr.lower()


def test_an_out_idx_tilelang_refuses_is_a_failed_build_not_a_traceback(
    tmp_path: Path, in_process: Irtrace
) -> None:
    (tmp_path / "bad_outputs.py").write_text(
        KERNELS.read_text().replace("@tilelang.jit(out_idx=[-1])", "@tilelang.jit(out_idx=[7])")
    )
    done = in_process(
        "record", "bad_outputs.py::add_one(1024)", "-t", "cuda:sm_90a", "-o", "rec.jsonl", cwd=tmp_path
    )
    # as any kernel that cannot be built: recorded as failed, with TileLang's reason, and exit 5
    assert done.returncode == ExitCode.LOWERING, done.stdout + done.stderr
    (run,) = load_trace(tmp_path / "rec.jsonl").runs
    assert run.status == "failed" and run.error is not None
    assert "add_one(1024)" in run.error and "out_idx index 7 is out of range" in run.error
    assert "out_idx index 7" in done.stdout + done.stderr and "Traceback" not in done.stdout + done.stderr


WORKSPACE_NUMBER = re.compile(r"\bworkspace(?:_\d+)?\b")
"""TileLang 0.1.15 numbers MLA decode's reduction workspaces by heap address: untraced
``tilelang.lower`` of its PrimFunc in fresh processes gives one of two kernel sources, differing
only in these names (measured 2026-12-07, 2 of 5; docs/ci.md, History independence, says why)."""


def without_workspace_numbers(text: str) -> str:
    return WORKSPACE_NUMBER.sub("workspace", text)


@pytest.mark.skipif(
    not TILELANG_EXAMPLES, reason="set TILELANG_EXAMPLES to tile-ai/tilelang's examples folder"
)
@pytest.mark.skipif(find_spec("einops") is None, reason="TileLang's MLA example imports einops")
def test_tilelangs_mla_decode_agrees_run_and_record(tmp_path: Path, in_process: Irtrace) -> None:
    """``deepseek_mla/example_mla_decode.py``: ``@tilelang.jit(out_idx=[4])`` building
    ``main_no_split``, called by ``main()`` with argparse's sizes; recorded with no arguments (the
    instance ``__main__`` gives). Both get the same input module and the same IR after every pass;
    the one thing that may differ is TileLang's own numbering of the reduction workspaces
    (``WORKSPACE_NUMBER``), from ``tl.MergeSharedMemoryAllocations`` on, as between two untraced
    lowerings."""
    script = Path(str(TILELANG_EXAMPLES)) / "deepseek_mla" / "example_mla_decode.py"
    shutil.copy(script, tmp_path / script.name)
    done = irtrace(
        "run", "--no-gpu", "-q", "-o", "run.jsonl", "--", sys.executable, script.name, cwd=tmp_path
    )
    assert done.returncode == ExitCode.OK, done.stderr[-3000:]
    recorded = in_process("record", f"{script.name}::flashattn", "-o", "rec.jsonl", cwd=tmp_path)
    assert recorded.returncode == ExitCode.OK, recorded.stderr[-3000:]
    assert "arguments from __main__" in recorded.stdout

    captured, record = load_trace(tmp_path / "run.jsonl"), load_trace(tmp_path / "rec.jsonl")
    (run,), (record_run,) = captured.runs, record.runs
    assert run.kernel == record_run.kernel == "flashattn" and run.target == record_run.target
    assert "tilelang_out_idx" in captured.text(run.input_ir)
    assert captured.text(run.input_ir) == record.text(record_run.input_ir)
    assert len(run.passes) == len(record_run.passes) + HOST_WRAPPER_PASSES
    renumbered = False
    for mine, theirs in zip(record_run.passes, run.passes, strict=False):
        assert mine.name == theirs.name
        text, truth = (
            record.text(mine.ir_after or mine.ir_before),
            captured.text(theirs.ir_after or theirs.ir_before),
        )
        renumbered = renumbered or (text != truth and mine.name.startswith("tl.MergeSharedMemoryAllocations"))
        assert text == truth or (
            renumbered and without_workspace_numbers(text) == without_workspace_numbers(truth)
        )

    check = in_process("check", "run.jsonl", "--baseline", "rec.jsonl", cwd=tmp_path)
    assert check.returncode == ExitCode.OK, check.stdout
    assert "input differs" not in check.stdout
    if renumbered:
        assert "IR first differs after tl.MergeSharedMemoryAllocations" in check.stdout, check.stdout
    else:
        assert_check_finds_no_difference(in_process, "run.jsonl", "rec.jsonl", 1, tmp_path)
