"""Every backend TileLang has: each target lowers a bundled kernel into its own source language,
and the coverage matrix reports what lowers where, in three formats."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

from irtrace.base.errors import ExitCode, UsageError
from irtrace.ci.coverage import coverage_matrix, failing_pass, matrix_markdown
from irtrace.cli.main import main
from irtrace.targets.backends import ALIASES, TARGETS, get_target, resolve_targets
from irtrace.trace.model import STATUS_OK

from ..conftest import EXAMPLES
from .conftest import Coverage

# What only that backend's generated source contains (checked against TileLang's own headers).
DIALECT_MARKERS = {
    "CUDA": ("#include <tl_templates/cuda/", "__global__"),
    "HIP": ("#include <hip/hip_runtime.h>", "__global__"),
    "Metal": ("#include <metal_stdlib>", "[[kernel"),
    "AscendC": ("#include <tl_templates/ascend/",),
    "C": ("#include <tl_templates/cpp/", 'extern "C"'),
    "WGSL": ("@group(0) @binding(0) var<storage",),
}
README = EXAMPLES / "README.md"
MATRIX_START, MATRIX_END = "<!-- coverage-matrix:start -->", "<!-- coverage-matrix:end -->"


@pytest.mark.slow
@pytest.mark.parametrize("target", [name for name in TARGETS if name != "llvm"])
def test_each_target_lowers_a_bundled_kernel_in_its_own_source_language(
    target: str, coverage: Coverage
) -> None:
    ok = [run for run in coverage.trace.select(target=target) if run.status == STATUS_OK]
    assert ok, f"no bundled example lowers on {target}"
    language = TARGETS[target].source_language
    for run in ok:
        source = coverage.trace.kernel_source(run) or ""
        for marker in DIALECT_MARKERS[language]:
            assert marker in source, f"{run.kernel} on {target}: no {marker!r} in its {language} source"
        others = [m[0] for lang, m in DIALECT_MARKERS.items() if lang != language]
        assert not [m for m in others if m in source], f"{run.kernel} on {target} holds another dialect"


@pytest.mark.slow
def test_llvm_lowers_until_codegen_which_this_tvm_build_lacks(coverage: Coverage) -> None:
    (run,) = coverage.trace.select("cpu_gemm", "llvm")
    failed = failing_pass(run)
    assert failed is not None and failed.name == "codegen"
    assert "target.build.llvm" in (failed.error or "")
    assert all(not p.failed for p in run.passes if p.name != "codegen")


def test_aliases_and_patterns_name_real_targets() -> None:
    assert get_target("cuda:hopper").name == "cuda:sm_90a"
    assert get_target("hip:mi300x").name == "hip:gfx942"
    assert get_target("hip:rdna4").name == "hip:gfx1201"
    assert get_target("cpu").name == "c"
    assert get_target("gfx90a").name == "hip:gfx90a"
    assert all(target in TARGETS for target in ALIASES.values())
    cuda = [t.name for t in resolve_targets(["cuda:*"], "tilelang")]
    assert cuda == [name for name in TARGETS if name.startswith("cuda:")]
    assert "ascend" not in [t.name for t in resolve_targets(["all"], "tilelang")]
    assert [t.name for t in resolve_targets(["all"], "ascend")] == ["ascend"]
    with pytest.raises(UsageError, match="names no targets"):
        resolve_targets(["tpu:*"], "tilelang")


def test_record_and_run_take_a_backend_pattern_for_its_targets(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`-t 'hip:*'` is listed as valid: it stands for every HIP target in `record` and `run`."""
    from irtrace.trace.reader import load_trace

    kernel = tmp_path / "broken.py"
    kernel.write_text("def broken():\n    raise ValueError('no kernel here')\n")
    output = tmp_path / "trace.jsonl"
    main(["record", "-t", "hip:*", f"{kernel}::broken()", "-o", str(output)])
    assert [run.target for run in load_trace(output).runs] == [n for n in TARGETS if n.startswith("hip:")]
    capsys.readouterr()
    main(["run", "-t", "cuda:*", "--", sys.executable, str(tmp_path / "missing.py")])
    error = capsys.readouterr().err
    assert "missing.py" in error and "unknown target" not in error  # the targets were taken


def test_targets_command_lists_every_target_with_family_and_aliases(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["targets"]) == ExitCode.OK
    out = capsys.readouterr().out
    for spec in TARGETS.values():
        assert spec.name in out and spec.family in out
    for vendor in ("NVIDIA", "AMD", "Apple", "Huawei", "CPU"):
        assert vendor in out
    assert "cuda:hopper" in out and "hip:mi300x" in out and "cuda:*" in out


@pytest.mark.slow
def test_matrix_in_three_formats_agrees_with_the_runs(
    coverage: Coverage, capsys: pytest.CaptureFixture[str], tmp_path_factory: pytest.TempPathFactory
) -> None:
    path = tmp_path_factory.mktemp("matrix") / "coverage.jsonl"
    path.write_text(coverage.trace_text)
    assert main(["matrix", str(path), "--format", "json"]) == ExitCode.OK
    document = json.loads(capsys.readouterr().out)
    cells = {(c["kernel"], c["target"]): c for c in document["cells"]}
    assert len(cells) == len(coverage.trace.runs)
    for run in coverage.trace.runs:
        cell = cells[(run.kernel, run.target)]
        assert (cell["status"] == "ok") == (run.status == STATUS_OK)
        if run.status != STATUS_OK:
            innermost = max((p for p in run.passes if p.failed), key=lambda p: p.depth, default=None)
            assert cell["failed_pass"] == (innermost.name if innermost else None)
    # One root cause shows once: WebGPU has no tl.gemm, whichever GEMM-like kernel meets it.
    gemm_on_webgpu = [c for c in document["causes"] if "tl.gemm requires a target-specific" in c["headline"]]
    assert len(gemm_on_webgpu) == 1 and len(gemm_on_webgpu[0]["cells"]) >= 3
    assert {c["target"] for c in gemm_on_webgpu[0]["cells"]} == {"webgpu"}

    assert main(["matrix", str(path), "--format", "markdown"]) == ExitCode.OK
    markdown = capsys.readouterr().out
    assert markdown.startswith("| kernel | `cuda:sm_70` |")
    assert re.search(r"^\| `matmul` \| ok \|", markdown, re.MULTILINE)

    assert main(["matrix", str(path), "-k", "matmul"]) == ExitCode.OK
    table = capsys.readouterr().out
    assert "matmul" in table and "tl.LayoutInference" in table and "rms_norm" not in table


@pytest.mark.slow
def test_examples_readme_holds_the_current_matrix(coverage: Coverage) -> None:
    text = README.read_text()
    assert MATRIX_START in text and MATRIX_END in text, "examples/README.md lost its matrix markers"
    committed = text.split(MATRIX_START, 1)[1].split(MATRIX_END, 1)[0].strip()
    current = matrix_markdown(coverage_matrix(coverage.trace.runs)).strip()
    assert committed == current, (
        "examples/README.md's coverage matrix is out of date; regenerate it with\n"
        "  irtrace record --manifest examples/irtrace.toml -t all -o coverage.jsonl\n"
        "  irtrace matrix coverage.jsonl --format markdown"
    )
