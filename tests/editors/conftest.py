"""Shared pieces of the editor tests: a workspace with the bundled GEMM, a broken copy, isolation."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "gemm.py"
CLEAR_LINE = "T.clear(C_local)"
"""Deleting this line from the example makes a kernel the compiler flags (``buffer-init``)."""
HINT_LINES = {
    "A_shared": ("[128, 32]", "×3", "float16", "shared.dyn", "swizzle 64B"),
    "B_shared": ("[128, 32]", "×3", "float16", "shared.dyn", "swizzle 64B"),
    "C_local": ("[128, 128]", "float32", "local.fragment", "128 thr, 128 elem/thr"),
}
"""Per buffer of the example GEMM (default arguments, cuda:sm_90a): shape, stages, dtype, scope, layout."""


def server_command() -> list[str]:
    """The language server from this environment, as an editor would start it."""
    return [sys.executable, "-m", "tilelang_lsp.cli"]


def line_of(path: Path, text: str) -> int:
    """0-based line of the first line of ``path`` that contains ``text``."""
    for number, line in enumerate(path.read_text().splitlines()):
        if text in line:
            return number
    raise AssertionError(f"{text!r} not in {path}")


def isolated_env(home: Path) -> dict[str, str]:
    """The environment with every XDG folder (and TMPDIR) under ``home``, so runs share nothing."""
    env = dict(os.environ)
    for name in ("CONFIG", "DATA", "STATE", "CACHE", "RUNTIME"):
        folder = home / name.lower()
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        env[f"XDG_{name}_HOME" if name != "RUNTIME" else "XDG_RUNTIME_DIR"] = str(folder)
    (home / "tmp").mkdir(exist_ok=True)
    env["TMPDIR"] = str(home / "tmp")
    return env


@pytest.fixture
def home() -> Iterator[Path]:
    """A short-named folder for :func:`isolated_env`: Chromium and VS Code put Unix sockets in
    TMPDIR and XDG_RUNTIME_DIR, whose paths may not pass 107 bytes (pytest's tmp_path can)."""
    with tempfile.TemporaryDirectory(prefix="tl-ed-") as folder:
        yield Path(folder)


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """A project root holding the bundled GEMM example and a copy without its ``T.clear``."""
    root = tmp_path / "workspace"
    root.mkdir()
    (root / "pyproject.toml").write_text('[project]\nname = "kernels"\nversion = "0"\n')
    shutil.copy(EXAMPLE, root / "gemm.py")
    text = EXAMPLE.read_text()
    assert CLEAR_LINE in text
    (root / "broken.py").write_text("".join(line for line in text.splitlines(True) if CLEAR_LINE not in line))
    return root
