"""The packaged VS Code extension in a real VS Code (code-server), driven in Chromium by playwright-core.

``make editors-setup`` installs the tools and packages the ``.vsix``; its report
(``out/editors/vscode-setup.json``) says where they are, or which step failed and why, and only
then is this test skipped. ``vscode/drive.cjs`` does what a user does and writes what was drawn.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.editors.conftest import HINT_LINES, ROOT, isolated_env, line_of

SETUP_REPORT = ROOT / "out" / "editors" / "vscode-setup.json"
DRIVER = Path(__file__).parent / "vscode" / "drive.cjs"
SHOTS = ("untrusted", "hints", "hover", "ir", "trace", "diagnostics")
SETTINGS = {
    "telemetry.telemetryLevel": "off",
    "update.mode": "none",
    "extensions.autoCheckUpdates": False,
    "extensions.autoUpdate": False,
    "workbench.startupEditor": "none",
    "workbench.tips.enabled": False,
    "workbench.welcomePage.walkthroughs.openOnInstall": False,
    "chat.disableAIFeatures": True,
    "workbench.secondarySideBar.defaultVisibility": "hidden",
    "editor.inlayHints.enabled": "on",
    "editor.inlayHints.maximumLength": 0,
    "editor.minimap.enabled": False,
    "editor.hover.delay": 100,
    "security.workspace.trust.enabled": True,
    "security.workspace.trust.startupPrompt": "never",
    "security.workspace.trust.banner": "never",
    "window.commandCenter": False,
    "git.enabled": False,
    "terminal.integrated.gpuAcceleration": "off",  # text in the DOM, where the test reads it
}
MACHINE_SETTINGS = {"tilelang.python": sys.executable}
"""``tilelang.python`` is machine-scoped: code-server (a remote window) reads it from the machine's
settings, not the browser user's."""


QUIET = ("--disable-telemetry", "--disable-update-check")


def setup_report() -> dict[str, Any]:
    """What ``make editors-setup`` reported; skip only when it says the set-up failed."""
    if not SETUP_REPORT.exists():
        pytest.fail(
            f"{SETUP_REPORT.relative_to(ROOT)} is missing: run `make editors-setup` (part of `make test`)"
        )
    report: dict[str, Any] = json.loads(SETUP_REPORT.read_text())
    if not report["ok"]:
        pytest.skip(
            f"VS Code test set-up failed at {report['step']!r}: {report['reason']} (see make editors-setup)"
        )
    return report


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def code_server(
    tmp_path: Path, workspace: Path, home: Path
) -> Iterator[tuple[dict[str, Any], str, dict[str, str]]]:
    """code-server with only our packaged extension, serving ``workspace``; stopped with its group."""
    tools = setup_report()
    env = isolated_env(home)
    env["PATH"] = f"{Path(tools['node']).parent}{os.pathsep}{env['PATH']}"
    env["EXTENSIONS_GALLERY"] = "{}"
    user_data, extensions = tmp_path / "user-data", tmp_path / "extensions"
    (user_data / "User").mkdir(parents=True)
    (user_data / "User" / "settings.json").write_text(json.dumps(SETTINGS))
    (user_data / "Machine").mkdir()
    (user_data / "Machine" / "settings.json").write_text(json.dumps(MACHINE_SETTINGS))
    config = tmp_path / "code-server.yaml"
    config.write_text("auth: none\ncert: false\n")
    common = [f"--user-data-dir={user_data}", f"--extensions-dir={extensions}", f"--config={config}"]
    install = subprocess.run(
        [tools["code_server"], *common, "--install-extension", tools["vsix"]],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert install.returncode == 0, install.stdout + install.stderr
    manifest = json.loads((ROOT / "editors" / "vscode" / "package.json").read_text())
    installed = f"{manifest['publisher']}.{manifest['name']}-{manifest['version']}"
    assert [p.name for p in extensions.iterdir() if p.is_dir()] == [installed]

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
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        start_new_session=True,  # its file watcher and extension host go with the group
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
        yield tools, f"http://127.0.0.1:{port}/?folder={workspace}", env
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()
        log.close()


def test_vscode_extension_draws_hints_hover_diagnostics_and_ir(
    code_server: tuple[dict[str, Any], str, dict[str, str]], workspace: Path, tmp_path: Path
) -> None:
    tools, url, env = code_server
    kernel, broken = workspace / "gemm.py", workspace / "broken.py"
    shots = {name: str(tmp_path / f"vscode-{name}.png") for name in SHOTS}
    shots["failure"] = str(tmp_path / "vscode-failure.png")
    spec = {
        "url": url,
        "tools": tools["tools"],
        "chromium": tools["chromium"],
        "files": {"kernel": kernel.name, "broken": broken.name},
        "compiled_marker": "elem/thr",
        "hover_token": "A_shared",
        "hover_marker": "swizzle",
        "pass": "tl.LayoutInference",
        "problem_marker": "C_local",
        "settle_ms": 8000,
        "trace_marker": "matmul @ cuda:sm_90a",  # passviz's header for the selected run
        "screenshots": shots,
        "output": str(tmp_path / "report.json"),
    }
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    done = subprocess.run(
        [tools["node"], str(DRIVER), str(tmp_path / "spec.json")],
        env=env,
        capture_output=True,
        text=True,
        timeout=540,
    )
    output = tmp_path / "report.json"
    assert output.exists(), (
        f"the driver wrote no report (exit {done.returncode}):\n{done.stdout}\n{done.stderr}"
    )
    report: dict[str, Any] = json.loads(output.read_text())
    keep = os.environ.get("TILELANG_EDITOR_SCREENSHOTS")
    if keep:  # how the README's screenshots are made: a real run of this test
        for name in SHOTS:
            if Path(shots[name]).exists():
                shutil.copy(shots[name], Path(keep) / f"vscode-{name}.png")
    assert report.get("ok"), f"{report.get('error')}\n{done.stderr}\nlines: {report.get('lines_at_failure')}"

    # Restricted Mode: the server was told the workspace is not trusted, so only source hints.
    untrusted = "\n".join(report["untrusted_lines"])
    assert "source only" in untrusted and "elem/thr" not in untrusted

    # Trusted: the compiled hints, as the editor draws them inline in the kernel's lines.
    lines = report["lines"]
    for buffer, parts in HINT_LINES.items():
        text = lines[line_of(kernel, f"{buffer} = T.alloc")]
        for part in parts:
            assert part in text, (buffer, text)
    assert "[1024, 1024] float16 global" in lines[line_of(kernel, "A: T.Tensor")]

    assert "A_shared" in report["hover"] and "swizzle" in report["hover"], report["hover"]

    assert "tl.LayoutInference" in report["ir_tab"]
    assert any("@T.prim_func" in line for line in report["ir_lines"])

    (trace,) = (workspace / ".tilelang-lsp").glob("gemm-matmul-cuda_sm_90a-*.trace.jsonl")
    assert trace.stat().st_size > 0
    assert trace.name in report["terminal"] and "matmul @ cuda:sm_90a" in report["terminal"], report[
        "terminal"
    ]

    assert any("squiggly-warning" in name for name in report["squiggles"]), report["squiggles"]
    assert "C_local" in report["problems"] and "T.clear" in report["problems"]
