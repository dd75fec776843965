"""Kernel spec parsing and target names: no lowering involved."""

from __future__ import annotations

import msgspec
import pytest

from irtrace.base.errors import UsageError
from irtrace.targets.backends import (
    ASCEND,
    PORTABLE,
    TARGETS,
    dialect_of_source,
    get_target,
    known_target_name,
    resolve_targets,
    target_names,
)
from irtrace.targets.specs import DtypeName, parse_spec


def test_plain_path_means_every_primfunc() -> None:
    spec = parse_spec("kernels/gemm.py")
    assert (spec.path, spec.name, spec.called) == ("kernels/gemm.py", None, False)


def test_name_without_call() -> None:
    spec = parse_spec("gemm.py::matmul")
    assert (spec.name, spec.called, spec.args) == ("matmul", False, ())


def test_factory_call_with_literals_and_dtypes() -> None:
    spec = parse_spec("gemm.py::matmul(1024, -1, (2, 3), block_M=128, dtype=T.float16, flag=True, x=None)")
    assert spec.args == (1024, -1, (2, 3))
    assert spec.kwargs == {"block_M": 128, "dtype": DtypeName("float16"), "flag": True, "x": None}
    assert spec.args_json()["kwargs"]["dtype"] == "T.float16"
    assert spec.text == "gemm.py::matmul(1024, -1, (2, 3), block_M=128, dtype=T.float16, flag=True, x=None)"


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("gemm.py::matmul(**cfg)", "**kwargs is not allowed"),
        ("gemm.py::matmul(*sizes)", "*args is not allowed"),
        ("gemm.py::matmul(1,", "cannot parse"),
        ("gemm.py::", "empty name"),
        ("gemm.py::9lives", "not a Python name"),
        ("::matmul", "has no file"),
    ],
)
def test_bad_specs_are_usage_errors(text: str, fragment: str) -> None:
    with pytest.raises(UsageError, match=fragment.replace("*", r"\*").replace("(", r"\(")):
        parse_spec(text)


def test_unknown_target_lists_valid_ones() -> None:
    with pytest.raises(UsageError) as caught:
        get_target("cuda:sm_99")
    for name in target_names():
        assert name in caught.value.message


def test_all_expands_per_dialect() -> None:
    portable = [t.name for t in resolve_targets(["all"], PORTABLE)]
    assert portable == [name for name, spec in TARGETS.items() if spec.dialect == PORTABLE]
    assert {"cuda:sm_70", "cuda:sm_120", "hip:gfx90a", "hip:gfx1201", "metal", "c", "webgpu"} <= set(portable)
    assert "ascend" not in portable
    assert [t.name for t in resolve_targets(["all"], ASCEND)] == ["ascend"]
    assert [t.name for t in resolve_targets([], ASCEND)] == ["ascend"]
    assert resolve_targets(["metal", "all", "metal"], PORTABLE)[0].name == "metal"


# ----------------------------------------------------------------------------- target names and dialects


def test_every_target_is_named_back_from_its_tvm_target() -> None:
    """The oracle is TileLang's own ``Target`` for each spec: its kind and arch/mcpu name the
    spec again, as ``irtrace run`` names what a script lowered for."""
    from irtrace.lowering.capture import short_target_name
    from irtrace.lowering.tvm_targets import make_tvm_target

    for spec in TARGETS.values():
        assert short_target_name(make_tvm_target(spec)) == spec.name


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("cuda:sm_90a", "cuda:sm_90a"),
        (" cuda ", "cuda:sm_90a"),
        ("sm_80", "cuda:sm_80"),
        ("hip:mi300x", "hip:gfx942"),
        ("cuda -arch=sm_90a", "cuda:sm_90a"),
        ("cuda -keys=cuda,gpu -arch=sm_86", "cuda:sm_86"),
        ("cuda -arch=sm_89a", "cuda:sm_89"),
        ("cuda -arch=sm_87", "cuda:sm_90a"),
        ("rocm -mcpu=gfx90a", "hip:gfx90a"),
        ("hip -mcpu=gfx1030", "hip:gfx942"),
        ("metal", "metal"),
        ("llvm -mtriple=x86_64", "llvm"),
        ("opencl", None),
        ("", None),
        (None, None),
    ],
)
def test_known_target_name_reads_names_aliases_and_tvm_text(text: str | None, expected: str | None) -> None:
    assert known_target_name(text) == expected


def test_dialect_from_the_text_agrees_with_the_imported_module() -> None:
    """Two routes to a file's dialect: its import statements, and the modules it holds once run."""
    from irtrace.lowering.loader import load_kernel_module

    from ..conftest import EXAMPLES

    dialects = {}
    for file in sorted(EXAMPLES.glob("*.py")):
        dialects[file.name] = load_kernel_module(file).dialect
        assert dialect_of_source(file.read_text()) == dialects[file.name], file.name
    assert {name for name, dialect in dialects.items() if dialect == ASCEND} == {
        "ascend_gemm_epilogue.py",
        "ascend_vector.py",
    }
    assert dialect_of_source("from tilelang.ascend import language as T\n") == ASCEND
    assert dialect_of_source("import numpy as np, tilelang.ascend.language as T\n") == ASCEND
    assert dialect_of_source("import tilelang.ascendant\n# import tilelang.ascend\n") == PORTABLE


def test_the_default_target_is_the_one_tilelang_picks_for_a_hopper_gpu() -> None:
    """Oracle: TileLang's own CUDA target detector names a GPU of compute capability 9.0 (H100,
    H200) ``sm_`` + ``nvcc.get_target_arch``; every default (``record``, ``run``, the language
    server, the MCP server, the ``cuda`` alias) is that target."""
    from tilelang.contrib import nvcc

    from irtrace.lowering.capture import GPU_SCRIPT_TARGET
    from irtrace.targets.backends import DEFAULT_TARGET, default_target, get_target
    from tilelang_lsp.options import InitializationOptions
    from tilelang_lsp.protocol import DocumentRequest

    tilelangs = f"cuda:sm_{nvcc.get_target_arch((9, 0))}"
    assert tilelangs == "cuda:sm_90a"
    assert tilelangs == DEFAULT_TARGET and DEFAULT_TARGET in TARGETS
    assert (
        default_target("tilelang").name
        == get_target("cuda").name
        == get_target("cuda:hopper").name
        == tilelangs
    )
    assert tilelangs == GPU_SCRIPT_TARGET
    assert InitializationOptions().default_target == tilelangs
    assert {f.name: f.default for f in msgspec.structs.fields(DocumentRequest)}["default_target"] == tilelangs
