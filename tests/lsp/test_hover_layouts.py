"""The language server's hover and the trace say the same words of every buffer's layout: the
kernel analyzed by the worker's own analysis, and the same call recorded by ``irtrace record``."""

from __future__ import annotations

from pathlib import Path

import pytest

from irtrace.trace.reader import load_trace
from tests.conftest import EXAMPLES


@pytest.mark.parametrize(
    ("file", "kernel_name", "target"),
    [("flash_attention.py", "flash_attention_fwd", "cuda:sm_90"), ("gemm.py", "matmul", "hip:gfx942")],
)
def test_hover_and_trace_agree_word_for_word(
    tmp_path: Path, file: str, kernel_name: str, target: str
) -> None:
    from irtrace.cli.main import main
    from tilelang_lsp.protocol import Analyze
    from tilelang_lsp.render import hover_markdown
    from tilelang_lsp.worker.analysis import analyze

    path = EXAMPLES / file
    result = analyze(Analyze(path=str(path), text=path.read_text(), default_target=target))
    (kernel,) = [k for k in result.kernels if k.name == kernel_name]
    assert (kernel.status, kernel.target) == ("ok", target)
    output = tmp_path / "trace.jsonl"
    assert main(["record", f"{path}::{kernel.call}", "-t", target, "-o", str(output), "-q"]) == 0
    (run,) = load_trace(output).runs
    recorded = {layout.buffer: layout for layout in run.layouts[0].layouts}
    hovered = {fact.name: fact for fact in kernel.buffers if fact.layout_short or fact.layout_long}
    assert recorded and sorted(hovered) == sorted(recorded)
    for name, layout in recorded.items():
        fact = hovered[name]
        assert (fact.layout_short, fact.layout_long) == (layout.summary, layout.text), name
        markdown = hover_markdown(fact, kernel, [])
        assert f"| layout | {layout.summary} |" in markdown
        shown = markdown.split("```")[1].strip("\n")  # the hover puts one field of the text per line
        assert shown.replace(",\n  ", ", ") == layout.text, name
