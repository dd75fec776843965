"""A trace is data (issue 19): `irtrace repro` neither evaluates a trace's arguments nor imports
the file its spec names, and its script holds trace fields only as literals; passviz shows only
the kernel source the trace itself holds, never a file its spec points to. Each test is the
attack: the marker file is not created, the secret is not in the report."""

from __future__ import annotations

import ast
import asyncio
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from irtrace.base.errors import ExitCode, TraceFormatError
from irtrace.ci.repro import ReproError, SavedModule, failing_step, pass_factory, render_script, target_json
from irtrace.cli.main import main
from irtrace.trace.model import KernelRun, PassRecord, Trace
from irtrace.trace.reader import load_trace
from tests.conftest import EXAMPLES, ROOT, record_to_file

from .conftest import one_line, run_tool

GEMM_CALL = "matmul(256, 256, 256)"


def kernel_copy(folder: Path) -> Path:
    """The example GEMM copied into ``folder`` (so a test may move or delete it)."""
    folder.mkdir(parents=True, exist_ok=True)
    return Path(shutil.copy(EXAMPLES / "gemm.py", folder / "gemm.py"))


@pytest.fixture(scope="module")
def webgpu_failure(tmp_path_factory: pytest.TempPathFactory) -> tuple[Trace, Path]:
    """The GEMM recorded for webgpu, where tl.LayoutInference fails (no gemm for that target),
    and the kernel file it was recorded from."""
    folder = tmp_path_factory.mktemp("repro")
    kernel = kernel_copy(folder / "kernels")
    trace = record_to_file(folder / "webgpu.jsonl", [f"{kernel}::{GEMM_CALL}"], ["webgpu"])
    assert trace.runs[0].status == "failed"
    return trace, kernel


def lines_of(trace: Trace) -> list[dict[str, Any]]:
    assert trace.path
    return [json.loads(line) for line in Path(trace.path).read_text().splitlines()]


def write_edited(trace: Trace, path: Path, **run_fields: Any) -> Path:
    """``trace`` written to ``path`` with ``run_fields`` set on its run records (``None`` drops a field)."""
    out = []
    for line in lines_of(trace):
        if line["record"] == "run":
            line.update(run_fields)
            line = {key: value for key, value in line.items() if value is not None or key not in run_fields}
        out.append(json.dumps(line))
    path.write_text("\n".join(out) + "\n")
    return path


def marker_maker(marker: Path) -> str:
    """Python that creates ``marker``: the payload of every attack here."""
    return f"__import__('pathlib').Path({str(marker)!r}).touch()"


def evil_kernel_file(folder: Path, marker: Path) -> Path:
    """A .py file that creates ``marker`` when imported, defining a ``matmul`` to look the part."""
    evil = folder / "evil.py"
    evil.write_text(f"{marker_maker(marker)}\n\n\ndef matmul(*args):\n    raise SystemExit(3)\n")
    return evil


# ----------------------------------------------------------------------------- irtrace repro


def test_repro_writes_hostile_fields_as_literals_and_never_imports_the_spec_path(
    webgpu_failure: tuple[Trace, Path], tmp_path: Path
) -> None:
    trace, kernel = webgpu_failure
    marker = tmp_path / "MARKER"
    payload = marker_maker(marker)
    version = f'0.1"""; {payload}; """'
    name = f'matmul"""\n{payload}\n"""'
    evil = evil_kernel_file(tmp_path, marker)
    hostile = write_edited(
        trace,
        tmp_path / 'hostile"""name.jsonl',
        spec=f"{evil}::{GEMM_CALL}",
        tilelang_version=version,
        kernel=name,
    )
    script = tmp_path / "repro.py"

    # in process (main): had evil.py been imported, its marker would exist all the same
    code = main(["repro", str(hostile), "--kernel-file", str(kernel), "-o", str(script)])

    assert code == 0
    assert not marker.exists()  # evil.py, the spec's path, was not imported
    constants = {
        node.targets[0].id: ast.literal_eval(node.value)
        for node in ast.parse(script.read_text()).body
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name)
    }
    assert constants["TILELANG_VERSION"] == version
    assert constants["KERNEL"] == name
    assert constants["TRACE_FILE"] == hostile.name
    ran = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, cwd=tmp_path, timeout=300
    )
    assert not marker.exists()
    assert ran.returncode == 1, ran.stdout + ran.stderr  # the compiler's error, still reproduced
    assert "gemm implementation is registered" in ran.stderr


def test_repro_refuses_an_argument_that_is_not_a_literal(
    webgpu_failure: tuple[Trace, Path], tmp_path: Path
) -> None:
    trace, kernel = webgpu_failure
    marker = tmp_path / "MARKER"
    hostile = write_edited(
        trace, tmp_path / "hostile.jsonl", spec=f"{kernel}::matmul(256, 256, {marker_maker(marker)})"
    )

    done = run_tool(
        "irtrace", "repro", str(hostile), "--kernel-file", str(kernel), "-o", str(tmp_path / "r.py")
    )

    assert done.returncode == ExitCode.USAGE
    assert "literal arguments only" in one_line(done.stderr)
    assert not marker.exists() and not (tmp_path / "r.py").exists()


_REFUSED_BEFORE_TILELANG = """
import sys
from irtrace.ci.repro import ReproError, require_rebuildable
from irtrace.trace.reader import load_trace
trace, kernel = load_trace(sys.argv[1]), sys.argv[2]
(run,) = [run for run in trace.runs if run.status != "ok"]
try:
    require_rebuildable(run, kernel, "repro")
except ReproError as error:
    print("refused:", "literal arguments only" in str(error), "tilelang loaded:", "tilelang" in sys.modules)
"""


def test_a_spec_that_is_not_literals_is_refused_before_tilelang_loads(
    webgpu_failure: tuple[Trace, Path], tmp_path: Path
) -> None:
    """Repro and reduce check the spec first: a hostile trace costs no TileLang import (4-8 s)."""
    trace, kernel = webgpu_failure
    hostile = write_edited(
        trace, tmp_path / "hostile.jsonl", spec=f"{kernel}::matmul(256, 256, __import__('os').getpid())"
    )
    done = subprocess.run(
        [sys.executable, "-c", _REFUSED_BEFORE_TILELANG, str(hostile), str(kernel)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert done.stdout.strip() == "refused: True tilelang loaded: False", done.stdout + done.stderr


def test_repro_without_a_kernel_file_imports_nothing_and_says_which_file_to_give(
    webgpu_failure: tuple[Trace, Path], tmp_path: Path
) -> None:
    trace, _ = webgpu_failure
    marker = tmp_path / "MARKER"
    evil = evil_kernel_file(tmp_path, marker)
    hostile = write_edited(trace, tmp_path / "hostile.jsonl", spec=f"{evil}::{GEMM_CALL}")

    done = run_tool("irtrace", "repro", str(hostile), "-o", str(tmp_path / "r.py"))

    assert done.returncode == ExitCode.USAGE
    line = one_line(done.stderr)
    assert "--kernel-file" in line and repr(str(evil)) in line
    assert not marker.exists() and not (tmp_path / "r.py").exists()


def _record(**fields: Any) -> PassRecord:
    base: dict[str, Any] = dict(
        index=3, name="tl.LayoutInference", raw_name="tl.LayoutInference", phase="lower", pipeline="cuda",
        depth=0, parent=None, start_s=0.0, wall_s=0.0, self_s=0.0, changed=False, ir_before="0" * 64,
        ir_after=None, status="failed", error="InternalError: boom",
    )  # fmt: skip
    return PassRecord(**{**base, **fields})


def _run(**fields: Any) -> KernelRun:
    base: dict[str, Any] = dict(
        run_id=0, kernel="matmul", spec="gemm.py::matmul(256, 256, 256)", args={}, target="webgpu",
        target_detail='{"kind": "webgpu"}', pass_configs={}, tilelang_version="0.1.15", host={},
        status="failed", error="InternalError: boom",
    )  # fmt: skip
    return KernelRun(**{**base, **fields})


def test_the_script_holds_every_trace_field_only_as_a_literal() -> None:
    payload = '"""; __import__("os").system("touch MARKER"); """'
    run = _run(
        kernel=f"k{payload}",
        target=f"t{payload}",
        tilelang_version=f"0.1{payload}",
        pass_configs={f"tl.x{payload}": [f"v{payload}", 1, 2.5, None, True]},
        error=f"E: {payload}\n{payload}",
    )
    record = _record(name=f"tl.Pass{payload}", error=f"InternalError: {payload}\n{payload}")
    target = {"kind": "webgpu", "tag": f"x{payload}\\"}
    script = render_script(
        run, record, SavedModule("{}", f"# IR\n{payload}\r{payload}"), target, f"t{payload}"
    )

    tree = ast.parse(script)
    kinds = [type(node).__name__ for node in tree.body]
    assert kinds == ["Expr"] + ["Import"] * 6 + ["Assign"] * 10 + ["FunctionDef", "If"], kinds
    values = {
        node.targets[0].id: ast.literal_eval(node.value)
        for node in tree.body
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name)
    }
    assert values["KERNEL"] == run.kernel and values["TILELANG_VERSION"] == run.tilelang_version
    assert values["TARGET"] == target and values["PASS_CONFIGS"] == run.pass_configs
    assert values["FAILING_STEP"] == record.name and payload in values["RECORDED_ERROR"]
    assert "system" not in (ast.get_docstring(tree) or "")


@pytest.mark.parametrize("detail", ['{"kind": NaN}', '{"kind": "llvm", "x": 1e999}', "[1]", "not json", ""])
def test_a_target_that_is_not_a_json_object_of_literals_is_refused(detail: str) -> None:
    with pytest.raises(ReproError, match="not a TVM target"):
        target_json(_run(target_detail=detail))


def test_only_pass_factories_and_codegen_functions_are_looked_up_by_name() -> None:
    loader = _record(phase="codegen", name="codegen", raw_name="runtime.ModuleLoadFromFile")
    assert "is not a codegen function" in str(failing_step(loader))
    assert pass_factory(_record(raw_name="runtime.x.y")) is None
    assert pass_factory(_record(raw_name="ffi.Module load")) is None
    assert pass_factory(_record(raw_name="tl.LayoutInference")) == "tl.transform.LayoutInference"


# ----------------------------------------------------------------------------- passviz


@pytest.fixture(scope="module")
def recorded_then_deleted(tmp_path_factory: pytest.TempPathFactory) -> tuple[Trace, str]:
    """The GEMM recorded for cuda:sm_90 from a copy that is deleted afterwards, and that copy's text."""
    folder = tmp_path_factory.mktemp("report")
    kernel = kernel_copy(folder / "kernels")
    text = kernel.read_text()
    trace = record_to_file(folder / "traces" / "gemm.jsonl", [f"{kernel}::{GEMM_CALL}"], ["cuda:sm_90"])
    kernel.unlink()
    return trace, text


def report(trace_path: Path, tmp_path: Path) -> str:
    out = tmp_path / "report.html"
    done = run_tool("passviz", "html", str(trace_path), "-o", str(out))
    assert done.returncode == 0, done.stderr
    return out.read_text()


def test_the_report_shows_the_source_the_trace_recorded_after_the_file_is_gone(
    recorded_then_deleted: tuple[Trace, str], tmp_path: Path
) -> None:
    import html
    import re

    trace, text = recorded_then_deleted
    assert trace.path and not Path(trace.runs[0].spec.split("::")[0]).exists()
    page = report(Path(trace.path), tmp_path)
    start = page.index("<pre class='pysource'>")
    shown = html.unescape(re.sub(r"<[^>]+>", "", page[start : page.index("</pre>", start)]))
    function = text[text.index("def matmul(") : text.index("return gemm")]
    assert all(line.strip() in shown for line in function.splitlines() if line.strip())


def test_a_hostile_spec_cannot_pull_another_file_into_the_report_or_the_browser(
    recorded_then_deleted: tuple[Trace, str], tmp_path: Path
) -> None:
    trace, _ = recorded_then_deleted
    secret = "SECRET_KEY = 'hunter2-do-not-publish'"
    (tmp_path / "settings.py").write_text(f"{secret}\n\n\ndef matmul():\n    pass\n")
    traces = tmp_path / "traces"
    traces.mkdir()
    cases = {
        "absolute, old trace": dict(spec=f"{tmp_path / 'settings.py'}::{GEMM_CALL}", kernel_file_sha256=None),
        "relative, old trace": dict(spec=f"../settings.py::{GEMM_CALL}", kernel_file_sha256=None),
        "absolute, with source": dict(spec=f"{tmp_path / 'settings.py'}::{GEMM_CALL}"),
    }
    for name, fields in cases.items():
        hostile = write_edited(trace, traces / f"{name}.jsonl", **fields)
        page = report(hostile, tmp_path)
        assert "hunter2" not in page, name
        assert ("<pre class='pysource'>" in page) == ("kernel_file_sha256" not in fields), name
        assert "hunter2" not in asyncio.run(browsed_source(hostile)), name


async def browsed_source(path: Path) -> str:
    """The text of the browser's source pane (``m``) for the trace's first run."""
    from passviz.app import PassvizApp
    from passviz.widgets.code_view import CodeView

    app = PassvizApp([load_trace(path).verify()], show_times=False)
    async with app.run_test(size=(160, 45)) as pilot:
        await pilot.press("m")
        await pilot.pause()
        return "\n".join(str(item) for item in app.query_one("#source", CodeView).rows.items)


def test_a_kernel_file_text_that_does_not_match_its_sha256_is_a_format_error(
    recorded_then_deleted: tuple[Trace, str], tmp_path: Path
) -> None:
    trace, _ = recorded_then_deleted
    sha = trace.runs[0].kernel_file_sha256
    assert sha
    lines = lines_of(trace)
    edited = [dict(line, text="SECRET = 1\n") if line.get("sha256") == sha else line for line in lines]
    path = tmp_path / "edited.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in edited))
    done = run_tool("passviz", "html", str(path), "-o", str(tmp_path / "r.html"))
    assert done.returncode == ExitCode.TRACE_FORMAT
    assert "does not match its SHA-256" in one_line(done.stderr, "passviz")

    missing = write_edited(trace, tmp_path / "missing.jsonl", kernel_file_sha256="f" * 64)
    with pytest.raises(TraceFormatError, match="does not hold"):
        load_trace(missing)


def test_merge_keeps_the_recorded_source(recorded_then_deleted: tuple[Trace, str], tmp_path: Path) -> None:
    trace, text = recorded_then_deleted
    assert trace.path
    out = tmp_path / "merged.jsonl"
    done = run_tool("irtrace", "merge", trace.path, trace.path, "-o", str(out))
    assert done.returncode == 0, done.stderr
    merged = load_trace(out)
    assert [merged.kernel_file(run) for run in merged.runs] == [text, text]


def test_the_recorded_source_is_the_text_imported_unsaved_editor_text_included(tmp_path: Path) -> None:
    """The language server lowers an editor's unsaved text: the trace holds that text, not the
    file on disk, since that is what the IR came from."""
    from irtrace.lowering.api import analyze_kernel
    from irtrace.lowering.loader import load_kernel_module, select_kernels
    from irtrace.lowering.recorder import LoweringOptions
    from irtrace.targets.backends import get_target
    from irtrace.targets.specs import parse_spec
    from irtrace.trace.writer import TraceWriter

    kernel = kernel_copy(tmp_path)
    unsaved = kernel.read_text() + "\n# an edit not saved yet\n"
    loaded = load_kernel_module(kernel, unsaved)
    spec = parse_spec(f"{kernel}::{GEMM_CALL}")
    writer = TraceWriter()
    options = LoweringOptions(get_target("cuda:sm_90"), stop_after=("tl.LayoutInference",))
    analyzed = analyze_kernel(loaded, select_kernels(loaded, spec)[0], spec, writer, options)
    assert writer.trace().kernel_file(analyzed.recorded.run) == unsaved
