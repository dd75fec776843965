"""Kernel spec parsing and target names: no lowering involved."""

from __future__ import annotations

import pytest

from irtrace.core.errors import UsageError
from irtrace.core.specs import DtypeName, parse_spec
from irtrace.core.targets import ASCEND, PORTABLE, TARGETS, get_target, resolve_targets, target_names


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
