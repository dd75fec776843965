"""Writes never follow a link (issue 34). A cloned repository can carry a ``NAME.partial`` symlink,
and a shared folder a symlinked session under ``out.jsonl.parts/``: the file or folder behind the
link must stay as it was, and each output must come out a regular file."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from irtrace.cli.main import main
from irtrace.trace.model import Trace
from irtrace.trace.reader import load_trace
from passviz.cli import main as passviz_main

VICTIM_TEXT = "the user's own file\n"


def planted(output: Path, victim: Path) -> None:
    victim.write_text(VICTIM_TEXT)
    output.with_name(output.name + ".partial").symlink_to(victim)


@pytest.mark.parametrize("tool", ["merge", "bless", "passviz html"])
def test_a_planted_partial_symlink_is_never_written_through(
    gemm_trace: Trace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tool: str
) -> None:
    assert gemm_trace.path is not None
    monkeypatch.chdir(tmp_path)
    victim = tmp_path / "victim.txt"
    output = tmp_path / ("report.html" if tool == "passviz html" else "out.jsonl")
    planted(output, victim)
    if tool == "merge":
        code = main(["merge", gemm_trace.path, "-o", str(output)])
    elif tool == "bless":
        code = main(["bless", gemm_trace.path, "--baseline", str(output)])
    else:
        code = passviz_main(["html", gemm_trace.path, "-o", str(output)])
    assert code == 0
    assert victim.read_text() == VICTIM_TEXT
    assert output.is_file() and not output.is_symlink()
    assert not output.with_name(output.name + ".partial").exists()
    if tool != "passviz html":
        assert len(load_trace(output).runs) == len(gemm_trace.runs)


def test_a_hard_linked_partial_is_not_truncated(gemm_trace: Trace, tmp_path: Path) -> None:
    assert gemm_trace.path is not None
    victim, output = tmp_path / "victim.txt", tmp_path / "out.jsonl"
    victim.write_text(VICTIM_TEXT)
    (tmp_path / "out.jsonl.partial").hardlink_to(victim)
    assert main(["merge", gemm_trace.path, "-o", str(output)]) == 0
    assert victim.read_text() == VICTIM_TEXT and load_trace(output).runs


def test_collect_follows_no_symlinked_session_or_part(gemm_trace: Trace, tmp_path: Path) -> None:
    """A session folder that is a link to another folder of traces, and a part that is a link to
    a trace elsewhere: neither is merged nor deleted; a real part beside them is."""
    assert gemm_trace.path is not None
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    kept = elsewhere / "1-4242.jsonl"
    shutil.copy(gemm_trace.path, kept)
    output = tmp_path / "out.jsonl"
    parts = tmp_path / "out.jsonl.parts"
    parts.mkdir()
    (parts / "1-linked-session").symlink_to(elsewhere, target_is_directory=True)
    session = parts / "2-session"
    session.mkdir()
    (session / "2-4343.jsonl").symlink_to(kept)
    real = session / "3-4444.jsonl"
    shutil.copy(gemm_trace.path, real)
    before = kept.read_bytes()

    assert main(["collect", str(output)]) == 0
    assert kept.read_bytes() == before and sorted(p.name for p in elsewhere.iterdir()) == ["1-4242.jsonl"]
    assert (session / "2-4343.jsonl").is_symlink()  # left where it was, not read, not removed
    assert not real.exists()  # the one real part was merged, then removed
    assert len(load_trace(output).runs) == len(gemm_trace.runs)


def test_collect_with_a_symlinked_parts_folder_touches_nothing(gemm_trace: Trace, tmp_path: Path) -> None:
    assert gemm_trace.path is not None
    elsewhere = tmp_path / "elsewhere" / "1-session"
    elsewhere.mkdir(parents=True)
    shutil.copy(gemm_trace.path, elsewhere / "1-4242.jsonl")
    (tmp_path / "out.jsonl.parts").symlink_to(elsewhere.parent, target_is_directory=True)
    assert main(["collect", str(tmp_path / "out.jsonl")]) == 3
    assert (elsewhere / "1-4242.jsonl").is_file() and not (tmp_path / "out.jsonl").exists()


def test_a_planted_task_file_beside_the_partial_is_not_written_through(tmp_path: Path) -> None:
    """``--isolate`` workers write ``NAME.partial.task-N`` beside the output: a link planted at
    that name is replaced, never written through."""
    from tests.conftest import DATA

    victim, output = tmp_path / "victim.txt", tmp_path / "out.jsonl"
    victim.write_text(VICTIM_TEXT)
    (tmp_path / "out.jsonl.partial.task-0").symlink_to(victim)
    spec = f"{DATA / 'fragment_scale.py'}::scale_rows()"
    assert main(["record", spec, "-t", "hip:gfx942", "--isolate", "-o", str(output), "-q"]) == 0
    assert victim.read_text() == VICTIM_TEXT
    assert output.is_file() and load_trace(output).runs[0].status == "ok"
