"""The VS Code extension when the picked interpreter has no tilelang-devtools: it asks before
installing (never silently), does nothing on "Not now", and on "Install" runs that interpreter's
pip and starts the server it installed.

The interpreter is a fresh venv with only the server's own dependencies (pygls, lsprotocol); pip
is pointed at a wheel built from this checkout (``PIP_FIND_LINKS``, no index, no dependencies), so
the install is the real ``python -m pip install tilelang-devtools`` and needs no network. The
workspace is untrusted, so the server gives source-only hints and needs no tilelang.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from tests.editors.conftest import isolated_env
from tests.editors.test_vscode import QUIET, SETTINGS, free_port, setup_report
from tests.packaging.test_wheel import copy_source

# Builds the wheel and a venv: runs with the wheel test (`make test-wheel`), not in the quick suite.
pytestmark = pytest.mark.packaging

DRIVER = Path(__file__).parent / "vscode" / "install_offer.cjs"
OUTSIDE = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
"""The environment without what would put this checkout's packages on the venv's path."""


def build_wheel(folder: Path) -> Path:
    (folder / "source").mkdir()
    source = copy_source(folder / "source")
    subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "-o", str(folder / "wheels"), str(source)],
        check=True,
        capture_output=True,
    )
    (wheel,) = (folder / "wheels").glob("tilelang_devtools-*.whl")
    return wheel


SERVER_DEPENDENCIES = ("pygls", "lsprotocol", "msgspec", "psutil")
"""What the server process imports besides tilelang-devtools (pyproject's dependencies)."""


def server_dependencies_only(venv: Path) -> Path:
    """A venv with what ``tilelang-lsp`` needs to start, and not tilelang-devtools itself."""
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    constraints = Path(__file__).resolve().parents[2] / "constraints.txt"
    subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "-c", str(constraints), *SERVER_DEPENDENCIES],
        cwd=venv,
        env=OUTSIDE,
        check=True,
        capture_output=True,
    )
    return python


def test_missing_server_is_offered_then_installed_by_pip_only_when_asked(
    tmp_path: Path, workspace: Path, home: Path
) -> None:
    tools = setup_report()
    wheel = build_wheel(tmp_path)
    python = server_dependencies_only(tmp_path / "venv")
    has_server = [str(python), "-c", "import tilelang_lsp"]
    assert subprocess.run(has_server, cwd=tmp_path, env=OUTSIDE, capture_output=True).returncode != 0

    env = {k: v for k, v in isolated_env(home).items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PATH"] = f"{Path(tools['node']).parent}{os.pathsep}{env['PATH']}"
    env["EXTENSIONS_GALLERY"] = "{}"
    # what `pip install tilelang-devtools` finds: this checkout's wheel, nothing from an index
    env.update({"PIP_FIND_LINKS": str(wheel.parent), "PIP_NO_INDEX": "1", "PIP_NO_DEPS": "1"})
    user_data, extensions = tmp_path / "user-data", tmp_path / "extensions"
    (user_data / "User").mkdir(parents=True)
    (user_data / "User" / "settings.json").write_text(json.dumps(SETTINGS))
    (user_data / "Machine").mkdir()
    (user_data / "Machine" / "settings.json").write_text(json.dumps({"tilelang.python": str(python)}))
    config = tmp_path / "code-server.yaml"
    config.write_text("auth: none\ncert: false\n")
    common = [f"--user-data-dir={user_data}", f"--extensions-dir={extensions}", f"--config={config}"]
    subprocess.run(
        [tools["code_server"], *common, "--install-extension", tools["vsix"]],
        env=env,
        cwd=tmp_path,
        check=True,
        capture_output=True,
        timeout=180,
    )
    port = free_port()
    log = (tmp_path / "code-server.log").open("w")
    server = subprocess.Popen(
        [
            tools["code_server"],
            *common,
            "--auth=none",
            f"--bind-addr=127.0.0.1:{port}",
            *QUIET,
            str(workspace),
        ],
        env=env,
        cwd=tmp_path,  # not the checkout: `import tilelang_lsp` must not find it there
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2):
                    break
            except OSError:
                assert server.poll() is None, (tmp_path / "code-server.log").read_text()
                assert time.monotonic() < deadline, "code-server did not answer /healthz"
                time.sleep(0.3)
        spec = {
            "url": f"http://127.0.0.1:{port}/?folder={workspace}",
            "tools": tools["tools"],
            "chromium": tools["chromium"],
            "kernel": "gemm.py",
            "hint_marker": "source only",
            "settle_ms": 8000,
            "screenshot": str(tmp_path / "vscode-install.png"),
            "output": str(tmp_path / "report.json"),
        }
        (tmp_path / "spec.json").write_text(json.dumps(spec))
        done = subprocess.run(
            [tools["node"], str(DRIVER), str(tmp_path / "spec.json")],
            env=env,
            capture_output=True,
            text=True,
            timeout=480,
        )
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()
        log.close()
    report: dict[str, Any] = json.loads((tmp_path / "report.json").read_text())
    assert report.get("ok"), f"{report.get('error')}\n{done.stderr}\n{report.get('lines_at_failure')}"

    for offer in (report["first_offer"], report["second_offer"]):
        assert "tilelang-devtools" in offer and str(python) in offer and "pip" in offer, offer
    # "Not now": no server, so no hints at all, and nothing installed
    assert not any("source only" in line for line in report["lines_after_not_now"])
    # "Install": pip put this checkout's wheel into that interpreter, and its server drew the hints
    assert subprocess.run(has_server, cwd=tmp_path, env=OUTSIDE, capture_output=True).returncode == 0
    shown = subprocess.run(
        [str(python), "-m", "pip", "show", "tilelang-devtools"],
        cwd=tmp_path,  # not the checkout, whose *.egg-info (left by a build) pip would list
        env=OUTSIDE,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert f"Version: {wheel.name.split('-')[1]}" in shown
    assert any("source only" in line for line in report["lines_after_install"])
    keep = os.environ.get("TILELANG_EDITOR_SCREENSHOTS")
    if keep:
        shutil.copy(spec["screenshot"], Path(keep) / "vscode-install.png")
