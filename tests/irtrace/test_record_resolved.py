"""``irtrace record FILE.py::kernel`` with no arguments takes the instance the editor and the MCP
server take (the shared resolver), says which in its summary and its trace, and ``--instance``
lists or picks among the real ones; ``irtrace instances FILE.py`` lists them without a GPU. A
captured run and a recorded run of the same kernel carry the same name and compare as equal.

Oracles: the buffers TileLang builds for the program's own calls (``tests/lsp/program_oracle.py``,
the program run with its compilations intercepted); the sizes a script is run with; and for
run/record, the two traces' IR texts read pass by pass (not through passdiff's alignment).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from irtrace.base.errors import ExitCode
from irtrace.cli.main import main
from irtrace.trace.reader import load_trace

from ..conftest import EXAMPLES, ROOT

CHECKED = ROOT / "tests" / "lsp" / "data" / "instances" / "checked_kernels.py"
"""TileLang's example style: ``main()`` parses sizes, builds and checks each kernel on the GPU."""
ORACLE = ROOT / "tests" / "lsp" / "program_oracle.py"
ENV = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}


def irtrace(*arguments: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "irtrace.cli", *arguments],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=ENV,
        timeout=600,
    )


Irtrace = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture
def in_process(capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Irtrace:
    """``irtrace`` as ``irtrace()`` runs it, but in this process (``main``): where the command's
    answer is the point, not a process boundary (one Python start and TileLang import less)."""

    def run(*arguments: str, cwd: Path) -> subprocess.CompletedProcess[str]:
        monkeypatch.chdir(cwd)
        capfd.readouterr()
        code = main(list(arguments))
        out, err = capfd.readouterr()
        return subprocess.CompletedProcess(["irtrace", *arguments], code, out, err)

    return run


def program_buffers(path: Path) -> set[str]:
    """``[16, 256] float32 local.fragment`` for each buffer of each kernel's first instance, as the
    program's own calls build them (the oracle lowers them up to layout inference for sm_90)."""
    done = subprocess.run(
        [sys.executable, str(ORACLE), "--all", str(path)],
        capture_output=True,
        text=True,
        env=ENV,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    hints = json.loads(done.stdout.strip().splitlines()[-1])
    return {" ".join(hint.split(" · ")[0].replace(" ×2", "").split(" ")[:-1]) for _, hint in hints}


def test_record_without_arguments_takes_the_programs_instance_and_says_so(
    tmp_path: Path, in_process: Irtrace
) -> None:
    path = tmp_path / CHECKED.name
    shutil.copy(CHECKED, path)
    out = tmp_path / "rec.jsonl"
    done = in_process(
        "record",
        f"{path.name}::row_sum",
        f"{path.name}::scale_rows",
        "-t",
        "cuda:sm_90",
        "-o",
        str(out),
        cwd=tmp_path,
    )
    assert done.returncode == ExitCode.OK, done.stderr[-2000:]
    assert "row_sum: `row_sum(M=512, N=256, block_M=16)` — arguments from __main__" in done.stdout
    trace = load_trace(out)
    assert [run.args["resolved"]["origin"] for run in trace.runs] == ["__main__", "__main__"]
    # every buffer layout inference placed is one the program's own call builds
    expected = program_buffers(path)
    layouts = json.loads(in_process("layouts", str(out), "--json", cwd=tmp_path).stdout)
    ours = {
        f"[{', '.join(str(d) for d in buffer['shape'])}] {buffer['dtype']}"
        for run in layouts["runs"]
        for record in run["layouts"]
        for buffer in record["buffers"]
    }
    assert ours and ours <= expected, (ours, expected)
    assert "[128, 256] float32" not in ours  # the defaults' block_M would give this tile


def test_instance_lists_and_picks_a_recorded_run_or_the_entry_point(
    tmp_path: Path, in_process: Irtrace
) -> None:
    """A run recorded in the folder (``irtrace run``) comes first, as in the editor; ``--instance``
    takes the entry point's instead, and an unknown label is a usage error naming the real ones."""
    for name in ("gemm.py", "gemm_script.py"):
        shutil.copy(EXAMPLES / name, tmp_path / name)
    done = irtrace(
        "run", "-o", "irtrace.jsonl", "--", sys.executable, "gemm_script.py", "--size", "512", cwd=tmp_path
    )
    assert done.returncode == ExitCode.OK, done.stderr[-2000:]
    listed = in_process("instances", "gemm.py::matmul", "--json", cwd=tmp_path)
    assert listed.returncode == ExitCode.OK, listed.stderr[-2000:]
    (entry,) = json.loads(listed.stdout)["kernels"]
    assert entry["instance"]["call"].startswith("matmul(M=512, N=512, K=512")  # the script's --size
    assert [other["origin"] for other in entry["others"]] == ["__main__"]
    assert entry["others"][0]["call"].startswith("matmul(M=1024")  # gemm.py's own main: the defaults
    also = in_process("record", "gemm.py::matmul", "--instance", "list", cwd=tmp_path)
    assert also.returncode == ExitCode.OK and "--instance '__main__'" in also.stdout
    assert not (tmp_path / "irtrace.jsonl.partial").exists()

    out = tmp_path / "picked.jsonl"
    picked = in_process("record", "gemm.py::matmul", "--instance", "__main__", "-o", str(out), cwd=tmp_path)
    assert picked.returncode == ExitCode.OK, picked.stderr[-2000:]
    (run,) = load_trace(out).runs
    assert run.args["kwargs"]["M"] == 1024 and run.args["resolved"]["origin"] == "__main__"
    wrong = in_process(
        "record", "gemm.py::matmul", "--instance", "\x1b[31mnope", "-o", str(out), cwd=tmp_path
    )
    assert wrong.returncode == ExitCode.USAGE
    assert "has no such instance" in wrong.stderr and "__main__" in wrong.stderr
    assert "\x1b" not in wrong.stderr  # the label is shown escaped


_COMPILING_SCRIPT = """
import tilelang
from tilelang.backend.target import determine_target
from gemm import matmul

target = determine_target({"kind": "cuda", "arch": "sm_90a"}, return_object=True)
tilelang.compile(matmul(1024, 1024, 1024), target=target)
"""


def test_a_captured_run_and_a_recorded_run_of_one_kernel_compare_equal(
    tmp_path: Path, in_process: Irtrace
) -> None:
    """``examples/gemm.py``'s factory ``matmul`` builds a PrimFunc called ``gemm``: captured from a
    program's ``tilelang.lower`` and ``tilelang.compile`` (which also compiles the host wrapper),
    and recorded from the spec, it is ``matmul`` in all three, and ``irtrace check`` finds no
    difference. The oracle reads the traces' IR texts pass by pass."""
    shutil.copy(EXAMPLES / "gemm.py", tmp_path / "gemm.py")
    shutil.copy(EXAMPLES / "gemm_script.py", tmp_path / "gemm_script.py")
    (tmp_path / "compiling.py").write_text(_COMPILING_SCRIPT)
    for output, script, extra in (
        ("lowered.jsonl", "gemm_script.py", ["--bench"]),
        ("compiled.jsonl", "compiling.py", []),
    ):
        done = irtrace("run", *extra, "-o", output, "--", sys.executable, script, cwd=tmp_path)
        assert done.returncode == ExitCode.OK, done.stderr[-2000:]
    done = in_process(
        "record", "gemm.py::matmul(1024, 1024, 1024)", "-t", "cuda:sm_90a", "-o", "rec.jsonl", cwd=tmp_path
    )
    assert done.returncode == ExitCode.OK, done.stderr[-2000:]

    recorded = load_trace(tmp_path / "rec.jsonl")
    (record_run,) = recorded.runs
    for output, extra in (("lowered.jsonl", 0), ("compiled.jsonl", 7)):
        captured = load_trace(tmp_path / output)
        (run,) = captured.runs
        assert run.kernel == record_run.kernel == "matmul"
        if output == "lowered.jsonl":  # benched by the function it captured, not by its shown name
            assert run.bench is not None and "KeyError" not in (run.bench.error or ""), run.bench
        # the oracle: the device pipeline is the same passes with the same IR texts; a compile adds
        # the host wrapper's passes after the device codegen, all host-side
        assert len(run.passes) == len(record_run.passes) + extra
        for mine, theirs in zip(record_run.passes, run.passes, strict=False):
            assert mine.name == theirs.name
            assert recorded.text(mine.ir_after or mine.ir_before) == captured.text(
                theirs.ir_after or theirs.ir_before
            )
        wrapper = run.passes[len(record_run.passes) :]
        assert all(p.scope == "host" for p in wrapper) and (not wrapper or wrapper[-1].name == "host codegen")

        check = in_process("check", output, "--baseline", "rec.jsonl", cwd=tmp_path)
        assert check.returncode == ExitCode.OK, check.stdout
        assert "1 unchanged" in check.stdout and "changed" not in check.stdout.replace("unchanged", "")
        diff = subprocess.run(
            [
                sys.executable,
                "-c",
                "import sys; from passdiff.cli import main; sys.exit(main())",
                "runs",
                "rec.jsonl",
                output,
            ],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            env=ENV,
            timeout=600,
        )
        assert "no pass differs in its output" in diff.stdout, diff.stdout
        assert ("host wrapper (7 passes after codegen" in diff.stdout) == bool(extra)


def test_instances_of_a_kernel_file_refuse_bad_input_with_a_clear_error(tmp_path: Path) -> None:
    hostile = tmp_path / "evil\x1b[2J.py"
    cases = [
        (["instances", str(hostile)], ExitCode.INPUT, "does not exist"),
        (["instances", "gemm.py::matmul(1024)"], ExitCode.USAGE, "without arguments"),
        (["instances", "trace.jsonl", "gemm.py"], ExitCode.USAGE, "not both"),
        (
            ["record", "gemm.py::matmul", "--instance", "list", "-m", "irtrace.toml"],
            ExitCode.USAGE,
            "--manifest",
        ),
    ]
    for arguments, code, words in cases:
        done = irtrace(*arguments, cwd=tmp_path)
        assert done.returncode == code, (arguments, done.stderr)
        assert words in done.stderr and "Traceback" not in done.stderr and "\x1b" not in done.stderr


_SEEDED_ON_THE_GPU = """
import torch
import tilelang
import tilelang.language as T


@tilelang.jit
def scale(N, block=64):
    @T.prim_func
    def main(A: T.Tensor((N,), T.float32)):
        with T.Kernel(T.ceildiv(N, block), threads=64) as bx:
            for i in T.Parallel(block):
                A[bx * block + i] = A[bx * block + i] * 2.0

    return main


if __name__ == "__main__":
    generator = torch.Generator(device="cuda")
    generator.manual_seed(0)
    rows = torch.randn(96, 2, device="cuda", generator=generator)
    kernel = scale(rows.shape[0] * rows.shape[1])
"""


def test_a_program_seeding_its_inputs_on_the_gpu_still_gives_its_instance(
    tmp_path: Path, in_process: Irtrace
) -> None:
    """TileLang's fused MoE draws its inputs from a ``torch.Generator(device="cuda")``: without a
    GPU the entry-point run gets a CPU generator and goes on to the kernel's call (96 x 2 rows:
    N = 192, which only running the program knows)."""
    (tmp_path / "seeded.py").write_text(_SEEDED_ON_THE_GPU)
    done = in_process("instances", "seeded.py::scale", "--json", cwd=tmp_path)
    assert done.returncode == ExitCode.OK, done.stderr[-2000:]
    (entry,) = json.loads(done.stdout)["kernels"]
    assert entry["instance"] == {"call": "scale(N=192)", "origin": "__main__", "instances": ["__main__"]}
