"""``irtrace resume``: an edited IR, read as TVMScript data, lowered from a pass on by the real
pipeline. Oracles: an untouched IR must give the recorded source (``tilelang.lower`` made it);
an edited fragment shape must show in the source as the size arithmetic says it must."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from irtrace.cli.main import main
from irtrace.trace.model import Trace
from irtrace.trace.reader import load_trace
from tests.conftest import DATA, record_to_file

TARGET = "hip:gfx942"
"""A target whose IR before tl.LayoutInference TVMScript reads back (sm_90's WS annotations do not)."""
THREADS = 128


@pytest.fixture(scope="module")
def fragment_trace(tmp_path_factory: pytest.TempPathFactory) -> Trace:
    path = tmp_path_factory.mktemp("resume") / "fragment.jsonl"
    return record_to_file(path, [f"{DATA / 'fragment_scale.py'}::scale_rows()"], [TARGET])


def _resume(trace: Trace, ir: Path, out: Path, start: str = "tl.LayoutInference") -> int:
    assert trace.path is not None
    return main(["resume", trace.path, "-t", TARGET, "--from", start, "--ir", str(ir), "-o", str(out)])


def _fragment_elements(source: str) -> int:
    """Per-thread elements of the register fragment ``rows`` as the generated kernel declares them."""
    found = re.search(r"float rows\[(\d+)\];", source)
    assert found, source
    return int(found.group(1))


def test_edited_fragment_shape_reaches_the_kernel_source(fragment_trace: Trace, tmp_path: Path) -> None:
    run = fragment_trace.find_run(target=TARGET)
    text = fragment_trace.ir_before(run.find_pass("tl.LayoutInference"))
    assert 'rows = T.sblock_alloc_buffer((32, 64), scope="local.fragment")' in text
    # the fragment (and every use of it) from 32x64 to 32x32
    edited = text.replace("32, 64)", "32, 32)").replace("T.parallel(64)", "T.parallel(32)")
    assert edited != text
    ir = tmp_path / "edited.py"
    ir.write_text(edited)
    out = tmp_path / "resumed.jsonl"
    assert _resume(fragment_trace, ir, out) == 0
    resumed = load_trace(out)
    new_run = resumed.find_run(target=TARGET)
    # the edit is what tl.LayoutInference received, and every pass before it was skipped
    assert resumed.ir_before(new_run.passes[0]) == resumed.text(new_run.input_ir)
    assert new_run.passes[0].name == "tl.LayoutInference"
    assert "(32, 32)" in resumed.text(new_run.input_ir)
    old_source, new_source = fragment_trace.kernel_source(run), resumed.kernel_source(new_run)
    assert old_source is not None and new_source is not None
    assert _fragment_elements(old_source) == 32 * 64 // THREADS
    assert _fragment_elements(new_source) == 32 * 32 // THREADS


def test_unedited_ir_gives_the_recorded_source(fragment_trace: Trace, tmp_path: Path) -> None:
    run = fragment_trace.find_run(target=TARGET)
    ir = tmp_path / "same.py"
    ir.write_text(fragment_trace.ir_before(run.find_pass("tl.LayoutInference")))
    out = tmp_path / "same.jsonl"
    assert _resume(fragment_trace, ir, out) == 0
    resumed = load_trace(out)
    assert resumed.kernel_source(resumed.find_run(target=TARGET)) == fragment_trace.kernel_source(run)


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda t: 'import os\nos.system("touch pwned")\n' + t, "only one `@I.ir_module` class"),
        (
            lambda t: t.replace("T.float32(2.0)", 'open("pwned", "w")'),
            "only T.NAME, I.NAME, the module's functions and range can be called",
        ),
        (lambda t: t.replace("T.float32(2.0)", "T.float32.__class__"), "an attribute is read only of T, I"),
        (lambda t: t.replace("T.float32(2.0)", "(lambda: 2)()"), "edited.py:24: only T.NAME"),
        (lambda t: t.replace("T.float32(2.0)", "T.float32(2.0 +"), "edited.py:24: not valid Python syntax"),
        (
            lambda t: t.replace("T.float32(2.0)", "undefined_v"),
            "edited.py:24: the name 'undefined_v' is not bound in this function",
        ),
    ],
)
def test_hostile_or_broken_ir_is_refused_with_its_line(
    fragment_trace: Trace,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    edit: object,
    message: str,
) -> None:
    monkeypatch.chdir(tmp_path)
    run = fragment_trace.find_run(target=TARGET)
    ir = tmp_path / "edited.py"
    ir.write_text(edit(fragment_trace.ir_before(run.find_pass("tl.LayoutInference"))))  # type: ignore[operator]
    assert _resume(fragment_trace, ir, tmp_path / "out.jsonl") == 3
    assert message in capsys.readouterr().err
    assert not (tmp_path / "pwned").exists()
    assert not (tmp_path / "out.jsonl").exists()


def test_unknown_or_nested_pass(
    fragment_trace: Trace, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ir = tmp_path / "x.py"
    ir.write_text("")
    assert _resume(fragment_trace, ir, tmp_path / "o.jsonl", "tl.LayoutInferense") == 8
    assert "did you mean tl.LayoutInference?" in capsys.readouterr().err
    run = fragment_trace.find_run(target=TARGET)
    nested = next(p for p in run.passes if p.depth > 0 and p.phase != "codegen")
    assert _resume(fragment_trace, ir, tmp_path / "o.jsonl", nested.name) == 2
    assert "top-level pass" in capsys.readouterr().err
