"""The `irtrace` command end to end: real lowering, one-line errors and documented exit codes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from irtrace.base.errors import ExitCode
from irtrace.base.native_log import hide_harmless_native_warnings
from irtrace.cli.main import main
from irtrace.trace.model import STATUS_FAILED, STATUS_OK, Trace
from irtrace.trace.reader import load_trace

from ..conftest import DATA, ROOT, SMALL_GEMM


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_help_documents_exit_codes(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    for code in ExitCode:
        assert f"{code.value:>3}  " in out


ROCM_WARNING = "Warning: Unable to detect ROCm version, assuming >= 3.5"


def test_record_hides_harmless_native_warnings_then_show_and_ir_read_its_trace(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """One recording, in a subprocess as users run it (TVM's C++ logging prints the ROCm line on
    fd 2 for every hip target made; it is grouped into one note), then ``show`` and ``ir`` read
    the trace it wrote."""
    out_file = tmp_path / "t.jsonl"
    targets = ["-t", "cuda:sm_90", "-t", "hip:gfx942"]
    command = [sys.executable, "-m", "irtrace.cli", "record", SMALL_GEMM, *targets, "-o", str(out_file)]
    quiet = subprocess.run(command, capture_output=True, text=True, cwd=ROOT)
    assert quiet.returncode == ExitCode.OK, quiet.stderr
    assert ROCM_WARNING not in quiet.stderr
    notes = [line for line in quiet.stderr.splitlines() if "known-harmless" in line]
    assert len(notes) == 1 and notes[0].startswith("irtrace: note: hid ") and "--debug shows them" in notes[0]
    assert quiet.stdout.splitlines()[0].split()[:2] == ["kernel", "target"]  # the table comes first
    out = quiet.stdout
    assert "matmul" in out and "cuda:sm_90" in out and "hip:gfx942" in out
    trace = load_trace(out_file)

    code, out, _ = run_cli(capsys, "show", str(out_file), "-t", "hip:gfx942")
    assert code == ExitCode.OK
    assert "tl.LayoutInference" in out and "hip:gfx942" in out
    assert "\x1b[" not in out  # plain when not a terminal
    run = trace.find_run("matmul", "hip:gfx942")
    layout = run.find_pass("tl.LayoutInference")
    added, removed = gnu_diff_counts(trace.ir_before(layout) or "", trace.ir_after(layout) or "", tmp_path)
    assert f"+{added}" in out and f"-{removed}" in out

    code, out, _ = run_cli(
        capsys, "ir", str(out_file), "-k", "matmul", "-t", "cuda:sm_90", "-p", "tl.Simplify#2"
    )
    cuda = trace.find_run("matmul", "cuda:sm_90")
    assert code == ExitCode.OK and out.rstrip("\n") == trace.ir_after(cuda.find_pass("tl.Simplify#2")).rstrip(
        "\n"
    )

    code, out, _ = run_cli(capsys, "ir", str(out_file), "-t", "cuda:sm_90", "--source")
    assert out.rstrip("\n") == (trace.kernel_source(cuda) or "").rstrip("\n")
    assert "__global__" in out


def test_show_json_document(capsys: pytest.CaptureFixture[str], gemm_trace: Trace) -> None:
    assert gemm_trace.path
    code, out, _ = run_cli(capsys, "show", gemm_trace.path, "--json", "--by-pass")
    document = json.loads(out)
    assert code == ExitCode.OK and document["schema"] == 1
    assert [(r["kernel"], r["target"]) for r in document["runs"]] == [
        (r.kernel, r.target) for r in gemm_trace.runs
    ]
    for entry, run in zip(document["runs"], gemm_trace.runs, strict=True):
        assert entry["source_sha256"] == run.source_sha256
        assert len(entry["passes"]) == len(run.passes)
        assert {"name", "phase", "wall_s", "self_s", "changed", "lines_added", "lines_removed"} <= set(
            entry["passes"][0]
        )
    simplify = next(row for row in document["by_pass"] if row["name"] == "tl.Simplify")
    expected = sum(1 for run in gemm_trace.runs for p in run.passes if p.name == "tl.Simplify")
    assert simplify["count"] == expected > 2


def gnu_diff_counts(before: str, after: str, folder: Path) -> tuple[int, int]:
    """Lines added and removed as GNU diff counts them: the oracle for every ``+N -M``."""
    (folder / "before").write_text(before + "\n")
    (folder / "after").write_text(after + "\n")
    out = subprocess.run(
        ["diff", str(folder / "before"), str(folder / "after")], capture_output=True, text=True
    ).stdout.splitlines()
    return sum(line.startswith(">") for line in out), sum(line.startswith("<") for line in out)


def test_show_counts_a_moved_line_as_passdiff_does(
    capsys: pytest.CaptureFixture[str], gemm_trace: Trace, tmp_path: Path
) -> None:
    """A pass that only reorders lines changed them: ``irtrace show`` says so, with the counts
    of ``passdiff pass`` and of GNU diff, never (0, 0)."""
    from passdiff.cli import main as passdiff_main

    assert gemm_trace.path
    run = gemm_trace.find_run("matmul", "cuda:sm_90")
    record = run.find_pass("tl.PlanAndUpdateBufferAllocationLocation")
    before, after = gemm_trace.ir_before(record) or "", gemm_trace.ir_after(record) or ""
    assert Counter(before.splitlines()) == Counter(after.splitlines()) and before != after  # a reorder
    expected = gnu_diff_counts(before, after, tmp_path)
    assert expected != (0, 0)

    passdiff_main(["pass", gemm_trace.path, "-t", "cuda:sm_90", "-p", record.name, "-f", "json"])
    (pass_diff,) = json.loads(capsys.readouterr().out)["pass_diffs"]
    assert (pass_diff["added"], pass_diff["removed"]) == expected

    code, out, _ = run_cli(capsys, "show", gemm_trace.path, "-t", "cuda:sm_90", "--json")
    (entry,) = json.loads(out)["runs"]
    row = next(p for p in entry["passes"] if p["index"] == record.index)
    assert code == ExitCode.OK and (row["lines_added"], row["lines_removed"]) == expected

    code, out, _ = run_cli(capsys, "show", gemm_trace.path, "-t", "cuda:sm_90")
    (line,) = [line for line in out.splitlines() if record.name in line]
    assert line.split()[-2:] == [f"+{expected[0]}", f"-{expected[1]}"]


def test_show_by_pass_table(capsys: pytest.CaptureFixture[str], gemm_trace: Trace) -> None:
    assert gemm_trace.path
    code, out, _ = run_cli(capsys, "show", gemm_trace.path, "--by-pass", "-t", "cuda:sm_90")
    assert code == ExitCode.OK
    lines = [line for line in out.splitlines() if line.strip().startswith("tl.Simplify ")]
    assert lines and lines[0].split()[1] == str(
        sum(1 for p in gemm_trace.find_run("matmul", "cuda:sm_90").passes if p.name == "tl.Simplify")
    )


def test_failing_kernel_exit_code_and_trace_kept(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    out_file = tmp_path / "bad.jsonl"
    spec = f"{DATA / 'bad_layout.py'}::conflicting_layouts()"
    code, out, _ = run_cli(capsys, "record", spec, SMALL_GEMM, "-t", "cuda:sm_90", "-o", str(out_file))
    assert code == ExitCode.LOWERING
    assert "failed conflicting_layouts on cuda:sm_90 in pass tl.LayoutInference" in out
    trace = load_trace(out_file)
    assert [r.status for r in trace.runs] == [STATUS_FAILED, STATUS_OK]
    code, out, _ = run_cli(capsys, "show", str(out_file), "-k", "conflicting_layouts")
    assert "FAILED" in out and "Layout infer conflict" in out


@pytest.mark.parametrize(
    ("argv", "code", "fragment"),
    [
        (["record", "missing.py::k()"], ExitCode.INPUT, "kernel file 'missing.py' does not exist"),
        (["record", f"{DATA / 'syntax_error.py'}::broken()"], ExitCode.KERNEL_SOURCE, "syntax error"),
        (["record", SMALL_GEMM, "-t", "cuda:sm_99"], ExitCode.USAGE, "valid targets: cuda:sm_70"),
        (["record", f"{DATA / 'bad_layout.py'}::conflicting_layouts(n)"], ExitCode.USAGE, "not defined"),
        (["record", f"{DATA / 'jit_kernels.py'}::missing"], ExitCode.INPUT, "no kernel named 'missing'"),
        (["record"], ExitCode.USAGE, "give a kernel spec"),
        (["record", "--manifest", "none.toml"], ExitCode.INPUT, "manifest 'none.toml' does not exist"),
        (["record", SMALL_GEMM, "-c", "novalue"], ExitCode.USAGE, "KEY=VALUE"),
        (["show", "absent.jsonl"], ExitCode.INPUT, "does not exist"),
        (["ir", str(DATA / "bad_layout.py"), "-p", "x"], ExitCode.TRACE_FORMAT, "not a trace record"),
        (["run", "--", "python", "absent.py"], ExitCode.INPUT, "script 'absent.py' does not exist"),
        (["run", "--", "python", "-c", "1"], ExitCode.USAGE, "irtrace run supports"),
    ],
)
def test_errors_are_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, argv: list[str], code: int, fragment: str
) -> None:
    if argv[0] in ("record", "run"):
        argv = [*argv, "-o", str(tmp_path / "t.jsonl")]
    got, _, err = run_cli(capsys, *argv)
    assert got == code
    assert err.startswith("irtrace: error: ") and fragment in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_not_in_trace_lists_contents(capsys: pytest.CaptureFixture[str], gemm_trace: Trace) -> None:
    assert gemm_trace.path
    code, _, err = run_cli(capsys, "ir", gemm_trace.path, "-k", "matmul", "-t", "metal", "-p", "x")
    assert code == ExitCode.NOT_FOUND and "matmul on cuda:sm_90" in err and "matmul on hip:gfx942" in err
    code, _, err = run_cli(capsys, "ir", gemm_trace.path, "-t", "cuda:sm_90", "-p", "tl.LayoutInferense")
    assert code == ExitCode.NOT_FOUND and "did you mean tl.LayoutInference" in err
    code, _, err = run_cli(capsys, "ir", gemm_trace.path, "-t", "cuda:sm_90", "-p", "tl.Nope")
    assert code == ExitCode.NOT_FOUND and "irtrace show TRACE -k matmul -t cuda:sm_90 lists its" in err


def test_show_and_ir_take_target_aliases_like_record(
    capsys: pytest.CaptureFixture[str], gemm_trace: Trace
) -> None:
    assert gemm_trace.path
    code, out, _ = run_cli(capsys, "show", gemm_trace.path, "-t", "sm_90")  # ("cuda" is cuda:sm_90a)
    assert code == ExitCode.OK
    assert "matmul on cuda:sm_90" in out and "hip:gfx942" not in out
    code, out, _ = run_cli(capsys, "ir", gemm_trace.path, "-t", "rocm", "--source")
    hip = gemm_trace.find_run("matmul", "hip:gfx942")
    assert code == ExitCode.OK and out.rstrip("\n") == (gemm_trace.kernel_source(hip) or "").rstrip("\n")


def test_source_of_a_failed_run_is_not_in_trace(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    out_file = tmp_path / "failed.jsonl"
    spec = f"{DATA / 'bad_layout.py'}::conflicting_layouts()"
    assert run_cli(capsys, "record", spec, "-t", "cuda:sm_90", "-o", str(out_file))[0] == ExitCode.LOWERING
    code, out, err = run_cli(capsys, "ir", str(out_file), "--source")
    assert code == ExitCode.NOT_FOUND and out == ""
    assert err.strip() == (
        "irtrace: error: conflicting_layouts on cuda:sm_90 has no kernel source in the trace (status failed)"
    )


@pytest.mark.sweep  # 6 s, a second recording (the filter with debug on is checked in-process below)
def test_record_debug_shows_the_harmless_native_warnings(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "irtrace.cli", "--debug", "record", SMALL_GEMM, "-t", "hip:gfx942"]
    debug = subprocess.run(
        [*command, "-o", str(tmp_path / "hip.jsonl")], capture_output=True, text=True, cwd=ROOT
    )
    assert debug.returncode == ExitCode.OK, debug.stderr
    assert ROCM_WARNING in debug.stderr and "known-harmless" not in debug.stderr


def test_native_stderr_filter_passes_other_lines_on(capfd: pytest.CaptureFixture[str]) -> None:
    with hide_harmless_native_warnings(debug=False) as native:
        os.write(2, f"[12:00:00] : {ROCM_WARNING}\n".encode())
        os.write(2, b"[12:00:00] : Warning: something about the kernel\n")
        os.write(2, b"[12:00:01] : Warning: a line written ")  # in two pieces
        os.write(2, f"in two pieces\n[12:00:01] : {ROCM_WARNING}\n".encode())
        os.write(2, b"a last line with no newline")
    assert capfd.readouterr().err == (
        "[12:00:00] : Warning: something about the kernel\n"
        "[12:00:01] : Warning: a line written in two pieces\n"
        "a last line with no newline"
    )
    assert native.hidden == {"Unable to detect ROCm version, assuming >= 3.5": 2}
    os.write(2, f"{ROCM_WARNING}\n".encode())  # the descriptor is itself again afterwards
    assert capfd.readouterr().err == f"{ROCM_WARNING}\n"


def test_native_stderr_filter_with_debug_hides_nothing(capfd: pytest.CaptureFixture[str]) -> None:
    with hide_harmless_native_warnings(debug=True) as native:
        os.write(2, f"[12:00:00] : {ROCM_WARNING}\n".encode())
    assert capfd.readouterr().err == f"[12:00:00] : {ROCM_WARNING}\n"
    assert native.hidden == {}


def test_newer_schema_is_refused(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "future.jsonl"
    path.write_text('{"record":"header","format":"irtrace","schema":2}\n')
    code, _, err = run_cli(capsys, "show", str(path))
    assert code == ExitCode.TRACE_FORMAT and "upgrade tilelang-devtools" in err


def test_debug_shows_the_traceback(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(capsys, "--debug", "show", "absent.jsonl")
    assert code == ExitCode.INPUT and "Traceback" in err


def test_manifest_records_every_entry(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    manifest = tmp_path / "irtrace.toml"
    manifest.write_text(
        f"""
[defaults]
targets = ["cuda:sm_90"]

[[kernel]]
spec = "{(DATA / "sibling" / "fill_kernel.py").as_posix()}"

[[kernel]]
spec = "{(DATA / "jit_kernels.py").as_posix()}::lazy_add(M=64)"
name = "add64"
targets = ["hip:gfx942", "metal"]
"""
    )
    out_file = tmp_path / "m.jsonl"
    code, _, _ = run_cli(capsys, "record", "--manifest", str(manifest), "-o", str(out_file))
    assert code == ExitCode.OK
    trace = load_trace(out_file)
    assert [(r.kernel, r.target) for r in trace.runs] == [
        ("fill_ones", "cuda:sm_90"),
        ("fill_twos", "cuda:sm_90"),
        ("add64", "hip:gfx942"),
        ("add64", "metal"),
    ]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", ': missing [[kernel]] (one or more tables, each with spec = "path.py::name(args)")'),
        (
            '[[kernel]]\ntargets = ["cuda"]\n',
            ' [[kernel]] #1: missing spec (a kernel spec string, e.g. "path.py::name(args)")',
        ),
        (
            '[[kernel]]\nspec = "k.py::f()"\ntarget = "cuda"\n',
            " [[kernel]] #1: unknown key 'target'; known keys: spec, targets, name, pass_configs, "
            "bench_shape",
        ),
        (
            '[[kernel]]\nspec = "k.py::f()"\n[[kernel]]\nspec = "k.py::g()"\ntargets = ["cuda", 3]\n',
            " [[kernel]] #2 targets: expected a target name or a list of target names, not ['cuda', 3]",
        ),
        (
            '[[kernel]]\nspec = "k.py::f()"\ntargets = "cuda:sm_99"\n',
            " [[kernel]] #1 targets: unknown target 'cuda:sm_99'; valid targets: ",
        ),
        (
            '[[kernel]]\nspec = "k.py::"\n',
            " [[kernel]] #1 spec: kernel spec 'k.py::' has an empty name after '::'",
        ),
        ('[[kernel]]\nspec = "k.py::f()"\nname = 3\n', " [[kernel]] #1 name: expected a string, not 3"),
        (
            '[[kernel]]\nspec = "k.py::f()"\npass_configs = 3\n',
            " [[kernel]] #1 pass_configs: expected a table of pass configs, not 3",
        ),
        ('defaults = 1\n[[kernel]]\nspec = "k.py::f()"\n', " [defaults]: expected a table, not 1"),
    ],
)
def test_manifest_errors_name_the_file_entry_and_key(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, text: str, expected: str
) -> None:
    manifest = tmp_path / "irtrace.toml"
    manifest.write_text(text)
    code, _, err = run_cli(capsys, "record", "--manifest", str(manifest), "-o", str(tmp_path / "t.jsonl"))
    (line,) = err.strip().splitlines()
    assert code == ExitCode.USAGE and f"{manifest}{expected}" in line
    assert not (tmp_path / "t.jsonl").exists()


def test_merge_command(capsys: pytest.CaptureFixture[str], tmp_path: Path, gemm_trace: Trace) -> None:
    assert gemm_trace.path
    code, out, _ = run_cli(capsys, "merge", gemm_trace.path, gemm_trace.path, "-o", str(tmp_path / "m.jsonl"))
    assert code == ExitCode.OK and "merged 4 run(s)" in out
    assert len(load_trace(tmp_path / "m.jsonl").runs) == 4


def test_run_captures_a_script_then_reports_its_failure(tmp_path: Path) -> None:
    """In a subprocess, as users run it: two captures, extra targets, the script's error last."""
    out_file = tmp_path / "run.jsonl"
    script = DATA / "capture_script.py"
    command = [sys.executable, "-m", "irtrace.cli", "run", "-t", "hip:gfx942", "-o", str(out_file)]
    done = subprocess.run(
        [*command, "--", "python", str(script), "--fail"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=600,
    )
    assert done.returncode == ExitCode.SCRIPT, done.stderr
    assert "no CUDA device available" in done.stderr.splitlines()[-1]
    trace = load_trace(out_file)
    assert [(r.target, r.status) for r in trace.runs] == [
        ("cuda:sm_90", STATUS_OK),
        ("cuda:sm_90", STATUS_OK),
        ("hip:gfx942", STATUS_OK),
        ("hip:gfx942", STATUS_OK),
    ]
    # named by its factory (as `irtrace record capture_script.py::matmul` names it); its module
    # holds the factory's PrimFunc, `gemm`
    assert [r.kernel for r in trace.runs] == ["matmul"] * 4
    assert trace.runs[0].input_ir and "def gemm(" in trace.text(trace.runs[0].input_ir)
    # the two captured kernels differ (256^3 vs 128^3), and each was re-lowered for the extra target
    assert trace.runs[0].input_ir != trace.runs[1].input_ir
    first = trace.runs[0]
    assert trace.kernel_source(first) and first.passes[-1].phase == "codegen"


def test_show_warns_about_a_cut_short_trace(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, gemm_trace: Trace
) -> None:
    assert gemm_trace.path
    lines = Path(gemm_trace.path).read_text().splitlines(keepends=True)
    short = tmp_path / "short.jsonl"
    # cut in the middle, right after a pass started (the line after its start record is cut)
    cut = next(i for i in range(len(lines) // 2, len(lines)) if lines[i].startswith('{"record":"start"')) + 1
    short.write_text("".join(lines[:cut]) + lines[cut][:10])
    code, out, err = run_cli(capsys, "show", str(short))
    assert code == ExitCode.OK and "matmul" in out
    first, running = err.strip().splitlines()
    assert first == f"irtrace: warning: {short} was cut short; using what it holds"
    assert running.startswith("irtrace: warning: matmul on cuda:sm_90 stopped while pass ")


def test_ir_asks_for_the_option_that_tells_the_runs_apart(
    capsys: pytest.CaptureFixture[str], gemm_trace: Trace
) -> None:
    """One kernel on two targets: ``ir --source`` asks for ``--target`` (naming the targets),
    never for a ``--kernel`` that would not help. Oracle: the kernels and targets the trace holds."""
    assert len(gemm_trace.kernels()) == 1 and len(gemm_trace.targets()) == 2
    code, out, err = run_cli(capsys, "ir", gemm_trace.path, "--source")
    assert code == ExitCode.NOT_FOUND and not out
    assert "name --target" in err and "--kernel" not in err
    assert all(target in err for target in gemm_trace.targets())
    code, _, _ = run_cli(capsys, "ir", gemm_trace.path, "--source", "-t", gemm_trace.targets()[0])
    assert code == ExitCode.OK


@pytest.mark.sweep  # slow; a sibling covers it in make test
def test_quiet_record_lets_no_fatal_line_through(tmp_path: Path) -> None:
    """TVM prints ``file:line: Fatal: MESSAGE`` (TileLang's ``logging.cc``) before raising MESSAGE:
    the RMSNorm on the ``c`` target, which has no SIMT threads, does. With ``-q`` stderr stays
    empty, the exit status says a kernel failed, and the trace holds MESSAGE as the run's error."""
    out = tmp_path / "c.jsonl"
    spec = f"{ROOT / 'examples' / 'rmsnorm.py'}::rms_norm()"
    command = [sys.executable, "-m", "irtrace.cli", "record", spec, "-t", "c", "-o", str(out), "-q"]
    quiet = subprocess.run(command, capture_output=True, text=True)
    assert quiet.returncode == ExitCode.LOWERING and quiet.stderr == "" and quiet.stdout == ""
    (run,) = load_trace(out).runs
    assert run.status == STATUS_FAILED and "has no SIMT threads" in (run.error or "")
