"""Never destroy or corrupt a trace: outputs are replaced only by complete files, one writer at a time."""

from __future__ import annotations

import os
import signal
import stat
import time
from pathlib import Path

import pytest

from irtrace.base.errors import ExitCode
from irtrace.cli.main import main as irtrace_main
from irtrace.trace.model import STATUS_INCOMPLETE, STATUS_OK, Trace
from irtrace.trace.reader import load_trace
from irtrace.trace.writer import TraceWriter
from passviz.cli import main as passviz_main

from .conftest import (
    COPY,
    LOWER_TILE_OP_INDEX,
    finished_and_running,
    holds,
    one_line,
    run_tool,
    start_tool,
    wait_for,
)


def test_record_of_a_missing_kernel_file_leaves_the_existing_trace(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, copy_trace: Trace
) -> None:
    assert copy_trace.path
    good = Path(copy_trace.path).read_bytes()
    output = tmp_path / "v.jsonl"
    output.write_bytes(good)
    code = irtrace_main(["record", str(tmp_path / "typo.py"), "-o", str(output)])
    err = capsys.readouterr().err
    assert code == ExitCode.INPUT and "typo.py" in one_line(err)
    assert output.read_bytes() == good
    assert not (tmp_path / "v.jsonl.partial").exists()


def test_record_that_records_nothing_leaves_the_existing_trace(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, copy_trace: Trace
) -> None:
    """A kernel file that fails to import: exit 4, and the old trace is still there."""
    assert copy_trace.path
    output = tmp_path / "v.jsonl"
    output.write_bytes(Path(copy_trace.path).read_bytes())
    bad = Path(__file__).parent.parent / "data" / "syntax_error.py"
    code = irtrace_main(["record", f"{bad}::broken()", "-o", str(output)])
    assert code == ExitCode.KERNEL_SOURCE, capsys.readouterr().err
    assert output.read_bytes() == Path(copy_trace.path).read_bytes()


def test_interrupted_merge_into_one_of_its_inputs_keeps_it(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, copy_trace: Trace, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C in the middle of `irtrace merge A B -o A` (raised where the second run is copied)."""
    assert copy_trace.path
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    a.write_bytes(Path(copy_trace.path).read_bytes())
    b.write_bytes(Path(copy_trace.path).read_bytes())
    before = a.read_bytes()
    copied = TraceWriter.add_run
    calls = []

    def interrupted_on_the_second_run(self: TraceWriter, *args: object, **kwargs: object) -> object:
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return copied(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(TraceWriter, "add_run", interrupted_on_the_second_run)
    code = irtrace_main(["merge", str(a), str(b), "-o", str(a)])
    err = capsys.readouterr().err
    assert code == ExitCode.INTERRUPTED and f"{a} was left as it was" in err
    assert a.read_bytes() == before
    assert not (tmp_path / "a.jsonl.partial").exists()


def test_merge_into_its_input_on_a_full_disk_keeps_it(tmp_path: Path, copy_trace: Trace) -> None:
    assert copy_trace.path
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    a.write_bytes(Path(copy_trace.path).read_bytes())
    b.write_bytes(Path(copy_trace.path).read_bytes())
    before = a.read_bytes()
    done = run_tool("irtrace", "merge", str(a), str(b), "-o", str(a), file_size_limit=len(before) + 1000)
    assert done.returncode == ExitCode.OUTPUT
    assert "File too large" in one_line(done.stderr)
    assert a.read_bytes() == before
    assert not (tmp_path / "a.jsonl.partial").exists()


def test_second_writer_fails_then_the_killed_first_leaves_a_partial_file_and_says_so(tmp_path: Path) -> None:
    """One hanging recording serves both claims (one start of irtrace, not two): a second writer
    of the same output fails without garbling it, and SIGTERM leaves the run begun so far in the
    partial file, says so, and keeps the older trace; the next recording replaces the partial."""
    output = tmp_path / "t.jsonl"
    output.write_text("an older trace\n")
    partial = tmp_path / "t.jsonl.partial"
    log = tmp_path / "record.log"
    first = start_tool("irtrace", "record", COPY, "-o", str(output), log=log, misbehave="hang:LowerTileOp")
    try:
        wait_for(lambda: holds(partial, '"name":"tl.LowerTileOp"'), "the first writer to reach its hang")
        second = run_tool("irtrace", "record", COPY, "-o", str(output))
        assert second.returncode == ExitCode.OUTPUT
        assert "another process is writing" in one_line(second.stderr)
        first.send_signal(signal.SIGTERM)
        assert first.wait(60) == ExitCode.TERMINATED
    finally:
        first.kill()
        first.wait()
    err = log.read_text()
    assert f"terminated; the 1 run(s) begun so far are in {partial} (cut short)" in err
    # the first writer never finished, so nothing replaced the output
    assert output.read_text() == "an older trace\n"
    trace = load_trace(partial)
    assert trace.truncated
    (run,) = trace.runs
    assert run.status == STATUS_INCOMPLETE and run.running == "tl.LowerTileOp"
    assert [p.index for p in run.passes] == list(range(LOWER_TILE_OP_INDEX + 1))  # the last one unfinished
    # The next recording notes that it replaces the stale partial file.
    done = run_tool("irtrace", "record", COPY, "-o", str(output))
    assert done.returncode == ExitCode.OK, done.stderr
    assert f"replacing {partial}" in done.stderr
    assert not partial.exists() and load_trace(output).runs[0].status == STATUS_OK


@pytest.mark.sweep  # 5 s; the same kill of a plain .jsonl recording is checked in make test
def test_killed_gz_recording_loads_up_to_its_last_complete_line(tmp_path: Path, copy_trace: Trace) -> None:
    output = tmp_path / "t.jsonl.gz"
    done = run_tool("irtrace", "record", COPY, "-o", str(output), misbehave="segv:LowerTileOp")
    assert done.returncode == -signal.SIGSEGV
    written = output.with_name(output.name + ".partial")
    trace = load_trace(written if written.exists() else output)
    (run,) = trace.runs
    assert trace.truncated and run.status == STATUS_INCOMPLETE
    clean = copy_trace.runs[0].passes
    finished, running = finished_and_running(run)
    assert [p.name for p in finished] == [p.name for p in clean[:LOWER_TILE_OP_INDEX]]
    assert trace.ir_after(finished[-1]) == copy_trace.ir_after(clean[LOWER_TILE_OP_INDEX - 1])
    assert running.name == "tl.LowerTileOp"


def test_output_errors_are_one_line_and_come_before_lowering(tmp_path: Path, copy_trace: Trace) -> None:
    folder = tmp_path / "folder"
    folder.mkdir()
    started = time.monotonic()
    done = run_tool("irtrace", "record", COPY, "-o", str(folder))
    assert done.returncode == ExitCode.OUTPUT and "is a folder" in one_line(done.stderr)
    assert "trace written" not in done.stdout and not list(folder.iterdir())
    assert time.monotonic() - started < 60
    # A missing folder is made; a file in the way of one is an error.
    done = run_tool("irtrace", "merge", str(copy_trace.path), "-o", str(tmp_path / "new" / "sub" / "m.jsonl"))
    assert done.returncode == ExitCode.OK and load_trace(tmp_path / "new" / "sub" / "m.jsonl").runs
    (tmp_path / "plain").write_text("")
    done = run_tool("irtrace", "merge", str(copy_trace.path), "-o", str(tmp_path / "plain" / "m.jsonl"))
    assert done.returncode == ExitCode.OUTPUT and "Not a directory" in one_line(done.stderr)


def test_full_disk_while_recording_is_one_line_and_keeps_the_old_trace(tmp_path: Path) -> None:
    output = tmp_path / "t.jsonl"
    output.write_text("an older trace\n")
    done = run_tool("irtrace", "record", COPY, "-o", str(output), file_size_limit=20_000)
    assert done.returncode == ExitCode.OUTPUT, done.stderr
    assert "File too large" in one_line(done.stderr)
    assert output.read_text() == "an older trace\n"
    assert not (tmp_path / "t.jsonl.partial").exists()


def test_html_report_writes_through_a_symlink(tmp_path: Path, copy_trace: Trace) -> None:
    assert copy_trace.path
    target = tmp_path / "reports" / "latest.html"
    target.parent.mkdir()
    target.write_text("old report")
    link = tmp_path / "report.html"
    link.symlink_to(target)
    assert passviz_main(["html", copy_trace.path, "-o", str(link)]) == ExitCode.OK
    assert link.is_symlink() and link.resolve() == target
    assert "passviz report" in target.read_text()
    assert sorted(p.name for p in target.parent.iterdir()) == ["latest.html"]


def test_html_report_refuses_a_pipe_or_device(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, copy_trace: Trace
) -> None:
    assert copy_trace.path
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    assert passviz_main(["html", copy_trace.path, "-o", str(fifo)]) == ExitCode.OUTPUT
    assert "not a regular file" in one_line(capsys.readouterr().err, "passviz")
    assert stat.S_ISFIFO(fifo.stat().st_mode)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pipe"]


def test_html_report_that_cannot_be_written_leaves_nothing_behind(tmp_path: Path, copy_trace: Trace) -> None:
    assert copy_trace.path
    output = tmp_path / "r.html"
    done = run_tool("passviz", "html", copy_trace.path, "-o", str(output), file_size_limit=10_000)
    assert done.returncode == ExitCode.OUTPUT
    assert "File too large" in one_line(done.stderr, "passviz")
    assert list(tmp_path.iterdir()) == []
