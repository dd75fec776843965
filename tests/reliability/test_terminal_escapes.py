"""A trace whose text holds terminal escapes cannot drive the terminal of whoever reads it: every
command that shows trace text, run as a user runs it, writes the escapes as visible ``\\x1b``
text, and no ESC, BEL, C1 or bidi-override character reaches stdout or stderr."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from irtrace.base.errors import ExitCode
from irtrace.base.safe_text import terminal_safe
from irtrace.trace.model import Trace
from irtrace.trace.reader import load_trace

from .conftest import run_tool

HOSTILE = "\x1b]0;pwned\x07\x1b[31m\u202e\x9b2J"
"""Retitles the window (OSC 0 ... BEL), turns the text red (CSI 31m), reverses it (U+202E) and
clears the screen on terminals that take the one-byte C1 CSI (0x9B)."""
SHOWN = "\\x1b]0;pwned"
"""What a reader sees instead: the escape written out (rich drops the BEL in text it lays out)."""


def raw_control_characters(text: str) -> list[str]:
    """The characters in ``text`` that a terminal would act on (all but newline and tab)."""
    return sorted(
        {c for c in text if (ord(c) < 0x20 and c not in "\n\t") or 0x7F <= ord(c) <= 0x9F or c == "\u202e"}
    )


def hostile_trace(clean: Trace, path: Path) -> Path:
    """``clean`` with the escapes in its kernel name, target, spec, version, first pass name, error
    and kernel source (the source text stored again under its new SHA-256, so it verifies)."""
    assert clean.path
    lines: list[dict[str, Any]] = [json.loads(line) for line in Path(clean.path).read_text().splitlines()]
    run = clean.runs[0]
    assert run.source_sha256
    source = clean.texts[run.source_sha256] + f"// {HOSTILE}\n"
    new_sha = hashlib.sha256(source.encode()).hexdigest()
    first_pass = True
    for line in lines:
        if line["record"] == "run":
            line.update(
                kernel=f"copy{HOSTILE}",
                target=f"cuda:sm_90{HOSTILE}",
                spec=f"x.py::copy{HOSTILE}()",
                tilelang_version=f"0.1{HOSTILE}",
            )
        elif line["record"] == "pass" and first_pass:
            line["name"] = f"tl.Check{HOSTILE}"
            first_pass = False
        elif line["record"] == "end":
            line.update(status="failed", error=f"Check failed: {HOSTILE}")
        elif line["record"] == "ir" and line["sha256"] == run.source_sha256:
            line["text"] = source
    # the source under its new SHA-256 wherever the trace names it (the run, the last stage)
    path.write_text("".join(json.dumps(line) + "\n" for line in lines).replace(run.source_sha256, new_sha))
    trace = load_trace(path).verify()
    assert trace.runs[0].kernel == f"copy{HOSTILE}" and trace.kernel_source(trace.runs[0]) == source
    return path


def test_terminal_safe_escapes_every_control_character_and_keeps_the_rest() -> None:
    controls = "".join(chr(c) for c in [*range(0x20), *range(0x7F, 0xA0)]) + "\u202a\u202e\u2066\u2069"
    safe = terminal_safe(controls)
    assert raw_control_characters(safe) == [] and set(safe) - set("\\xu0123456789abcdefnrt") == {"\n", "\t"}
    assert "\n" not in terminal_safe("a\nb", newlines=False)
    ordinary = "C_local[i, j] = T.float16(0) µs → «ok» 表\n\tx"
    assert terminal_safe(ordinary) == ordinary


def test_every_command_shows_escapes_from_a_trace_as_text(tmp_path: Path, copy_trace: Trace) -> None:
    assert copy_trace.path
    clean = copy_trace.path
    hostile = str(hostile_trace(copy_trace, tmp_path / "hostile.jsonl"))
    commands: dict[str, tuple[str, ...]] = {
        "irtrace show": ("irtrace", "show", hostile),
        "irtrace show --by-pass": ("irtrace", "show", hostile, "--by-pass"),
        "irtrace matrix": ("irtrace", "matrix", hostile),
        "irtrace matrix --format markdown": ("irtrace", "matrix", hostile, "--format", "markdown"),
        "irtrace ir --source": ("irtrace", "ir", hostile, "--source"),
        "irtrace check": ("irtrace", "check", hostile, "--baseline", clean),
        "irtrace check --format markdown": (
            "irtrace",
            "check",
            hostile,
            "--baseline",
            clean,
            "--format",
            "markdown",
        ),
        "irtrace merge (its warnings)": (
            "irtrace",
            "merge",
            hostile,
            hostile,
            "-o",
            str(tmp_path / "m.jsonl"),
        ),
        "irtrace show -k (the error lists the kernels)": ("irtrace", "show", hostile, "-k", "missing"),
        "passdiff runs": ("passdiff", "runs", clean, hostile),
        "passdiff runs -f unified": ("passdiff", "runs", hostile, hostile, "-f", "unified"),
        "passdiff pass": ("passdiff", "pass", hostile, "-p", "tl.LowerTileOp"),
        "passdiff pass -p (an error naming the pass list)": ("passdiff", "pass", hostile, "-p", "tl.Nope"),
        "passviz dot": ("passviz", "dot", hostile, "-o", str(tmp_path / "d.dot")),
        "passviz dot -k (the error lists the kernels)": (
            "passviz",
            "dot",
            hostile,
            "-k",
            "missing",
            "-o",
            "x.dot",
        ),
    }
    for name, (tool, *args) in commands.items():
        done = run_tool(tool, *args)
        assert "Traceback" not in done.stderr, (name, done.stderr)
        assert done.returncode in (0, 1, 5, 8), (name, done.returncode, done.stderr)
        assert raw_control_characters(done.stdout) == [], (name, done.stdout)
        assert raw_control_characters(done.stderr) == [], (name, done.stderr)
        if name != "passdiff runs -f unified":  # a diff of a trace with itself shows no name
            assert "pwned" in done.stdout + done.stderr, (name, done.stdout, done.stderr)
        if name in ("irtrace show", "passdiff runs", "passviz dot"):
            assert SHOWN in done.stdout, (name, done.stdout)


def test_the_escaped_name_is_one_line_in_an_error(tmp_path: Path, copy_trace: Trace) -> None:
    """A newline in a kernel name cannot forge a second line of an error message."""
    assert copy_trace.path
    lines = Path(copy_trace.path).read_text().splitlines()
    forged = [
        json.dumps(dict(json.loads(line), kernel="k\nirtrace: ok: nothing wrong"))
        if '"record":"run"' in line
        else line
        for line in lines
    ]
    path = tmp_path / "forged.jsonl"
    path.write_text("\n".join(forged) + "\n")
    done = run_tool("irtrace", "show", str(path), "-k", "missing")
    assert done.returncode == ExitCode.NOT_FOUND
    assert done.stderr.count("\n") == 1 and "k\\nirtrace: ok: nothing wrong" in done.stderr


def test_files_written_with_output_keep_the_recorded_text(tmp_path: Path, copy_trace: Trace) -> None:
    """Escaping is for terminals: a report file keeps the trace's text, in its format's own quoting."""
    hostile = hostile_trace(copy_trace, tmp_path / "hostile.jsonl")
    report = tmp_path / "check.json"
    done = run_tool("irtrace", "check", str(hostile), "--baseline", str(hostile), "--json", str(report))
    assert done.returncode == 0 and raw_control_characters(done.stdout) == [], done.stderr
    assert [run["kernel"] for run in json.loads(report.read_text())["runs"]] == [f"copy{HOSTILE}"]


async def test_the_browser_shows_escapes_from_a_trace_as_text(tmp_path: Path, copy_trace: Trace) -> None:
    """The passviz browser, opened on the hostile trace, draws every name, error and IR line with
    the escapes written out: its whole screen (run tree, pass table, code pane) holds none."""
    from passviz.app import PassvizApp

    app = PassvizApp([hostile_trace(copy_trace, tmp_path / "hostile.jsonl")], show_times=False)
    async with app.run_test(size=(160, 50)) as pilot:
        await pilot.pause()
        screens = [app.export_screenshot()]
        for key in ("down", "enter", "r", "down", "e"):
            await pilot.press(key)
            await pilot.pause()
            screens.append(app.export_screenshot())
    shown = "\n".join(screens)
    assert "\\x1b]0;pwned" in shown
    assert raw_control_characters(shown.replace("\r", "")) == []
