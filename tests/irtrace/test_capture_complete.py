"""``irtrace run`` records each captured kernel completely: the device kernel's source, lowering
time, the program's call (arguments, ``T.const``/``T.dynamic`` sizes, tensors, call site, test id)
and typed pass configs. The oracle is the script itself: it writes TileLang's own
``kernel.get_kernel_source()`` and what it called the kernel with."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from irtrace.trace.model import PHASE_CODEGEN, STATUS_OK, Trace
from irtrace.trace.reader import load_trace
from irtrace.trace.writer import TraceWriter

from ..conftest import DATA, ROOT

SCRIPT = DATA / "captured_call_script.py"
TEST_ID = "tests/test_rows.py::test_scale[48-256]"
"""What the captured run must name as its test: ``PYTEST_CURRENT_TEST`` without its phase."""


def irtrace(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "irtrace.cli", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=environment,
        timeout=600,
    )


@pytest.fixture(scope="module")
def captured(tmp_path_factory: pytest.TempPathFactory) -> tuple[Trace, dict[str, Any], Path]:
    """The script run under ``irtrace run`` as rank 1 of 2 in a pytest test: its trace, what it
    wrote itself, and the folder it ran in."""
    folder = tmp_path_factory.mktemp("captured")
    out, oracle = folder / "t.jsonl", folder / "oracle.json"
    done = irtrace(
        "run",
        "--source-map",
        "-o",
        str(out),
        "--",
        "python",
        str(SCRIPT),
        str(oracle),
        cwd=folder,
        env={"RANK": "1", "WORLD_SIZE": "2", "PYTEST_CURRENT_TEST": f"{TEST_ID} (call)"},
    )
    assert done.returncode == 0, done.stderr
    return load_trace(out), json.loads(oracle.read_text()), folder


def test_source_is_the_device_kernel_tilelang_gave_the_script(captured: Any) -> None:
    trace, oracle, folder = captured
    (run,) = trace.runs
    done = irtrace("ir", str(folder / "t.jsonl"), "--source", cwd=folder)
    assert done.returncode == 0, done.stderr
    assert done.stdout.rstrip("\n") == oracle["source"].rstrip("\n")
    assert "__global__" in (trace.kernel_source(run) or "")


def test_host_wrapper_is_its_own_stage(captured: Any) -> None:
    trace, _, _ = captured
    (run,) = trace.runs
    stages = [(p.name, p.scope) for p in run.passes if p.phase == PHASE_CODEGEN and p.depth == 0]
    assert stages == [("codegen", "device"), ("host codegen", "host")]
    host = next(p for p in run.passes if p.name == "host codegen")
    host_text = trace.text(host.ir_after) if host.ir_after else ""
    assert host_text and "__global__" not in host_text and host.ir_after != run.source_sha256


def test_lowering_time_is_recorded(captured: Any) -> None:
    trace, _, folder = captured
    (run,) = trace.runs
    assert run.total_s is not None and run.total_s >= sum(p.self_s for p in run.passes if p.depth == 0)
    shown = irtrace("show", str(folder / "t.jsonl"), cwd=folder)
    assert shown.returncode == 0, shown.stderr
    header = shown.stdout.splitlines()[0]
    assert " ms, " in header and "?" not in header


def test_arguments_and_sizes_are_the_scripts_call(captured: Any) -> None:
    trace, oracle, _ = captured
    (run,) = trace.runs
    assert run.args == {"args": oracle["args"], "kwargs": oracle["kwargs"]}
    instance = run.instance
    assert instance is not None
    assert instance.constants == oracle["constants"]
    assert instance.dynamic == oracle["dynamic"]
    assert {name: [t.shape, t.dtype, t.device] for name, t in instance.tensors.items()} == {
        name: [t["shape"], t["dtype"], t["device"]] for name, t in oracle["kwargs"].items() if name in "XY"
    }


def test_instance_names_process_call_site_and_test(captured: Any) -> None:
    trace, _, _ = captured
    (run,) = trace.runs
    instance = run.instance
    assert instance is not None
    line = next(i for i, text in enumerate(SCRIPT.read_text().splitlines(), 1) if ".compile(" in text)
    assert instance.call_site == f"{os.path.realpath(SCRIPT)}:{line}"
    assert (instance.rank, instance.world_size) == (1, 2)
    assert instance.process == f"pid {instance.pid}, rank 1 of 2" and instance.pid > 0
    assert instance.test_id == TEST_ID
    defined = next(
        i for i, text in enumerate(SCRIPT.read_text().splitlines(), 1) if text.startswith("@tilelang.jit")
    )
    assert instance.definition == f"{os.path.realpath(SCRIPT)}:{defined}"


def test_instances_query_gives_the_scripts_call(captured: Any) -> None:
    """``irtrace instances --json``, the document the language server reads, holds the call as
    the script wrote it down."""
    _, oracle, folder = captured
    done = irtrace("instances", "--json", "t.jsonl", cwd=folder)
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    assert document["format"] == "irtrace-instances/1"
    (instance,) = document["instances"]
    assert instance["kernel"] == "row_scale" and instance["test_id"] == TEST_ID
    assert instance["args"] == {"args": oracle["args"], "kwargs": oracle["kwargs"]}
    assert (instance["constants"], instance["dynamic"]) == (oracle["constants"], oracle["dynamic"])
    assert instance["targets"] == ["cuda:sm_90a"]
    shown = irtrace("instances", "t.jsonl", cwd=folder)
    assert "sizes:     N=256" in shown.stdout and f"test:      {TEST_ID}" in shown.stdout
    # named as the call's parameters, in Python's spelling (the script called compile(x, y, factor=3.0))
    assert "arguments: X=<tensor float16[48, 256]>, Y=<tensor float16[48, 256]>, factor=3.0" in shown.stdout


def test_show_json_holds_the_instance(captured: Any) -> None:
    """``irtrace show --json`` carries each captured run's instance: the test id the session had
    and the script's own line that compiled the kernel (oracles: the environment the fixture set,
    the script's text)."""
    _, oracle, folder = captured
    done = irtrace("show", "t.jsonl", "--json", cwd=folder)
    assert done.returncode == 0, done.stderr
    (run,) = json.loads(done.stdout)["runs"]
    line = next(i for i, text in enumerate(SCRIPT.read_text().splitlines(), 1) if ".compile(" in text)
    instance = run["instance"]
    assert (instance["test_id"], instance["call_site"]) == (TEST_ID, f"{os.path.realpath(SCRIPT)}:{line}")
    assert (instance["constants"], instance["dynamic"]) == (oracle["constants"], oracle["dynamic"])


def test_pass_configs_keep_their_types(captured: Any) -> None:
    """The decorator's ``pass_configs={"tl.disable_warp_specialized": True}`` reaches the
    ``PassContext`` as TVM's ``T.bool(True)``: the trace holds ``true``, not that text."""
    trace, _, _ = captured
    (run,) = trace.runs
    assert run.pass_configs["tl.disable_warp_specialized"] is True


def test_typed_tvm_config_values_are_stored_as_json_values(tmp_path: Path) -> None:
    """Values read back from a real ``PassContext`` (IntImm, FloatImm, arrays, strings) become
    the JSON values that went in, in a recorded run's header too."""
    from tilelang import tvm

    from irtrace.lowering.recorder import begin_run_record

    given = {
        "tl.disable_warp_specialized": True,
        "tl.disable_tma_lower": False,
        "tl.config_index_bitwidth": 64,
        "tl.pass_profile_threshold_ms": 1.5,
        "tl.device_compile_flags": ["-O3", "--use_fast_math"],
        "tl.dump_ir_path": "dumps/here",
    }
    with tvm.transform.PassContext(config=given):
        configs = dict(tvm.transform.PassContext.current().config)
    assert str(configs["tl.disable_warp_specialized"]) == "T.bool(True)"  # the premise
    path = tmp_path / "t.jsonl"
    with TraceWriter(path) as writer:
        run = begin_run_record(writer, "cuda:sm_90", "k", "k.py::k", None, "", configs)
        writer.end_run(
            run.run_id, status=STATUS_OK, error=None, total_s=0.0, input_ir=None, source_sha256=None
        )
    (loaded,) = load_trace(path).runs
    assert loaded.pass_configs == given
    assert [type(loaded.pass_configs[k]) for k in given] == [type(v) for v in given.values()]


def test_jit_hooks_are_tilelang_own_outside_a_capture() -> None:
    from tilelang.jit import JITImpl
    from tilelang.language.eager.builder import TirTemplate

    from irtrace.lowering.jit_calls import observe_jit_calls

    before = (JITImpl.compile, TirTemplate.get_tir)
    with observe_jit_calls():
        assert (JITImpl.compile, TirTemplate.get_tir) != before
    assert (JITImpl.compile, TirTemplate.get_tir) == before


EXAMPLE_GEMM = DATA / "tilelang_example_gemm.py"

_UNTRACED_HIP = """
import json, sys
sys.path.insert(0, sys.argv[1])
import tilelang
from tilelang import tvm
from tilelang_example_gemm import matmul

target = tvm.target.Target(json.loads(sys.argv[2]))
func = matmul.get_tir(M=1024, N=1024, K=1024, block_M=128, block_N=128, block_K=32)
with tvm.transform.PassContext(opt_level=3), target:
    print(tilelang.lower(func, target=target).kernel_source, end="")
"""


@pytest.mark.sweep  # 16 s on 2 cores: with the sweeps, to keep make test within 10 minutes
def test_extra_target_lowers_tilelang_example_to_hip_source(tmp_path: Path) -> None:
    """``-t hip:gfx942`` on TileLang's own gemm example, on a machine with no GPU and no ROCm: the
    script's compilation keeps cuda:sm_90a, the kernel is lowered again to a HIP kernel (never
    through hipcc) equal to plain ``tilelang.lower`` of the same instance, and the script's own
    failure at ``.cuda()`` is reported as exit 7 without ROCm's driver warnings."""
    out = tmp_path / "t.jsonl"
    done = irtrace("run", "-t", "hip:gfx942", "-o", str(out), "--", "python", str(EXAMPLE_GEMM), cwd=tmp_path)
    assert done.returncode == 7, done.stderr
    assert "the script failed after 2 captured run(s)" in done.stderr
    assert "Warning: Unable to detect ROCm version" not in done.stderr
    trace = load_trace(out)
    assert [(r.target, r.status) for r in trace.runs] == [
        ("cuda:sm_90a", STATUS_OK),
        ("hip:gfx942", STATUS_OK),
    ]
    cuda, hip = trace.runs
    assert hip.args == cuda.args and hip.instance == cuda.instance
    assert cuda.instance is not None and cuda.instance.constants == {"M": 1024, "N": 1024, "K": 1024}
    untraced = subprocess.run(
        [sys.executable, "-c", _UNTRACED_HIP, str(DATA), hip.target_detail],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert untraced.returncode == 0, untraced.stderr
    source = trace.kernel_source(hip) or ""
    assert "hip_runtime.h" in source and "__global__" in source
    assert source == untraced.stdout


_HOOK_PROBE = """
import sys
from tilelang.jit import JITImpl
from tilelang.language.eager.builder import TirTemplate
open(sys.argv[1], "w").write(JITImpl.compile.__module__ + " " + TirTemplate.get_tir.__module__)
"""


def test_irtrace_run_hooks_tilelang_only_while_the_script_runs(tmp_path: Path) -> None:
    """In one process, as a test harness would call it: the script sees irtrace's wrappers,
    and after ``irtrace run`` returns TileLang's methods are its own again."""
    from tilelang.jit import JITImpl
    from tilelang.language.eager.builder import TirTemplate

    from irtrace.cli.main import main

    script, seen = tmp_path / "probe.py", tmp_path / "seen.txt"
    script.write_text(_HOOK_PROBE)
    before = (JITImpl.compile, TirTemplate.get_tir)
    main(["run", "-q", "-o", str(tmp_path / "t.jsonl"), "--", "python", str(script), str(seen)])
    assert seen.read_text() == "irtrace.lowering.jit_calls irtrace.lowering.jit_calls"
    assert (JITImpl.compile, TirTemplate.get_tir) == before


def test_a_prim_func_called_main_is_recorded_under_its_factorys_name(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """``@T.prim_func def main`` inside a factory or a ``@tilelang.jit`` function goes by that
    function's name; a module-level ``main`` keeps its own. ``irtrace instances`` shows each call's
    arguments named, in Python's spelling (``double=False``). Oracle: the names and calls the
    script printed itself (its functions' ``__name__`` and ``inspect.signature(...).bind``).
    In process, as a test harness calls ``irtrace run``: the names are what is checked here, and
    the other tests of this file run it in a subprocess."""
    from irtrace.cli.main import main

    script, output = DATA / "main_factories.py", tmp_path / "t.jsonl"
    code = main(["run", "-o", str(output), "--", "python", str(script)])
    done = capfd.readouterr()
    assert code == 0, done.err
    calls = [line.split(" ", 2)[1:] for line in done.out.splitlines() if line.startswith("called ")]
    assert [name for name, *_ in calls] == ["scale", "main", "shift"]
    trace = load_trace(output)
    assert [run.kernel for run in trace.runs] == [name for name, *_ in calls]
    code = main(["instances", str(output)])
    shown = capfd.readouterr()
    assert code == 0, shown.err
    headings = [line.split()[1] for line in shown.out.splitlines() if line[:1].isdigit()]
    assert headings == [name for name, *_ in calls]
    for _, *arguments in calls:
        if arguments:
            assert f"   arguments: {arguments[0]}\n" in shown.out
    assert "false" not in shown.out and "null" not in shown.out


def test_a_captured_kernels_lines_are_mapped_in_the_scripts_file(captured: Any) -> None:
    """An eager ``@tilelang.jit`` kernel captured from a script: ``--line`` finds the script's file
    through the run's instance, and the IR lines it names print the script's statement."""
    _, _, folder = captured
    line = next(
        i for i, text in enumerate(SCRIPT.read_text().splitlines(), 1) if "Y[by, bx * block + i] =" in text
    )
    done = irtrace("ir", str(folder / "t.jsonl"), "--line", str(line), "--json", cwd=folder)
    assert done.returncode == 0, done.stderr
    passes = json.loads(done.stdout)["passes"]
    store = re.compile(r"^\s*Y(_\d+)?\[.*\] = ")  # TVM renames the buffer Y_1, Y_2 as it goes
    assert len(passes) > 5 and all(store.match(text) for item in passes for text in item["text"])
