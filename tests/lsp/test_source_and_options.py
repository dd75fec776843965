"""What the server decides without tilelang: arguments, targets, options, source-only buffers."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from irtrace.lowering.resolve.arguments import (
    ArgumentChoice,
    ProjectConfig,
    read_project_config,
    resolve_arguments,
    resolve_target,
)
from irtrace.lowering.resolve.source import scan_kernels
from irtrace.targets.backends import TARGETS
from irtrace.targets.specs import DtypeName, Expression
from tilelang_lsp.source.buffers import SourceBuffer, source_buffers
from tilelang_lsp.source.text import imports_tilelang, looks_like_tilelang, syntax_problem, uses_tilelang

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
    assert resolve_arguments(call, project) == ArgumentChoice((128,), {"N": 256}, "call at line 37")
    # "cuda -arch=sm_90a" is the sm_90a target where irtrace knows one, else sm_90
    sm_90a = "cuda:sm_90a" if "cuda:sm_90a" in TARGETS else "cuda:sm_90"
    assert resolve_target(call, "tilelang", "cuda:sm_90", project) == (sm_90a, "compile call (line 37)")
    assert resolve_arguments(configured, project) == ArgumentChoice(
        (), {"M": 32, "K": 16}, "defaults", ("M", "K")
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


def test_server_process_never_imports_tilelang() -> None:
    """Nor irtrace.lowering, nor the worker side of tilelang_lsp (its nvcc work included)."""
    code = (
        "import sys, tilelang_lsp.app as s; s.create_server(); "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('tilelang', 'tvm') "
        "or m.startswith(('irtrace.lowering', 'tilelang_lsp.worker.')) or m == 'tilelang_lsp.worker'))"
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
    # only literals and names bound once to literals are read: a caller's parameters (M, N) and
    # expressions (1 << 14, pick(HIDDEN)) are unknown, so those calls are skipped; the eager call's
    # tensors give no sizes (the entry-point run does), so M and N stay symbolic
    assert resolve_arguments(eager, ProjectConfig()) == ArgumentChoice(
        (), {"block_M": 32}, "call at line 42", symbolic=("M", "N")
    )
    assert (tuned.is_autotune, tuned.is_jit, tuned.eager) == (True, True, False)
    assert resolve_arguments(tuned, ProjectConfig()) == ArgumentChoice(
        (), {}, "defaults", missing=("M", "N", "block")
    )
    assert resolve_arguments(by_expression, ProjectConfig()) == ArgumentChoice(
        (), {}, "defaults", missing=("M", "N")
    )


def test_eager_sizes_without_a_value_are_symbolic() -> None:
    text = STYLES_TEXT.replace("    kernel = eager.compile(M=M, N=N, block_M=64)\n", "")
    eager = {k.name: k for k in scan_kernels(text)}["eager"]
    # the call with tensors: a and b take no value, 32 is block_M
    assert resolve_arguments(eager, ProjectConfig()) == ArgumentChoice(
        (), {"block_M": 32}, "call at line 41", symbolic=("M", "N")
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
    from irtrace.lowering.resolve.resolver import manifest_call

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


STYLES = Path(__file__).resolve().parent / "data" / "styles"


def styles_kernels(file: str) -> dict[str, ArgumentChoice]:
    """Each kernel of a corpus file with the arguments the source gives it."""
    return {k.name: resolve_arguments(k, ProjectConfig()) for k in scan_kernels((STYLES / file).read_text())}


_DICT_TARGETS = """
import tilelang
import tilelang.language as T


@tilelang.jit(target={"kind": "cuda", "arch": "sm_90a"})
def as_tilelang_wants_it(N):
    pass


@tilelang.jit(target={"kind": "hip", "mcpu": "gfx950"})
def on_hip(N):
    pass


@tilelang.jit(target={"kind": "cuda", **EXTRA})
def not_a_literal(N):
    pass
"""


def test_a_target_dict_is_read_as_tilelang_takes_it() -> None:
    """TileLang 0.1.15 refuses ``"cuda -arch=sm_90a"`` and wants a dict for a target with
    attributes; the decorator's dict names the target (never evaluated: ``**EXTRA`` names none).
    Oracle: TileLang's ``determine_target`` on the same dict."""
    from tilelang.backend.target import determine_target

    kernels = {k.name: k for k in scan_kernels(_DICT_TARGETS)}
    assert kernels["as_tilelang_wants_it"].decorator_target == "cuda:sm_90a"
    assert kernels["on_hip"].decorator_target == "hip:gfx950"
    assert kernels["not_a_literal"].decorator_target is None
    made = determine_target({"kind": "cuda", "arch": "sm_90a"}, return_object=True)
    assert str(made.attrs["arch"]) == "sm_90a"


def test_every_target_the_lsp_docs_show_is_one_tilelang_takes() -> None:
    """docs/lsp.md showed ``"cuda -arch=sm_90a"``, which TileLang 0.1.15 refuses. Each target
    literal the page shows (a TVM target string or a dict with a ``kind``) must pass TileLang's own
    ``determine_target``."""
    import ast
    import re

    from tilelang.backend.target import determine_target

    from ..conftest import ROOT

    spans = re.findall(r"`([^`\n]+)`", (ROOT / "docs" / "lsp.md").read_text())
    literals = []
    for span in spans:
        try:
            value = ast.literal_eval(span)
        except (ValueError, SyntaxError):
            continue
        if (isinstance(value, dict) and "kind" in value) or (
            isinstance(value, str) and re.match(r"^(cuda|hip|rocm|metal)\b.* -", value)
        ):
            literals.append(value)
    assert {"kind": "cuda", "arch": "sm_90a"} in literals
    for value in literals:
        determine_target(value, return_object=True)  # raises on a target TileLang refuses
