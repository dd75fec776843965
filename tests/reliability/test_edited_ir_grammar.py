"""``irtrace resume --ir FILE`` reads TVMScript by a grammar, never runs Python from it.

Each attack is one line put into a real printed IR (the GEMM's, as ``irtrace ir --before`` prints
it); if any of them ran, it would create the marker file. Oracle for the round trip: the untouched
IR, resumed, gives the kernel source that ``tilelang.lower`` made in the recording."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from irtrace.cli.main import main
from irtrace.lowering.edited_ir import EditedIrError, parse_edited_ir, script_names
from irtrace.trace.model import Trace
from irtrace.trace.reader import load_trace

HIP, CUDA = "hip:gfx942", "cuda:sm_90"
HIP_PASS = "tl.LayoutInference"
CUDA_PASS = "tl.ProducerConsumerWarpSpecialized"
"""Passes whose IR before reads back with the same names (sm_90's IR before tl.LayoutInference has
a dotted keyword that TileLang prints and no parser reads; later sm_90 IR comes back renamed)."""


def printed_ir(trace: Trace, target: str, pass_name: str, capsys: pytest.CaptureFixture[str]) -> str:
    """The IR ``pass_name`` received, as the documented ``irtrace ir TRACE --before`` prints it."""
    assert trace.path is not None
    capsys.readouterr()
    assert main(["ir", trace.path, "-t", target, "-p", pass_name, "--before"]) == 0
    return capsys.readouterr().out


def attacks(marker: Path) -> list[tuple[str, str]]:
    """(expression put in place of a constant, what the refusal says)."""
    touch = f"open({str(marker)!r}, 'w')"
    return [
        # the reported escape: a list subscript breaks an attribute chain that starts at T
        (f'[T.Add][0].is_.func_globals["__builtins__"].exec("{touch}")', "can be called"),
        (f'T.evaluate([T.Add][0].__init__.__globals__["__builtins__"]["exec"]("{touch}"))', "can be called"),
        ("T.evaluate([T.Add][0].is_)", "an attribute is read only of"),
        # a subscript of a literal, of a call result, of an unbound name
        ('T.evaluate("x"[0])', "can be indexed"),
        ("T.evaluate([T.Add][0])", "can be indexed"),
        ('T.evaluate(T.Cast("int32", 1)[0])', "can be indexed"),
        ('T.evaluate(metadata["x"][0])', "can be indexed"),
        # an attribute of a call result, of an attribute, of a module; a call of one
        ('T.evaluate(T.int32(1).astype("float32"))', "can be called"),
        ("T.evaluate(T.int32(1).astype)", "an attribute is read only of"),
        ("T.evaluate(T.float32(2.0).__class__)", "an attribute is read only of"),
        ("T.evaluate(A.data.same_as)", "an attribute is read only of"),
        ("T.evaluate(A.vload)", "is not a buffer field"),
        ("T.evaluate(T.tvm)", "is not a TVMScript name"),
        ("T.evaluate(T.__dict__)", "is not a TVMScript name"),
        ("T.evaluate(Module.__init__)", "not a function of the module"),
        # a dunder through getattr's string, builtins, names nobody bound
        ('T.evaluate(getattr(T, "__dict__"))', "can be called"),
        (touch, "can be called"),
        (f"T.evaluate(__import__('os').system('touch {marker}'))", "can be called"),
        ("T.evaluate(undefined_v)", "the name 'undefined_v' is not bound"),
        ("T.evaluate(open)", "the name 'open' is not bound"),
        ("T.evaluate(T)", "is used only as `T.NAME`"),
        ("T = 1", "the name 'T' cannot be bound"),
        ("__builtins__ = 1", "the name '__builtins__' cannot be bound"),
        # TVMScript's own entry points parse source text with Python's builtins
        (
            'T.prim_func("@T.prim_func\\ndef f():\\n'
            f"    T.evaluate(__import__('os').system('touch {marker}'))\")",
            "only a decorator",
        ),
        (f"I.ir_module({touch!r})", "only a decorator"),
        # comprehensions, lambdas, walrus, f-strings, starred and ** tricks, operators never printed
        (f"T.evaluate([{touch} for x in T.grid(1)])", "a list comprehension is not TVMScript"),
        (f"(lambda: {touch})()", "can be called"),
        (f"T.evaluate(lambda: {touch})", "a lambda is not TVMScript"),
        ("T.evaluate((x := T.int32(1)))", "`:=` is not TVMScript"),
        ('T.evaluate(f"{T.int32}")', "an f-string is not TVMScript"),
        ("T.max(*[T.int32(1), T.int32(2)])", "`*` in a call"),
        ("T.max(**{'a': 1})", "`**` in a call"),
        ("T.evaluate(T.int32(2) ** 10 ** 10)", "the operator Pow is not TVMScript"),
        ("T.evaluate(T.int32(1) << 10 ** 9)", "the operator LShift is not TVMScript"),
        ("T.evaluate(T.int32(" + "9" * 60 + "))", "wider than 128 bits"),
        ("T.evaluate(T.int32 is T.int32)", "the comparison Is is not TVMScript"),
        ("T.evaluate(b'x')", "only number, string, bool and None literals"),
        ("import os", "Import is not TVMScript"),
        ("def f(): pass", "FunctionDef is not TVMScript"),
        ("global T", "Global is not TVMScript"),
        ("del A", "Delete is not TVMScript"),
    ]


@pytest.fixture(scope="module")
def hip_ir(gemm_trace: Trace, tmp_path_factory: pytest.TempPathFactory) -> str:
    assert gemm_trace.path is not None
    run = gemm_trace.find_run(target=HIP)
    return gemm_trace.ir_before(run.find_pass(HIP_PASS))


def test_every_escape_is_refused_with_its_line_and_nothing_runs(hip_ir: str, tmp_path: Path) -> None:
    marker = tmp_path / "MARKER"
    lines = hip_ir.splitlines()
    # a statement line deep in the kernel body: the attack goes in as its own statement there
    line = next(i for i, text in enumerate(lines) if text.strip().startswith("T.copy("))
    indent = lines[line][: len(lines[line]) - len(lines[line].lstrip())]
    for expression, message in attacks(marker):
        edited = [*lines[:line], f"{indent}{expression}", *lines[line:]]
        with pytest.raises(EditedIrError) as refused:
            parse_edited_ir("\n".join(edited), "edited.py")
        text = str(refused.value)
        assert text.startswith(f"edited.py:{line + 1}: "), (expression, text)
        assert message in text, (expression, text)
        assert "\n" not in text
        assert not marker.exists(), expression


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (
            lambda t: t.replace("@T.prim_func", "@T.prim_func\n    @T.macro", 1),
            "decorated with `@T.prim_func` alone",
        ),
        (
            lambda t: t.replace("class Module:", "class Module(object):", 1),
            "decorated with `@I.ir_module` alone",
        ),
        (lambda t: t + "\nimport os\n", "only one `@I.ir_module` class"),
        (lambda t: t.replace("):\n", ", *rest):\n", 1), "plain parameters only"),
    ],
)
def test_module_structure_outside_the_grammar_is_refused(hip_ir: str, edit: object, message: str) -> None:
    with pytest.raises(
        EditedIrError, match=message.replace("(", r"\(").replace(")", r"\)").replace("*", r"\*")
    ):
        parse_edited_ir(edit(hip_ir), "edited.py")  # type: ignore[operator]


def test_resume_refuses_the_reported_escape_and_writes_nothing(
    gemm_trace: Trace, hip_ir: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert gemm_trace.path is not None
    marker = tmp_path / "MARKER"
    payload = f'[T.Add][0].is_.func_globals["__builtins__"].exec("open({str(marker)!r}, \'w\')")'
    edited = hip_ir.replace("T.fill(", payload + "\n            T.fill(", 1)
    assert edited != hip_ir
    ir = tmp_path / "edited.py"
    ir.write_text(edited)
    out = tmp_path / "out.jsonl"
    code = main(["resume", gemm_trace.path, "-t", HIP, "--from", HIP_PASS, "--ir", str(ir), "-o", str(out)])
    assert code == 3
    err = capsys.readouterr().err.strip()
    assert err.startswith("irtrace: error: edited.py:") and len(err.splitlines()) == 1, err
    assert not marker.exists() and not out.exists()


def test_the_table_is_the_installed_tilelangs_and_covers_what_it_prints(gemm_trace: Trace) -> None:
    """Every T./I. name in every IR the real pipelines printed for the GEMM is in the table; the
    table holds no module and no Python helper."""
    import tilelang  # noqa: F401
    import tvm.tirx.script.parser as script_t

    table = script_names()
    used: set[str] = set()
    for run in gemm_trace.runs:
        for record in run.passes:
            try:
                tree = ast.parse(gemm_trace.ir_before(record))
            except SyntaxError:
                continue
            used |= {
                f"{n.value.id}.{n.attr}"
                for n in ast.walk(tree)
                if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id in ("T", "I")
            }
    assert used and all(name.split(".")[1] in table[name[0]] for name in used), used
    assert {"fill", "gemm", "copy", "Buffer", "serial", "int32"} <= table["T"]
    for module_name in ("ir", "parser", "entry", "frame"):
        assert hasattr(script_t, module_name) and module_name not in table["T"]


@pytest.mark.parametrize(("target", "pass_name"), [(CUDA, CUDA_PASS), (HIP, HIP_PASS)])
def test_printed_ir_resumed_unedited_gives_the_recorded_source(
    gemm_trace: Trace, tmp_path: Path, capsys: pytest.CaptureFixture[str], target: str, pass_name: str
) -> None:
    """The documented round trip: ``irtrace ir TRACE --before > edited.py``, ``resume --ir edited.py``."""
    assert gemm_trace.path is not None
    ir = tmp_path / "edited.py"
    ir.write_text(printed_ir(gemm_trace, target, pass_name, capsys))
    out = tmp_path / "resumed.jsonl"
    code = main(
        ["resume", gemm_trace.path, "-t", target, "--from", pass_name, "--ir", str(ir), "-o", str(out)]
    )
    assert code == 0, capsys.readouterr().err
    resumed = load_trace(out)
    original = gemm_trace.find_run(target=target)
    assert resumed.kernel_source(resumed.find_run(target=target)) == gemm_trace.kernel_source(original)
