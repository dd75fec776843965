"""What the server decides without tilelang: arguments, targets, options, source-only buffers."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from irtrace.core.specs import DtypeName, Expression
from irtrace.core.targets import TARGETS
from tilelang_lsp.options import InitializationOptions, InlayHintOptions, parse_options
from tilelang_lsp.source import (
    ArgumentChoice,
    ProjectConfig,
    SourceBuffer,
    imports_tilelang,
    looks_like_tilelang,
    read_project_config,
    resolve_arguments,
    resolve_target,
    scan_kernels,
    source_buffers,
    syntax_problem,
    uses_tilelang,
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
    # "cuda -arch=sm_90a" is the sm_90a target where irtrace knows one, else sm_90
    sm_90a = "cuda:sm_90a" if "cuda:sm_90a" in TARGETS else "cuda:sm_90"
    assert resolve_target(call, "tilelang", "cuda:sm_90", project) == (sm_90a, "compile call (line 37)")
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


STYLES_TEXT = """
import tilelang
import tilelang.language as T
from tilelang.autotuner import autotune

HIDDEN = 2048


@tilelang.jit
def eager(A, B, block_M, dtype=T.float16):
    M, N = T.const("M, N")
    rows = T.dynamic("tokens")
    A: T.Tensor((M, N), dtype)
    B: T.Tensor[[rows, N], dtype]


@autotune(configs=[{"block": 64}])
@tilelang.jit(out_idx=[-1])
def tuned(M, N, block):
    pass


@tilelang.jit
def by_expression(M, N, dtype=T.float16):
    pass


def main(M=1024, N=512):
    a = make_tensor()
    kernel = eager.compile(M=M, N=N, block_M=64)
    tuned(M, N)
    by_expression(unknown_size, N)
    by_expression(1 << 14, HIDDEN, dtype=pick(HIDDEN))


def pick(hidden):
    return T.float16


if __name__ == "__main__":
    size = 256
    eager(a, b, 32)
"""


def test_kernel_styles_read_from_the_source() -> None:
    kernels = {k.name: k for k in scan_kernels(STYLES_TEXT)}
    eager, tuned, by_expression = kernels["eager"], kernels["tuned"], kernels["by_expression"]
    assert (eager.eager, eager.tensor_params, eager.consts) == (True, ("A", "B"), ("M", "N"))
    assert eager.symbols == {"M": "M", "N": "N", "tokens": "rows"}
    assert eager.required == ("block_M",)  # tensors take no value
    # .compile(...) is a call site; caller's names bound to literals (parameter defaults) are read
    assert resolve_arguments(eager, ProjectConfig()) == ArgumentChoice(
        (), {"M": 1024, "N": 512, "block_M": 64}, "call site (line 30)"
    )
    assert (tuned.is_autotune, tuned.is_jit, tuned.eager) == (True, True, False)
    assert resolve_arguments(tuned, ProjectConfig()) == ArgumentChoice(
        (1024, 512), {}, "call site (line 31)", missing=("block",)
    )
    # a name nothing defines skips that call; expressions over module names are kept as text
    choice = resolve_arguments(by_expression, ProjectConfig())
    assert choice.origin == "call site (line 33)"
    assert choice.args == (Expression("1 << 14"), Expression("HIDDEN"))
    assert choice.kwargs == {"dtype": Expression("pick(HIDDEN)")}


def test_eager_sizes_without_a_value_are_symbolic() -> None:
    text = STYLES_TEXT.replace("    kernel = eager.compile(M=M, N=N, block_M=64)\n", "")
    eager = {k.name: k for k in scan_kernels(text)}["eager"]
    # the call with tensors: a and b take no value, 32 is block_M
    assert resolve_arguments(eager, ProjectConfig()) == ArgumentChoice(
        (), {"block_M": 32}, "call site (line 41)", symbolic=("M", "N")
    )
    assert resolve_arguments(eager, ProjectConfig(args={"N": 64})).symbolic == ("M",)


def test_only_text_that_imports_tilelang_is_a_kernel_file() -> None:
    assert uses_tilelang("import tilelang\n")
    assert uses_tilelang("from tilelang import language as T\n")
    assert uses_tilelang("import tilelang.ascend.language as T\n")
    assert uses_tilelang("def f():\n    import tilelang.language as T\n")
    assert not uses_tilelang("import os\nos.system('rm -rf build')\n")
    assert not uses_tilelang("import tilelang_helpers\n# import tilelang\ntext = 'import tilelang'\n")
    # read as Python, not as text: an import inside a string or a docstring is no import
    assert not uses_tilelang('"""Notes.\n\nimport tilelang\n"""\nx = 1\n')
    assert not uses_tilelang('x = """\nfrom tilelang import language as T\n"""\n')
    assert not uses_tilelang("from .tilelang import language\nfrom . import tilelang\n")  # relative
    assert uses_tilelang("if True:\n    class K:\n        from tilelang.language import alloc_shared\n")
    # text that does not parse never runs, whatever it imports
    assert imports_tilelang("import tilelang\ndef broken(:\n") is None
    assert not uses_tilelang("import tilelang\ndef broken(:\n")
    assert looks_like_tilelang("import tilelang\ndef broken(:\n")  # still shown as a kernel file
    assert syntax_problem("import tilelang\ndef broken(:\n") == (2, "syntax error: invalid syntax")
    assert syntax_problem("import tilelang\n") is None
    assert imports_tilelang("import tilelang\n" + "(" * 10_000 + ")" * 10_000) is None  # no crash


def test_source_hints_read_eager_declarations() -> None:
    buffers = source_buffers(
        "    A: T.Tensor[[M, K], T.bfloat16]\n"
        "    C = T.empty((M, N), dtype)\n"
        "    B: T.Tensor((K, N), dtype)\n"
    )
    assert buffers == [
        SourceBuffer("A", 1, 35, "[M, K]", "bfloat16", "global", "param"),
        SourceBuffer("C", 2, 30, "[M, N]", "dtype", "global", "param"),
        SourceBuffer("B", 3, 30, "[K, N]", "dtype", "global", "param"),
    ]


def test_a_kernel_recorded_in_irtrace_toml_takes_its_spec_arguments() -> None:
    """examples/fp8_quant.py has no call; examples/irtrace.toml records it with expressions."""
    from tilelang_lsp.analysis import manifest_call

    examples = Path(__file__).resolve().parents[2] / "examples"
    recorded = manifest_call(examples / "fp8_quant.py", "per_token_quant")
    assert recorded is not None
    assert (recorded.args, recorded.kwargs) == (
        (Expression("1 << 14"), Expression("HIDDEN")),
        {"out_dtype": Expression("determine_fp8_type()")},
    )
    assert recorded.origin == f"the spec in {examples / 'irtrace.toml'}"
    kernel = {k.name: k for k in scan_kernels((examples / "fp8_quant.py").read_text())}["per_token_quant"]
    choice = resolve_arguments(kernel, ProjectConfig(), recorded)
    assert (choice.args, choice.origin, choice.missing) == (recorded.args, recorded.origin, ())
    assert manifest_call(examples / "fp8_quant.py", "no_such_kernel") is None


def test_options_and_directives_take_irtrace_target_names_and_aliases() -> None:
    options, problems = parse_options(
        {"defaultTarget": "cuda:hopper", "extraTargets": ["hip:rdna4", "cpu", "cuda:sm_120", "gfx90a"]}
    )
    assert problems == []
    assert options.default_target == "cuda:sm_90"
    assert options.extra_targets == ["hip:gfx1201", "c", "cuda:sm_120", "hip:gfx90a"]
    assert all(name in TARGETS for name in options.extra_targets)


STYLES = Path(__file__).resolve().parent / "data" / "styles"


def styles_kernels(file: str) -> dict[str, ArgumentChoice]:
    """Each kernel of a corpus file with the arguments the source gives it."""
    return {k.name: resolve_arguments(k, ProjectConfig()) for k in scan_kernels((STYLES / file).read_text())}


def test_argparse_defaults_and_the_callers_values_reach_the_call() -> None:
    choices = styles_kernels("argparse_kernels.py")
    # --m/--n defaults through `M, N = args.m, args.n`, a string default converted by type=int,
    # --block-n as args.block_n, dest="num_stages", a store_true flag (False) choosing the dtype,
    # literals and `K // 8` in main
    assert choices["matmul"] == ArgumentChoice(
        (1024, 512, 256, 128, 64, 32, 3),
        {"threads": 128, "dtype": DtypeName("float16")},
        "call site (line 73)",
    )
    # run_softmax(args.batch, args.heads) in the __main__ block; seq_len from its default
    assert choices["row_softmax"] == ArgumentChoice((2, 4, 256, 8), {}, "call site (line 79)")


def test_eager_sizes_come_from_the_tensors_passed() -> None:
    choices = styles_kernels("eager_tensor_sizes.py")
    # a: torch.randn(M, K).half() gives M and K, b: torch.randn((K, N), ...) gives N
    assert choices["matmul_bias"] == ArgumentChoice(
        (), {"block_M": 64, "block_N": 64, "block_K": 32, "M": 512, "K": 128, "N": 256}, "call site (line 61)"
    )
    # only tensors: torch.rand(a.shape[0], 2 * N) and torch.ones(x.size(0)); `rows = M` in the kernel
    assert choices["scale_rows"] == ArgumentChoice((), {"M": 512, "N": 512}, "call site (line 66)")


def test_configs_in_dicts_dataclasses_and_autograd_functions() -> None:
    choices = styles_kernels("config_objects.py")
    assert choices["tile_add"] == ArgumentChoice(
        (256, 128), {"block_M": 32, "block_N": 64, "threads": 128}, "call site (line 85)"
    )
    # forward's x is what main passes to `scale = _Scale.apply`; TileConfig(block_N=32) keeps the
    # other fields' defaults
    assert choices["scale_forward"] == ArgumentChoice(
        (256, 128, 0.5, 64, 32), {"threads": 128}, "call site (line 67)"
    )
    # backward: x from ctx.save_for_backward(x), ctx.factor from forward's `ctx.factor = factor`
    assert choices["scale_backward"] == ArgumentChoice(
        (256, 128, 0.5), {"block_M": 16}, "call site (line 76)"
    )


UNKNOWN_VALUES = """
import argparse
import os

import tilelang


@tilelang.jit
def kernel(M, N):
    pass


def main(M=64, fast=False):
    N = 32
    if fast:
        N = 64
    kernel(M, N)
    config = {"M": 8, "N": 8}
    config["N"] = 16
    kernel(**config)
    size = int(os.environ.get("SIZE", "128"))
    kernel(size, M)
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int)
    parser.add_argument("--side", type=int, default=os.system("touch marker"))
    args = parser.parse_args()
    kernel(args.n, M)
    kernel(args.side, M)
    block = 16
    block = block * 2
    kernel(M * 2, block)
"""


def test_values_the_source_does_not_settle_skip_the_call(tmp_path: Path, monkeypatch: Any) -> None:
    """A name bound in a branch, a dict changed in place, a value from a call (never made), an
    option without a default: each skips its call, and the first call whose values are all known
    counts (a name assigned twice in order has the later value)."""
    monkeypatch.chdir(tmp_path)
    [kernel] = scan_kernels(UNKNOWN_VALUES)
    assert resolve_arguments(kernel, ProjectConfig()) == ArgumentChoice((128, 32), {}, "call site (line 31)")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("file", ["argparse_kernels.py", "eager_tensor_sizes.py", "config_objects.py"])
def test_kernels_built_with_the_arguments_the_source_gives(file: str) -> None:
    from tilelang_lsp.analysis import analyze

    path = STYLES / file
    result = analyze(str(path), path.read_text(), default_target="cuda:sm_90")
    assert result["diagnostics"] == []
    assert {k["name"]: k["status"] for k in result["kernels"]} == dict.fromkeys(styles_kernels(file), "ok")
    assert all(k["args_origin"].startswith("call site") for k in result["kernels"])
