"""What depends on the installed TileLang release: `make test-versions` runs these in one venv per
release, 0.1.13 to 0.1.15 and 0.1.12 (outside the range: it must be refused in one line).

Inside the range, each claim is checked against an oracle TileLang computes by another route:
pass order and IR against a synchronous TVM instrument, kernel source against an untraced
``tilelang.lower`` in a fresh process, the recorded version against ``tilelang.__version__``.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from irtrace.base.errors import ExitCode
from irtrace.lowering import instrumentation
from irtrace.targets import compat

from ..conftest import DATA, EXAMPLES, ROOT

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

pytestmark = pytest.mark.versions

INSTALLED = compat.installed_tilelang()
IN_RANGE = compat.unsupported_reason(INSTALLED) is None
in_range = pytest.mark.skipif(not IN_RANGE, reason=f"tilelang {INSTALLED} is outside the supported range")
GEMM = f"{EXAMPLES / 'gemm.py'}::matmul(256, 256, 256)"

_UNTRACED = """
import hashlib, json, sys
from irtrace.lowering.api import RecordRequest, prepare_request
from irtrace.targets.specs import parse_spec
import tilelang, tvm
out = {"version": tilelang.__version__}
for prepared in prepare_request(RecordRequest(parse_spec(sys.argv[1]), tuple(sys.argv[2:]), {})):
    with tvm.transform.PassContext(opt_level=3, config=prepared.pass_configs), prepared.tvm_target:
        source = tilelang.lower(prepared.built.func, target=prepared.tvm_target).kernel_source
    out[prepared.name + "|" + prepared.target.name] = hashlib.sha256(source.encode()).hexdigest()
print(json.dumps(out))
"""


def irtrace(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """The irtrace CLI of this interpreter, in a fresh process."""
    return subprocess.run(
        [sys.executable, "-c", "import sys; from irtrace.cli import main; sys.exit(main())", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
    )


def untraced(spec: str, *targets: str) -> dict[str, str]:
    done = subprocess.run(
        [sys.executable, "-c", _UNTRACED, spec, *targets], capture_output=True, text=True, cwd=ROOT
    )
    assert done.returncode == 0, done.stderr[-2000:]
    result: dict[str, str] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def test_range_is_written_once() -> None:
    """pyproject's requirement, compat's bounds and the error message all say the same range."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    (requirement,) = [d for d in project["dependencies"] if re.match(r"tilelang\b", d)]
    assert requirement.replace(" ", "") == f"tilelang{compat.SUPPORTED}"
    low, high = (".".join(map(str, bound)) for bound in (compat.OLDEST, compat.BEYOND))
    assert f">={low},<{high}" == compat.SUPPORTED
    for version in ("0.1.12", high, "0.2.0", "nightly"):
        reason = compat.unsupported_reason(version)
        assert reason is not None and compat.SUPPORTED in reason and "\n" not in reason, version
    for version in (low, "0.1.14", "0.1.15", "0.1.15.post1", "0.1.15+cu128"):
        assert compat.unsupported_reason(version) is None, version


@pytest.mark.skipif(IN_RANGE, reason=f"tilelang {INSTALLED} is supported")
def test_a_release_outside_the_range_is_refused_in_one_line(tmp_path: Path) -> None:
    done = irtrace("record", GEMM, "-t", "cuda:sm_90", "-o", "gemm.jsonl", cwd=tmp_path)
    assert done.returncode == ExitCode.ENVIRONMENT, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert f"tilelang {INSTALLED} is installed" in line and compat.SUPPORTED in line
    assert not (tmp_path / "gemm.jsonl").exists()


@in_range
def test_recording_matches_the_oracles_on_this_release(tmp_path: Path) -> None:
    from irtrace.lowering.api import RecordRequest, prepare_request
    from irtrace.targets.specs import parse_spec
    from irtrace.trace.reader import load_trace
    from irtrace.trace.writer import TraceWriter

    from ..irtrace.conftest import record_against_oracle

    targets = ("cuda:sm_90", "hip:gfx942", "metal")
    path = tmp_path / "gemm.jsonl"
    found = {}
    with TraceWriter(path) as writer:
        for prepared in prepare_request(RecordRequest(parse_spec(GEMM), targets, {})):
            assert prepared.built is not None, prepared.error
            result, found[prepared.target.name] = record_against_oracle(writer, prepared)
            assert result.error is None, result.error
    assert found == {target: [] for target in targets}
    truth = untraced(GEMM, *targets)
    trace = load_trace(path)
    for run in trace.runs:
        assert run.tilelang_version == truth["version"] == INSTALLED
        assert run.source_sha256 == truth[f"matmul|{run.target}"], run.target


@in_range
def test_jit_kernels_of_both_styles_record_on_this_release(tmp_path: Path) -> None:
    """The loader reads ``@tilelang.jit`` internals (``JITImpl``), which TileLang moves between releases."""
    lazy, eager = (
        f"{DATA / 'jit_kernels.py'}::lazy_add()",
        f"{DATA / 'jit_kernels.py'}::eager_scale(M=64, N=256)",
    )
    done = irtrace("record", lazy, eager, "-t", "cuda:sm_90", "-o", "jit.jsonl", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    from irtrace.trace.reader import load_trace

    runs = {run.kernel: run for run in load_trace(tmp_path / "jit.jsonl").runs}
    assert runs["lazy_add"].pass_configs.get("tl.disable_warp_specialized") is True
    for spec, name in ((lazy, "lazy_add"), (eager, "eager_scale")):
        assert runs[name].source_sha256 == untraced(spec, "cuda:sm_90")[f"{name}|cuda:sm_90"], name


@in_range
def test_irtrace_run_captures_a_script_or_says_it_needs_0_1_14(tmp_path: Path) -> None:
    """``irtrace run`` needs TileLang to attach its tool to the script's own compilations
    (``tilelang.instrumentation``, from 0.1.14 on); before that it says so in one line."""
    done = irtrace(
        "run", "-o", "run.jsonl", "--", sys.executable, str(DATA / "capture_script.py"), cwd=tmp_path
    )
    if not instrumentation.has_instrumentation():
        assert done.returncode == ExitCode.ENVIRONMENT, done.stderr
        assert done.stderr.strip() == (
            f"irtrace: error: irtrace run needs tilelang>=0.1.14 (tilelang.instrumentation); "
            f"tilelang {INSTALLED} is installed"
        )
        return
    assert done.returncode == 0, done.stderr
    from irtrace.trace.reader import load_trace

    runs = load_trace(tmp_path / "run.jsonl").runs
    assert [run.status for run in runs] == ["ok", "ok"]
    assert {run.tilelang_version for run in runs} == {INSTALLED}


@in_range
def test_ascend_records_or_is_refused_by_release(tmp_path: Path) -> None:
    reason = compat.backend_unavailable("ascend")
    spec = f"{EXAMPLES / 'ascend_vector.py'}::add_silu()"
    done = irtrace("record", spec, "-t", "ascend", "-o", "ascend.jsonl", "-q", cwd=tmp_path)
    if reason is None:
        assert done.returncode == 0, done.stderr
        return
    # before 0.1.15: no Ascend backend; the example's `import tilelang.ascend` fails, or the target is refused
    assert done.returncode in (ExitCode.ENVIRONMENT, ExitCode.KERNEL_SOURCE), done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    made = irtrace("record", GEMM, "-t", "ascend", "-o", "a.jsonl", cwd=tmp_path)
    assert made.returncode == ExitCode.ENVIRONMENT
    assert made.stderr.strip() == f"irtrace: error: {reason}"


@in_range
@pytest.mark.parametrize("target", ["cuda:sm_90", "hip:gfx942"])
def test_language_server_facts_equal_the_compilers_on_this_release(target: str) -> None:
    """The hints' buffer facts (tilelang-lsp's analysis, through the recorder) against a plain TVM
    instrument reading the module after layout inference (tests/lsp/oracle.py)."""
    import importlib.util

    from tilelang_lsp.protocol import Analyze
    from tilelang_lsp.worker.analysis import analyze

    from ..lsp.oracle import compiler_buffers, tilelang_target

    path = EXAMPLES / "gemm.py"
    result = analyze(Analyze(path=str(path), text=path.read_text(), default_target=target))
    assert result.diagnostics == ()
    (kernel,) = result.kernels
    assert kernel.status == "ok", kernel
    got = {
        (b.name, b.line): (tuple(b.allocated_shape), b.dtype, b.scope, b.layout_short) for b in kernel.buffers
    }
    spec = importlib.util.spec_from_file_location("gemm_oracle_copy", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    with tilelang_target(target):
        func = module.matmul()
    expected = {
        (b.name, b.line): (b.allocated, b.dtype, b.scope, b.layout)
        for b in compiler_buffers(func, target)
        if b.line is not None
    }
    assert expected and got == expected
