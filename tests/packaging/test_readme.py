"""The README's "irtrace in one minute" block, run as a newcomer runs it: in order, as written.

A fresh copy of the checkout (what git tracks, plus new files not ignored) is set up by
``make setup`` (its own ``.venv``, the editable install a newcomer gets), then each line of the
block runs in one bash session from the copy's root. A line exits 0 unless its comment says
``exit N``. Slow (a venv, then every command): marked ``packaging``, run by ``make test-wheel``.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from ..conftest import ROOT

pytestmark = pytest.mark.packaging

EXPECTED_EXIT = re.compile(r"#.*\bexit (\d+)\b")


def one_minute_commands(readme: str) -> list[str]:
    """The commands of the README's one-minute block, continuation lines joined, comments kept."""
    section = readme.split("### irtrace in one minute", 1)[1]
    block = section.split("```bash\n", 1)[1].split("```", 1)[0]
    commands: list[str] = []
    pending = ""
    for line in block.splitlines():
        if pending:
            pending += " " + line.strip()
        elif line.startswith((" ", "#")) or not line.strip():
            continue  # a comment, or the rest of the comment of the line above
        else:
            pending = line
        if pending.endswith("\\"):
            pending = pending[:-1]
            continue
        commands.append(pending)
        pending = ""
    return commands


def fresh_copy(destination: Path) -> Path:
    """The checkout's files as a clone would have them, with this session's new files."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        check=True,
        capture_output=True,
    ).stdout.decode()
    for name in filter(None, listed.split("\0")):
        source = ROOT / name
        if source.is_file():
            (destination / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, destination / name)
    return destination


def test_readme_one_minute_block_runs_as_written(tmp_path: Path) -> None:
    readme = (ROOT / "README.md").read_text()
    commands = one_minute_commands(readme)
    assert commands[0] == ". .venv/bin/activate"
    assert len(commands) > 20, commands

    copy = fresh_copy(tmp_path / "clone")
    setup = subprocess.run(["make", "setup"], cwd=copy, capture_output=True, text=True, timeout=1800)
    assert setup.returncode == 0, setup.stdout[-3000:] + setup.stderr[-3000:]

    failures = []
    for command in commands[1:]:
        expected = int(found.group(1)) if (found := EXPECTED_EXIT.search(command)) else 0
        done = subprocess.run(
            ["bash", "-c", f". .venv/bin/activate && {command}"],
            cwd=copy,
            capture_output=True,
            text=True,
            timeout=900,
        )
        if done.returncode != expected:
            failures.append(
                f"{command}\n  exit {done.returncode}, expected {expected}\n  {done.stderr[-1500:]}"
            )
    assert not failures, "\n".join(failures)

    # What the lines promise is there: captures, the drawing, the experiments' outputs.
    captured = [json.loads(line) for line in (copy / "cap.jsonl").read_text().splitlines() if line.strip()]
    assert any(record.get("kernel") for record in captured), (
        "IRTRACE= captured no kernel in the make-setup venv"
    )
    for output in ("c_local.svg", "both.jsonl", "resumed.jsonl", "edited.jsonl", "small_repro.py"):
        assert (copy / output).is_file() and (copy / output).stat().st_size > 0, output
