"""``irtrace run`` stops within 5 s of SIGTERM whatever the script does, here a C call that holds
the GIL for minutes (Python runs no signal handler until it returns), and the trace it leaves is
shown as cut short by ``irtrace show``."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from ..conftest import DATA, ROOT

STOP_WITHIN_S = 5.0


def test_sigterm_during_a_long_c_call_stops_the_run_in_time(tmp_path: Path) -> None:
    out = tmp_path / "t.jsonl"
    environment = {**os.environ, "PYTHONPATH": str(ROOT)}
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "irtrace.cli",
            "run",
            "-o",
            str(out),
            "--",
            "python",
            str(DATA / "long_c_call.py"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
        env=environment,
    )
    try:
        assert process.stdout is not None
        for line in process.stdout:
            if line.strip() == "LOWERED":
                break
        time.sleep(0.5)  # inside sum(range(...)) by now
        sent = time.monotonic()
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=60)
        took = time.monotonic() - sent
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    stderr = process.stderr.read() if process.stderr else ""
    assert took < STOP_WITHIN_S, took
    assert process.returncode == 143, stderr
    assert "terminated" in stderr and "cut short" in stderr
    partial = tmp_path / "t.jsonl.partial"
    assert partial.exists() and not out.exists()
    assert sorted(path.name for path in tmp_path.iterdir()) == ["t.jsonl.partial"]

    shown = subprocess.run(
        [sys.executable, "-m", "irtrace.cli", "show", str(partial)],
        capture_output=True,
        text=True,
        env=environment,
        timeout=120,
    )
    assert shown.returncode == 0, shown.stderr
    first = shown.stdout.splitlines()[0]
    assert first.startswith("cut short:"), shown.stdout[:300]
    assert "1 run(s)" in first
    assert "copy on cuda:sm_90a" in shown.stdout or "main on cuda:sm_90a" in shown.stdout


def test_a_finished_trace_is_not_called_cut_short(tmp_path: Path) -> None:
    """The line comes from the trace, not from every ``show``."""
    out = tmp_path / "t.jsonl"
    environment = {**os.environ, "PYTHONPATH": str(ROOT)}
    script = tmp_path / "quick.py"
    script.write_text((DATA / "long_c_call.py").read_text().replace("sum(range(10**13))", ""))
    done = subprocess.run(
        [sys.executable, "-m", "irtrace.cli", "run", "-o", str(out), "--", "python", str(script)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=environment,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    shown = subprocess.run(
        [sys.executable, "-m", "irtrace.cli", "show", str(out)],
        capture_output=True,
        text=True,
        env=environment,
        timeout=120,
    )
    assert "cut short" not in shown.stdout
