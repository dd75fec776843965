"""Kernels in every style real TileLang code uses, on every target each applies to: every compiled
hint equals the compiler's own facts.

The corpus (``data/styles``) holds eager ``@tilelang.jit`` kernels (TileLang's flagship GEMM with
``.compile(M=...)``, tensors passed at the call, ``T.dynamic``), a lazy jit kernel with a symbolic
row count, ``@autotune`` kernels, a package with relative imports, helper modules and expression
arguments, the classic PrimFunc and factory, and an Ascend kernel. Each case below instantiates
its kernel the way TileLang does (``JITImpl.get_tir(**kwargs)``, ``AutoTuneImpl.jit_impl`` with the
first config, a factory call) with arguments written here, and ``tests/lsp/oracle.py`` reads the
buffers after layout inference through a plain TVM pass instrument. The server reads its own
arguments from the files; the target comes from a ``pyproject.toml`` beside a copy of the corpus.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from lsprotocol import types
from pytest_lsp import LanguageClient

from tests.lsp.conftest import hints, open_file, styles_corpus, wait_published, whole_file_server
from tests.lsp.oracle import compiler_buffers, expected_hint, tilelang_target

client = whole_file_server(trusted=True, extra_targets=[], summary=False)
pytestmark = pytest.mark.asyncio(loop_scope="module")

GPU_TARGETS = ("cuda:sm_90", "hip:gfx942", "metal")


def first_config(impl: Any, *args: Any) -> dict[str, Any]:
    """The first config TileLang's autotuner would try (a list, or a function of the arguments)."""
    configs = impl.configs(*args) if callable(impl.configs) else impl.configs
    return dict(next(iter(configs)))


def symbolic(name: str) -> Any:
    import tilelang.language as T

    return T.dynamic(name)


@dataclass(frozen=True)
class Case:
    """One kernel of the corpus and how TileLang itself instantiates it."""

    file: str
    kernel: str
    build: Callable[[ModuleType], Any]
    targets: tuple[str, ...] = GPU_TARGETS
    renames: dict[str, str] = field(default_factory=dict)
    """Symbolic dims' names in the IR to the names the source gives them."""


def _autotuned_matmul(m: ModuleType) -> Any:
    return m.matmul.jit_impl.get_tir(1024, 1024, 1024, **first_config(m.matmul))


def _autotuned_row_scale(m: ModuleType) -> Any:
    return m.row_scale.jit_impl.get_tir(256, 128, **first_config(m.row_scale, 256, 128))


def _per_token_quant(m: ModuleType) -> Any:
    # the call in the file's __main__ block, evaluated in the module, inside the target's context
    return m.per_token_quant.get_tir(
        1 << 14, m.HIDDEN, block_M=m.pick_block_m(m.HIDDEN), out_dtype=m.determine_fp8_type()
    )


def _elementwise_add(m: ModuleType) -> Any:
    # the program's own call in main(): tensors of main's default sizes, unbound from one tensor
    import tilelang.language as T

    return m.elementwise_add.get_tir(
        M=1024,
        N=1024,
        block_M=32,
        block_N=32,
        threads=128,
        in_dtype=T.float32,
        out_dtype=T.float32,
    )


CASES = [
    Case(
        "eager_gemm.py",
        "matmul",
        lambda m: m.matmul.get_tir(M=1024, N=1024, K=1024, block_M=128, block_N=128, block_K=32),
    ),
    Case("eager_elementwise.py", "elementwise_add", _elementwise_add),
    Case(
        "eager_elementwise.py",
        "scale_tokens",
        lambda m: m.scale_tokens.get_tir(N=2048, block_M=16),
        renames={"tokens": "M"},
    ),
    Case(
        "dynamic_gemm.py",
        "matmul_dynamic_m",
        lambda m: m.matmul_dynamic_m.get_tir(1024, 512, block_M=128),
        renames={"m": "M"},
    ),
    Case("autotune_gemm.py", "matmul", _autotuned_matmul),
    Case("autotune_gemm.py", "row_scale", _autotuned_row_scale),
    Case("lazy_kernels.py", "copy_tile", lambda m: m.copy_tile),
    Case("lazy_kernels.py", "add_bias", lambda m: m.add_bias(512, 256)),
    Case("quantpkg/kernels/per_token.py", "per_token_quant", _per_token_quant),
    Case("ascend_scale.py", "scale_bias", lambda m: m.scale_bias(), targets=("ascend",)),
]
FILE_TARGETS = sorted({(case.file, target) for case in CASES for target in case.targets})


def import_corpus_module(styles: Path, file: str) -> ModuleType:
    """The corpus file imported afresh, as Python would: a package module by its dotted name.

    Afresh for each target, as in a new process: lowering changes a module-level PrimFunc in
    place, and a second lowering of the same object does not infer the same layouts.
    """
    if "/" in file:
        if str(styles) not in sys.path:
            sys.path.insert(0, str(styles))
        dotted = file.removesuffix(".py").replace("/", ".")
        sys.modules.pop(dotted, None)
        return importlib.import_module(dotted)
    name = f"_styles_{Path(file).stem}"
    spec = importlib.util.spec_from_file_location(name, styles / file)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def oracle_hints(styles: Path, file: str, target: str) -> list[tuple[int, str]]:
    """``(line, hint)`` for every buffer of the file's kernels, from the compiler."""
    module = import_corpus_module(styles, file)
    expected: list[tuple[int, str]] = []
    for case in CASES:
        if case.file != file or target not in case.targets:
            continue
        with tilelang_target(target):
            func = case.build(module)
        for buffer in compiler_buffers(func, target):
            if buffer.line is not None:  # not compiler-made (barriers): those have no place to show
                expected.append((buffer.line, expected_hint(buffer, target, case.renames)))
    return sorted(expected)


@pytest.fixture(scope="module")
def styles(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The corpus the oracle imports from: one for the module, as a package is imported from the
    first folder on ``sys.path`` that holds it."""
    return styles_corpus(tmp_path_factory.mktemp("oracle") / "styles")


@pytest.fixture(scope="module")
def corpus_for(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Path]:
    """A copy of the corpus per target, whose ``pyproject.toml`` makes that target the default."""
    copies: dict[str, Path] = {}

    def copy(target: str) -> Path:
        if target not in copies:
            folder = styles_corpus(tmp_path_factory.mktemp(target.replace(":", "_")) / "styles")
            (folder / "pyproject.toml").write_text(f'[tool.tilelang-lsp]\ntarget = "{target}"\n')
            copies[target] = folder
        return copies[target]

    return copy


@pytest.mark.parametrize(("file", "target"), FILE_TARGETS)
async def test_compiled_hints_equal_the_compilers_facts(
    client: LanguageClient, styles: Path, corpus_for: Callable[[str], Path], file: str, target: str
) -> None:
    path = corpus_for(target) / file
    uri = open_file(client, path)
    published = await wait_published(client, uri, 1)
    assert [d for d in published.diagnostics if d.severity == types.DiagnosticSeverity.Error] == []
    assert [d for d in published.diagnostics if d.code == "arguments"] == []
    got = await hints(client, uri)
    assert [h.label for h in got if "source only" in h.label] == []
    compiled = sorted((h.position.line + 1, h.label) for h in got)
    assert compiled == oracle_hints(styles, file, target)
