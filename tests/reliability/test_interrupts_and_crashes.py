"""Interrupts and crashes: Ctrl-C stops with 130 and keeps what was recorded, a crash loses no
finished pass and names the one that was running, hangs are cut by --timeout, and a kernel
file that exits is a kernel-source error."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from irtrace.base.errors import ExitCode
from irtrace.trace.model import STATUS_FAILED, STATUS_INCOMPLETE, STATUS_OK, STOPPED_BY_CRASH, Trace
from irtrace.trace.reader import load_trace, parse_trace_lines
from irtrace.trace.writer import TraceWriter
from tests.conftest import DATA, SMALL_GEMM

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


def test_lower_tile_op_index_matches_a_clean_lowering(copy_trace: Trace) -> None:
    assert copy_trace.runs[0].passes[LOWER_TILE_OP_INDEX].name == "tl.LowerTileOp"


def interrupt_in_native_pass(tmp_path: Path, *args: str) -> tuple[int, str, Path]:
    """Start `irtrace ARGS` with tl.LowerTileOp sleeping in native code; Ctrl-C once it is there."""
    output = tmp_path / "t.jsonl"
    partial = tmp_path / "t.jsonl.partial"
    log = tmp_path / "log"
    command, *rest = args
    process = start_tool("irtrace", command, "-o", str(output), *rest, log=log, misbehave="hang:LowerTileOp")
    try:
        wait_for(
            lambda: any(holds(path, '"name":"tl.LowerTileOp"') for path in tmp_path.iterdir()), "the hang"
        )
        process.send_signal(signal.SIGINT)
        code = process.wait(60)
    finally:
        process.kill()
        process.wait()
    return code, log.read_text(), partial


def test_ctrl_c_in_a_native_pass_stops_record_with_130_and_keeps_the_passes(tmp_path: Path) -> None:
    code, log, partial = interrupt_in_native_pass(tmp_path, "record", COPY, SMALL_GEMM)
    assert code == ExitCode.INTERRUPTED, log
    assert f"interrupted; the 1 run(s) begun so far are in {partial}" in log
    assert "failed" not in log and "gemm" not in log  # no failure recorded, the next kernel never ran
    trace = load_trace(partial)
    (run,) = trace.runs
    assert run.status == STATUS_INCOMPLETE and run.running == "tl.LowerTileOp"
    finished, running = finished_and_running(run)
    assert len(finished) == LOWER_TILE_OP_INDEX and not any(p.failed for p in finished)
    assert running.index == LOWER_TILE_OP_INDEX and trace.ir_before(running)


@pytest.mark.sweep  # 6 s; Ctrl-C in a native pass and an isolated crash are checked in make test
def test_ctrl_c_stops_isolated_record_too(tmp_path: Path) -> None:
    code, log, partial = interrupt_in_native_pass(tmp_path, "record", "--isolate", COPY, SMALL_GEMM)
    assert code == ExitCode.INTERRUPTED, log
    (run,) = load_trace(partial).runs
    assert run.status == STATUS_INCOMPLETE and run.running == "tl.LowerTileOp"
    assert len(finished_and_running(run)[0]) == LOWER_TILE_OP_INDEX


def test_ctrl_c_with_worker_processes_keeps_the_passes_each_worker_finished(tmp_path: Path) -> None:
    # the copy hangs in one worker while the other lowers the GEMM; the parent alone gets SIGINT
    code, log, partial = interrupt_in_native_pass(tmp_path, "record", "--jobs", "2", COPY, SMALL_GEMM)
    assert code == ExitCode.INTERRUPTED, log
    hanging = load_trace(partial).runs[0]
    assert hanging.kernel == "copy" and hanging.status == STATUS_INCOMPLETE
    assert hanging.running == "tl.LowerTileOp"
    assert len(finished_and_running(hanging)[0]) == LOWER_TILE_OP_INDEX
    assert not list(tmp_path.glob("t.jsonl.partial.task-*"))  # the workers' files are gone


def test_ctrl_c_stops_irtrace_run_without_relowering(tmp_path: Path) -> None:
    script = tmp_path / "script.py"
    script.write_text(
        "import sys\n"
        f"sys.path.insert(0, {str(DATA)!r})\n"
        "import tilelang\n"
        "from misbehaving import copy\n"
        "from tilelang.backend.target import determine_target\n"
        "target = determine_target({'kind': 'cuda', 'arch': 'sm_90'}, return_object=True)\n"
        "with target:\n"
        "    try:\n"
        "        tilelang.lower(copy(), target=target)\n"
        "    except RuntimeError as error:  # scripts catch errors; a Ctrl-C must still stop irtrace\n"
        "        print('caught', error)\n"
    )
    code, log, partial = interrupt_in_native_pass(
        tmp_path, "run", "-t", "hip:gfx942", "--", "python", str(script)
    )
    assert code == ExitCode.INTERRUPTED, log
    trace = load_trace(partial)
    assert [(r.target, r.status) for r in trace.runs] == [("cuda:sm_90", STATUS_INCOMPLETE)]
    assert trace.runs[0].running == "tl.LowerTileOp"


def test_segfault_in_a_pass_keeps_every_finished_pass_and_names_the_running_one(
    tmp_path: Path, copy_trace: Trace
) -> None:
    output = tmp_path / "t.jsonl"
    done = run_tool("irtrace", "record", COPY, "-o", str(output), misbehave="segv:LowerTileOp")
    assert done.returncode == -signal.SIGSEGV
    written = output.with_name(output.name + ".partial")
    trace = load_trace(written if written.exists() else output)
    (run,) = trace.runs
    clean = copy_trace.runs[0].passes[:LOWER_TILE_OP_INDEX]
    finished, running = finished_and_running(run)
    assert [(p.index, p.name, p.changed) for p in finished] == [(p.index, p.name, p.changed) for p in clean]
    assert [trace.ir_after(p) for p in finished] == [copy_trace.ir_after(p) for p in clean]
    # the pass that crashed is there too, with the IR it received
    assert trace.ir_before(running) == copy_trace.ir_before(copy_trace.runs[0].passes[LOWER_TILE_OP_INDEX])
    assert run.running == "tl.LowerTileOp"
    shown = run_tool("irtrace", "show", str(written))
    assert "copy on cuda:sm_90a stopped while pass tl.LowerTileOp was running" in shown.stderr


def test_isolated_segfault_fails_that_run_and_recording_goes_on(tmp_path: Path, copy_trace: Trace) -> None:
    output = tmp_path / "t.jsonl"
    done = run_tool(
        "irtrace", "record", "--isolate", COPY, SMALL_GEMM, "-o", str(output), misbehave="segv:LowerTileOp"
    )
    assert done.returncode == ExitCode.LOWERING, done.stderr
    assert "crashed copy on cuda:sm_90a: the lowering process died while pass tl.LowerTileOp was running" in (
        done.stdout
    )
    crashed, gemm = load_trace(output).runs
    assert crashed.status == STATUS_FAILED and crashed.stopped_by == STOPPED_BY_CRASH
    assert crashed.running == "tl.LowerTileOp" and "SIGSEGV" in (crashed.error or "")
    assert "again when run crash-safe" in (crashed.error or "")
    # workers print on a pool; the crashed task ran again crash-safe, so the trace holds every
    # pass that finished, with its IR, and the IR the crashing pass received
    trace = load_trace(output)
    clean = copy_trace.runs[0].passes[:LOWER_TILE_OP_INDEX]
    finished, running = finished_and_running(crashed)
    assert [(p.name, p.changed) for p in finished] == [(p.name, p.changed) for p in clean]
    assert [trace.ir_after(p) for p in finished] == [copy_trace.ir_after(p) for p in clean]
    assert trace.ir_before(running) == copy_trace.ir_before(copy_trace.runs[0].passes[LOWER_TILE_OP_INDEX])
    assert gemm.kernel == "matmul" and gemm.status == STATUS_OK and gemm.source_sha256


@pytest.mark.sweep  # 16-20 s on 2 cores: with the sweeps, to keep make test within 10 minutes
def test_timeout_marks_a_hanging_pass_and_a_hanging_factory_and_goes_on(tmp_path: Path) -> None:
    output = tmp_path / "t.jsonl"
    stuck = f"{DATA / 'misbehaving.py'}::stuck_factory()"
    done = run_tool(
        "irtrace",
        "record",
        "--timeout",
        "4",
        COPY,
        stuck,
        SMALL_GEMM,
        "-o",
        str(output),
        misbehave="hang:LowerTileOp",
    )
    assert done.returncode == ExitCode.LOWERING, done.stderr
    hanging_pass, _, gemm = load_trace(output).runs
    assert hanging_pass.timed_out and hanging_pass.running == "tl.LowerTileOp"
    assert "timed out after 4 s while pass tl.LowerTileOp was running" in (hanging_pass.error or "")
    assert gemm.status == STATUS_OK
    done = run_tool("irtrace", "record", "--timeout", "3", stuck, "-o", str(output), misbehave="hang-factory")
    (factory,) = load_trace(output).runs
    assert done.returncode == ExitCode.LOWERING
    assert (
        factory.timed_out
        and not factory.passes
        and "while the kernel was being built" in (factory.error or "")
    )


def test_kernel_files_that_exit_are_kernel_source_errors_and_others_are_recorded(tmp_path: Path) -> None:
    output = tmp_path / "t.jsonl"
    done = run_tool(
        "irtrace",
        "record",
        str(DATA / "exits_on_import.py"),
        str(DATA / "argparse_required.py"),
        f"{DATA / 'argparse_defaults.py'}::scale()",
        SMALL_GEMM,
        "-o",
        str(output),
    )
    assert done.returncode == ExitCode.KERNEL_SOURCE, done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("irtrace: error:")]
    assert len(errors) == 2 and "sys.exit(0)" in errors[0] and "sys.exit(2)" in errors[1]
    assert "Traceback" not in done.stderr
    # TileLang's examples parse their command line at module level: with defaults, that works.
    assert [(r.kernel, r.status) for r in load_trace(output).runs] == [
        ("scale", STATUS_OK),
        ("matmul", STATUS_OK),
    ]


def test_trace_cut_between_runs_or_before_the_first_is_cut_short(tmp_path: Path, copy_trace: Trace) -> None:
    path = tmp_path / "two.jsonl"
    with TraceWriter(path) as writer:
        for _ in range(2):
            writer.add_run(copy_trace.runs[0], copy_trace.texts)
    lines = path.read_text().splitlines(keepends=True)
    assert not load_trace(path).truncated
    ends = [i for i, line in enumerate(lines) if line.startswith('{"record":"end"')]
    between = parse_trace_lines("".join(lines[: ends[0] + 1]).split("\n"), "between")
    assert between.truncated and [r.status for r in between.runs] == [STATUS_OK]
    before_first = parse_trace_lines("".join(lines[:1]).split("\n"), "header only")
    assert before_first.truncated and before_first.runs == ()
    shown = run_tool("irtrace", "show", str(path))
    assert "cut short" not in shown.stderr
    (tmp_path / "cut.jsonl").write_text("".join(lines[: ends[0] + 1]))
    shown = run_tool("irtrace", "show", str(tmp_path / "cut.jsonl"))
    assert shown.returncode == ExitCode.OK and "was cut short" in shown.stderr


def test_one_line_helper_rejects_tracebacks() -> None:
    assert one_line("irtrace: error: x\n") == "irtrace: error: x"
