"""What the server decides without tilelang: arguments, targets, options, source-only buffers."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from irtrace.specs import DtypeName
from tilelang_lsp.options import InitializationOptions, InlayHintOptions, parse_options
from tilelang_lsp.source import (
    ArgumentChoice,
    ProjectConfig,
    SourceBuffer,
    read_project_config,
    resolve_arguments,
    resolve_target,
    scan_kernels,
    source_buffers,
)

KERNEL = """
import tilelang
import tilelang.language as T


# tilelang: args(M=64) target=cuda:sm_80
def with_directive(M, N=8):
    @T.prim_func
    def k(A: T.Tensor((M, N), T.float16)):
        with T.Kernel(1) as bx:
            s = T.alloc_shared((M, N), T.float16)  # a comment
            T.copy(A, s)
    return k


def with_call(M, N, dtype=T.float32):
    @T.prim_func
    def k(A: T.Tensor((M, N), dtype)):
        with T.Kernel(1) as bx:
            T.clear(A)
    return k


def needs_project(M, K):
    @T.prim_func
    def k(A: T.Tensor((M, K), T.float16)):
        with T.Kernel(1) as bx:
            T.clear(A)
    return k


def helper(x):
    return x + 1


if __name__ == "__main__":
    tilelang.compile(with_call(128, N=256), target="cuda -arch=sm_90a")
"""


def test_argument_and_target_order(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(
        '[tool.tilelang-lsp]\ntarget = "hip"\n[tool.tilelang-lsp.args]\nM = 32\n'
        '[tool.tilelang-lsp.kernels.needs_project]\nK = 16\ndtype = "T.bfloat16"\n'
    )
    project = read_project_config(tmp_path / "kernels.py")
    assert project == ProjectConfig(
        path=str(tmp_path / "pyproject.toml"),
        target="hip",
        args={"M": 32},
        kernel_args={"needs_project": {"K": 16, "dtype": "T.bfloat16"}},
    )
    kernels = {k.name: k for k in scan_kernels(KERNEL)}
    assert sorted(kernels) == ["needs_project", "with_call", "with_directive"]
    directive, call, configured = kernels["with_directive"], kernels["with_call"], kernels["needs_project"]
    assert resolve_arguments(directive, project) == ArgumentChoice((), {"M": 64}, "directive (line 6)")
    assert resolve_target(directive, "tilelang", "cuda:sm_90", project) == (
        "cuda:sm_80",
        "directive (line 6)",
    )
    assert resolve_arguments(call, project) == ArgumentChoice((128,), {"N": 256}, "call site (line 37)")
    assert resolve_target(call, "tilelang", "cuda:sm_90", project) == ("cuda:sm_90", "compile call (line 37)")
    assert resolve_arguments(configured, project) == ArgumentChoice(
        (), {"M": 32, "K": 16}, "parameter defaults", ("M", "K")
    )
    assert resolve_target(configured, "tilelang", "cuda:sm_90", project)[0] == "hip:gfx942"
    assert resolve_target(configured, "ascend", "cuda:sm_90", project) == ("ascend", "Ascend dialect")
    assert resolve_arguments(configured, ProjectConfig()).missing == ("M", "K")
    assert DtypeName("bfloat16") not in resolve_arguments(configured, project).kwargs.values()


def test_source_buffers_read_half_typed_text() -> None:
    text = KERNEL + "\n    broken = T.alloc_fragment((4, 4), T.float32\n"
    assert source_buffers(text)[:2] == [
        SourceBuffer("A", 9, 40, "[M, N]", "float16", "global", "param"),
        SourceBuffer("s", 11, 49, "[M, N]", "float16", "shared.dyn", "alloc"),
    ]
    assert all(b.name != "broken" for b in source_buffers(text))


def test_bad_options_fall_back_to_defaults() -> None:
    options, problems = parse_options(
        {
            "trusted": "yes",
            "debounceMs": 40,
            "extraTargets": ["hip", "nope"],
            "inlayHints": {"layout": False},
            "x": 1,
        }
    )
    assert options == InitializationOptions(debounce_ms=40, inlay_hints=InlayHintOptions(layout=False))
    assert problems == [
        "option trusted: 'yes' is not valid; using False",
        "option extra_targets: ['hip', 'nope'] is not valid; using ['hip:gfx942']",
        "unknown option 'x'",
    ]
    assert parse_options(None) == (InitializationOptions(), [])


def test_server_process_never_imports_tilelang() -> None:
    code = (
        "import sys, tilelang_lsp.server as s; s.create_server(); "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('tilelang', 'tvm')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
