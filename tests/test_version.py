"""One version for the project: irtrace.__version__, which packaging and every tool's --version read."""

from __future__ import annotations

import importlib.metadata

import pytest

import irtrace
import tilelang_lsp
from irtrace.cli.main import main as irtrace_main
from passdiff.cli import main as passdiff_main
from passviz.cli import main as passviz_main
from tilelang_lsp.cli import main as lsp_main


def test_every_tool_reports_the_one_version(capsys: pytest.CaptureFixture[str]) -> None:
    version = irtrace.__version__
    assert importlib.metadata.version("tilelang-devtools") == version
    assert tilelang_lsp.__version__ == version
    for tool, main in (("irtrace", irtrace_main), ("passdiff", passdiff_main)):
        with pytest.raises(SystemExit) as exit_:
            main(["--version"])
        assert exit_.value.code == 0 and capsys.readouterr().out == f"{tool} {version}\n"
    assert passviz_main(["--version"]) == 0
    assert capsys.readouterr().out == f"passviz {version}\n"
    lsp_main(["--version"])
    assert capsys.readouterr().out == f"tilelang-lsp {version}\n"
