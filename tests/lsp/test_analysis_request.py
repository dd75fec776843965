"""One worker request, analyzed whole: the document's text is parsed once, however many steps
read it (is it TileLang, its kernels and directives, its entry point, the module it runs)."""

from __future__ import annotations

import builtins
from pathlib import Path
from typing import Any

import pytest

from irtrace.lowering.warmup import WARMUP_KERNEL


def test_one_request_parses_the_document_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tilelang_lsp.protocol import Analyze
    from tilelang_lsp.worker.analysis import analyze

    # unique text (the folder's name in a comment): no earlier parse of it can be cached. No
    # entry point: its run is a forked child (it parses nothing either: it inherits the tree), and
    # its first run in a process costs seconds (PyTorch's meta device)
    text = f"# {tmp_path.name}\nimport tilelang\n{WARMUP_KERNEL}"
    path = tmp_path / "parse_once.py"
    path.write_text(text)
    parses: list[str] = []
    real_compile = builtins.compile

    def counting_compile(source: Any, *args: Any, **kwargs: Any) -> Any:
        # ast.parse is compile(..., PyCF_ONLY_AST); running the module compiles too
        if isinstance(source, str) and source == text:
            parses.append(str(args[1] if len(args) > 1 else kwargs.get("mode")))
        return real_compile(source, *args, **kwargs)

    monkeypatch.setattr(builtins, "compile", counting_compile)
    result = analyze(Analyze(path=str(path), text=text, default_target="cuda:sm_90"))
    (kernel,) = result.kernels
    # the whole path ran: the instance resolved, the kernel built and lowered up to layout inference
    assert (kernel.status, kernel.args_origin, kernel.stop_pass) == ("ok", "defaults", "tl.LayoutInference")
    assert kernel.buffers
    assert len(parses) == 1, parses
    analyze(Analyze(path=str(path), text=text, default_target="cuda:sm_90"))
    assert len(parses) == 1, "a second request for the same version parsed it again"
