"""Hostile or damaged traces: every field is type-checked on load (exit 6, one line), nothing
from a trace reaches HTML, DOT or the terminal unescaped, and no reader gives a traceback or
runs away with memory, on hand-made cases and on random ones."""

from __future__ import annotations

import asyncio
import json
import os
import random
import resource
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from irtrace.base.errors import ExitCode, TraceFormatError
from irtrace.cli.main import main as irtrace_main
from irtrace.trace.model import Trace
from irtrace.trace.reader import load_trace
from passdiff.cli import main as passdiff_main
from passviz.cli import main as passviz_main
from tests.conftest import record_to_file

from .conftest import COPY, one_line

HEADER = {"record": "header", "format": "irtrace", "schema": 1}


@pytest.fixture(scope="module")
def two_target_trace(tmp_path_factory: pytest.TempPathFactory) -> Trace:
    """COPY on cuda:sm_90 and hip:gfx942: small, real, with two runs to compare."""
    return record_to_file(
        tmp_path_factory.mktemp("hostile") / "two.jsonl", [COPY], ["cuda:sm_90", "hip:gfx942"]
    )


def records(trace: Trace) -> list[dict[str, Any]]:
    assert trace.path
    return [json.loads(line) for line in Path(trace.path).read_text().splitlines()]


def write(path: Path, lines: list[dict[str, Any] | str]) -> Path:
    path.write_text("".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines))
    return path


def edit_first(lines: list[dict[str, Any]], kind: str, **fields: Any) -> list[dict[str, Any]]:
    """The lines with ``fields`` set on the first record of ``kind``."""
    out = [dict(line) for line in lines]
    first = next(line for line in out if line["record"] == kind)
    first.update(fields)
    return out


def readers(path: Path, tmp: Path) -> dict[str, Callable[[], int]]:
    """Every command that reads a trace, as a user runs it."""
    p = str(path)
    return {
        "irtrace show": lambda: irtrace_main(["show", p]),
        "irtrace show --json --by-pass": lambda: irtrace_main(["show", p, "--json", "--by-pass"]),
        "irtrace ir": lambda: irtrace_main(["ir", p, "-t", "cuda:sm_90", "-p", "tl.LayoutInference"]),
        "irtrace ir --source": lambda: irtrace_main(["ir", p, "-t", "cuda:sm_90", "--source"]),
        "irtrace merge": lambda: irtrace_main(["merge", p, p, "-o", str(tmp / "merged.jsonl")]),
        "passdiff pass": lambda: passdiff_main(["pass", p, "-t", "cuda:sm_90", "-p", "tl.LowerTileOp"]),
        "passdiff targets": lambda: passdiff_main(["targets", p, "cuda:sm_90", "hip:gfx942", "-f", "json"]),
        "passdiff runs": lambda: passdiff_main(
            ["runs", p, p, "-t", "hip:gfx942", "-f", "html", "-o", str(tmp / "d.html")]
        ),
        "passviz html": lambda: passviz_main(["html", p, "-o", str(tmp / "r.html")]),
        "passviz dot": lambda: passviz_main(["dot", p, "-o", str(tmp / "d.dot")]),
        "passviz dot svg": lambda: passviz_main(["dot", p, "-o", str(tmp / "d.svg"), "--fold"]),
    }


EXPECTED_CODES = {0, 1, 5, 6, 8}
"""Same/different (passdiff), a failed pass asked for, a trace format error, not in the trace."""


async def browse(path: Path) -> None:
    """The pass browser, headless, on a trace that loads as `passviz TRACE` loads it: a few keys."""
    from passviz.app import PassvizApp

    try:
        trace = load_trace(path).verify()
    except TraceFormatError:
        return  # the command line says so in one line before any screen opens
    if not trace.runs:
        return
    app = PassvizApp([trace], show_times=False)
    async with app.run_test(size=(120, 40)) as pilot:
        for key in ("n", "d", "s", "r", "m", "t", "down", "e", "i"):
            await pilot.press(key)
        await pilot.pause()


def check_every_reader(path: Path, tmp: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, int]:
    codes = {}
    for name, call in readers(path, tmp).items():
        code = call()
        captured = capsys.readouterr()
        assert "Traceback" not in captured.err, (name, captured.err)
        assert code in EXPECTED_CODES, (name, code, captured.err)
        if code == ExitCode.TRACE_FORMAT:
            one_line(captured.err, name.split()[0])
        codes[name] = code
    asyncio.run(browse(path))
    return codes


# ----------------------------------------------------------------------------- by hand


@pytest.mark.parametrize(
    ("kind", "fields", "fragment"),
    [
        ("pass", {"index": "3"}, "'index' must be an integer"),
        ("pass", {"index": "<script>alert(1)</script>"}, "'index' must be an integer"),
        ("run", {"kernel": None}, "'kernel' must be a string"),
        ("pass", {"depth": 100_000_000, "parent": 0}, "'depth' must be an integer from 0 to 64"),
        ("pass", {"parent": 7}, "do not fit"),
        ("pass", {"ir_before": "not-a-sha"}, "SHA-256"),
        ("pass", {"changed": "yes"}, "'changed' must be true or false"),
        ("pass", {"status": "exploded"}, "'status' must be 'failed' or 'ok'"),
        ("end", {"status": 1}, "'status' must be"),
        ("run", {"args": {"args": "x"}}, "'args.args' must be a list"),
        ("run", {"host": {"python": 3}}, "an object of strings"),
        (
            "run",
            {"pass_configs": {"a": [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}},
            "nested",
        ),
        ("run", {"run": -1}, "'run' must be an integer"),
        ("run", {"run": True}, "'run' must be an integer"),
    ],
)
def test_mistyped_fields_are_format_errors_in_every_reader(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    two_target_trace: Trace,
    kind: str,
    fields: dict[str, Any],
    fragment: str,
) -> None:
    path = write(tmp_path / "bad.jsonl", edit_first(records(two_target_trace), kind, **fields))
    with pytest.raises(TraceFormatError, match=fragment):
        load_trace(path)
    codes = check_every_reader(path, tmp_path, capsys)
    assert set(codes.values()) == {ExitCode.TRACE_FORMAT}, codes
    assert not (tmp_path / "r.html").exists() and not (tmp_path / "merged.jsonl").exists()


def test_parent_cycles_and_duplicate_indexes_are_format_errors(
    tmp_path: Path, two_target_trace: Trace
) -> None:
    lines = records(two_target_trace)
    passes = [line for line in lines if line["record"] == "pass"]
    nested = next(p for p in passes if p["parent"] is not None)
    # a pass that is its own parent, or whose parent started after it
    for parent in (nested["index"], nested["index"] + 1):
        cyclic = [dict(line, parent=parent) if line is nested else line for line in lines]
        with pytest.raises(TraceFormatError, match="do not fit"):
            load_trace(write(tmp_path / "cycle.jsonl", cyclic))
    duplicated = [*lines[:-1], dict(passes[3], record="pass"), lines[-1]]
    with pytest.raises(TraceFormatError):
        load_trace(write(tmp_path / "dup.jsonl", duplicated))


@pytest.mark.parametrize(
    "raw",
    [
        '{"record":"pass","run":0,"index":NaN}',
        '{"record":"pass","run":0,"start_s":Infinity}',
        '{"record":"end","run":0,"status":"ok","total_s":1e400}',
        '{"record":"run","run":' + "9" * 5000 + "}",
        "[" * 100_000 + "]" * 100_000,
        '{"record":"run","run":0,"args":' + "[" * 100_000 + "]" * 100_000 + "}",
        '{"record":"run","run":0,"kernel":"k\\ud800"}',
        '{"record":"ir","sha256":"' + "a" * 64 + '","text":"\\udfff"}',
    ],
    ids=[
        "nan",
        "infinity",
        "1e400",
        "5000-digit int",
        "100000-deep line",
        "100000-deep field",
        "lone surrogate",
        "lone surrogate in IR",
    ],
)
def test_non_numbers_huge_numbers_and_deep_nesting_are_format_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], two_target_trace: Trace, raw: str
) -> None:
    lines: list[dict[str, Any] | str] = list(records(two_target_trace))
    lines.insert(3, raw)
    path = write(tmp_path / "bad.jsonl", lines)
    with pytest.raises(TraceFormatError):
        load_trace(path).verify()  # IR texts are checked when read, or all at once like this
    codes = check_every_reader(path, tmp_path, capsys)
    assert set(codes.values()) == {ExitCode.TRACE_FORMAT}, codes


def test_ir_text_that_does_not_match_its_sha256_is_reported(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], two_target_trace: Trace
) -> None:
    lines = records(two_target_trace)
    run = two_target_trace.runs[0]
    layout = run.find_pass("tl.LayoutInference")
    edited = [
        dict(line, text=line["text"].replace("T.", "X.", 1))
        if line.get("sha256") == layout.ir_after
        else line
        for line in lines
    ]
    path = write(tmp_path / "edited.jsonl", edited)
    assert (
        irtrace_main(["ir", str(path), "-t", "cuda:sm_90", "-p", "tl.LayoutInference"])
        == ExitCode.TRACE_FORMAT
    )
    assert "does not match its SHA-256" in one_line(capsys.readouterr().err)


@pytest.mark.parametrize(
    ("first_lines", "fragment"),
    [
        ([], "not an irtrace trace"),  # IR records with no header before them
        ([dict(HEADER, schema=0)], "invalid trace schema 0"),
        ([dict(HEADER, schema=-1)], "invalid trace schema -1"),
        ([dict(HEADER, schema="1")], "invalid trace schema '1'"),
        ([dict(HEADER, schema=True)], "invalid trace schema True"),
        ([dict(HEADER, schema=1.5)], "invalid trace schema 1.5"),
        ([dict(HEADER, schema=None)], "invalid trace schema None"),
        ([dict(HEADER, schema=2)], "schema 2, newer than"),
    ],
)
def test_headers(
    tmp_path: Path, two_target_trace: Trace, first_lines: list[dict[str, Any]], fragment: str
) -> None:
    body = records(two_target_trace)[1:]
    with pytest.raises(TraceFormatError, match=fragment):
        load_trace(write(tmp_path / "t.jsonl", [*first_lines, *body]))


def test_a_second_header_and_records_after_the_footer_are_format_errors(
    tmp_path: Path, two_target_trace: Trace
) -> None:
    lines = records(two_target_trace)
    with pytest.raises(TraceFormatError, match="second header"):
        load_trace(write(tmp_path / "cat.jsonl", [*lines, *lines]))
    with pytest.raises(TraceFormatError, match="after the trace's footer"):
        load_trace(write(tmp_path / "after.jsonl", [*lines, lines[1]]))


def test_trace_text_is_printed_literally_by_irtrace_show(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], two_target_trace: Trace
) -> None:
    error = "Check failed: C_local[i, j] is [bold]wrong[/bold] [/x] \\[z]"
    lines = edit_first(records(two_target_trace), "end", status="failed", error=error)
    lines = edit_first(lines, "run", kernel="k[/x]", tilelang_version="[red]0.1[/]")
    path = write(tmp_path / "t.jsonl", lines)
    assert irtrace_main(["show", str(path)]) == ExitCode.OK
    out = capsys.readouterr().out
    assert f"error: {error}" in out and "k[/x] on cuda:sm_90" in out and "tilelang [red]0.1[/]" in out
    # and in every other reader, the browser included
    lines = edit_first(lines, "pass", name="tl.[/x]Pass[bold]")
    codes = check_every_reader(write(tmp_path / "t.jsonl", lines), tmp_path, capsys)
    assert codes["passviz html"] == ExitCode.OK and codes["passdiff targets"] == 1, codes  # targets differ


def test_html_and_dot_escape_everything_from_the_trace(tmp_path: Path, two_target_trace: Trace) -> None:
    hostile = "<script>alert(1)</script>"
    lines = edit_first(records(two_target_trace), "run", kernel=hostile, target="<b>t</b>\\", spec=hostile)
    lines = edit_first(lines, "end", status="failed", error=f'{hostile} " \\')
    path = write(tmp_path / "t.jsonl", lines)
    assert passviz_main(["html", str(path), "-o", str(tmp_path / "r.html")]) == ExitCode.OK
    page = (tmp_path / "r.html").read_text()
    # The page's only scripts are its own two (stored texts, diff drawing); the trace's is text.
    assert page.count("<script") == 2 and "<script>alert" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert passviz_main(["dot", str(path), "-o", str(tmp_path / "d.svg")]) == ExitCode.OK
    # one drawing per kernel (named after it) or one for all: every one escaped
    svg = "".join(path.read_text() for path in tmp_path.glob("d*.svg"))
    assert "<script" not in svg and "&lt;b&gt;t&lt;/b&gt;\\" in svg


def test_huge_depth_is_refused_before_any_output(tmp_path: Path, two_target_trace: Trace) -> None:
    lines = records(two_target_trace)
    passes = [line for line in lines if line["record"] == "pass" and line["parent"] is not None]
    deep = [dict(line, depth=100_000_000) if line is passes[0] else line for line in lines]
    path = write(tmp_path / "deep.jsonl", deep)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    assert passviz_main(["html", str(path), "-o", str(tmp_path / "r.html")]) == ExitCode.TRACE_FORMAT
    assert not (tmp_path / "r.html").exists()
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 200 * 1024  # KiB


def test_merged_repeats_stay_selectable_and_versions_are_compared(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], two_target_trace: Trace
) -> None:
    assert two_target_trace.path
    older = write(
        tmp_path / "older.jsonl",
        [
            dict(line, tilelang_version="0.1.14") if line["record"] == "run" else line
            for line in records(two_target_trace)
        ],
    )
    merged = tmp_path / "m.jsonl"
    assert irtrace_main(["merge", two_target_trace.path, str(older), "-o", str(merged)]) == ExitCode.OK
    err = capsys.readouterr().err
    assert "copy on cuda:sm_90 is in the merged trace 2 times; select them as copy#1, copy#2" in err
    assert "different tilelang versions: 0.1.15 (two.jsonl); 0.1.14 (older.jsonl)" in err
    trace = load_trace(merged)
    first, second = trace.select("copy#1", "cuda:sm_90"), trace.select("copy#2", "cuda:sm_90")
    assert [r.tilelang_version for r in first + second] == ["0.1.15", "0.1.14"]
    assert irtrace_main(["show", str(merged), "-k", "copy#2", "-t", "cuda:sm_90"]) == ExitCode.OK
    assert "copy#2 on cuda:sm_90: ok" in capsys.readouterr().out
    assert (
        passdiff_main(["runs", str(merged), str(merged), "-k", "copy#2", "-t", "cuda:sm_90", "-f", "json"])
        == 0
    )


# ----------------------------------------------------------------------------- at random

HOSTILE_VALUES: list[Any] = [
    None,
    True,
    False,
    0,
    -1,
    1,
    2**31,
    2**70,
    0.5,
    -0.0,
    1e308,
    1e8,
    "",
    "x",
    "0",
    "1e400",
    "<script>alert(1)</script>",
    "[/x]",
    "C_local[i, j]",
    "\\",
    'a"b',
    "\u202e\x00",
    "a" * 10_000,
    [],
    {},
    [1, 2],
    {"a": {"b": None}},
    {"args": [1], "kwargs": {"k": [2]}},
    [[[[[[[[[[1]]]]]]]]]],
]
RAW_VALUES = ["NaN", "-Infinity", "1e400", "9" * 400, "[" * 5000 + "]" * 5000, '"\\ud800"']


def parses(line: str) -> bool:
    try:
        return isinstance(json.loads(line), dict)
    except (ValueError, RecursionError):
        return False


def mutate(lines: list[str], rng: random.Random) -> list[str]:
    """One random damage: a field's type or value, a missing field, nesting, or lines moved or cut."""
    lines = list(lines)
    kind = rng.choice(["value", "value", "value", "raw", "drop_field", "lines", "cut", "text"])
    structural = [i for i, line in enumerate(lines) if parses(line) and not line.startswith('{"record":"ir"')]
    ir = [i for i, line in enumerate(lines) if parses(line) and line.startswith('{"record":"ir"')]
    if not structural or not ir:
        return lines
    if kind in ("value", "raw", "drop_field"):
        i = rng.choice(structural)
        record = json.loads(lines[i])
        key = rng.choice([*record, "extra"]) if kind != "drop_field" else rng.choice(list(record))
        if kind == "drop_field" and key in record:
            del record[key]
            lines[i] = json.dumps(record)
        elif kind == "value":
            record[key] = rng.choice(HOSTILE_VALUES)
            lines[i] = json.dumps(record)
        else:
            record[key] = "@RAW@"
            lines[i] = json.dumps(record).replace('"@RAW@"', rng.choice(RAW_VALUES))
    elif kind == "lines":
        i, j = rng.randrange(len(lines)), rng.randrange(len(lines))
        action = rng.choice(["swap", "duplicate", "delete"])
        if action == "swap":
            lines[i], lines[j] = lines[j], lines[i]
        elif action == "duplicate":
            lines.insert(j, lines[i])
        else:
            del lines[i]
    elif kind == "cut":
        text = "\n".join(lines)
        return text[: rng.randrange(len(text))].split("\n")
    else:
        i = rng.choice(ir)
        record = json.loads(lines[i])
        record["text"] = rng.choice(["", record["text"][::-1], record["text"] + "<script>"])
        lines[i] = json.dumps(record)
    return lines


CASES = int(os.environ.get("FUZZ_CASES", "40"))


@pytest.mark.sweep  # 16-20 s on 2 cores: with the sweeps, to keep make test within 10 minutes
def test_random_damage_never_gives_a_traceback_in_any_reader(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], two_target_trace: Trace
) -> None:
    assert two_target_trace.path
    original = Path(two_target_trace.path).read_text().splitlines()
    rng = random.Random(int(os.environ.get("FUZZ_SEED", "10")))
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    outcomes: dict[int, int] = {}
    for case in range(CASES):
        lines = original
        for _ in range(rng.choice([1, 1, 2, 3])):
            lines = mutate(lines, rng)
        path = tmp_path / f"case{case}.jsonl"
        path.write_text("\n".join(lines) + ("\n" if rng.random() < 0.8 else ""))
        for code in check_every_reader(path, tmp_path, capsys).values():
            outcomes[code] = outcomes.get(code, 0) + 1
        for output in tmp_path.glob("*.html"):
            assert output.stat().st_size < 50 << 20
    grown_mib = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert grown_mib < 1024, f"peak memory grew by {grown_mib:.0f} MiB"
    # Both kinds of case occurred: damage that loads (and is shown) and damage refused with exit 6.
    assert outcomes.get(ExitCode.TRACE_FORMAT) and outcomes.get(ExitCode.OK), outcomes


def test_a_trace_cut_inside_nested_passes_loads_as_a_forest_every_reader_can_draw(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], two_target_trace: Trace
) -> None:
    """Cut after a nested pass finished but before its parent did. With the parent's `start`
    record, the parent is kept as the unfinished (running) pass; without it (a trace from before
    `start` records), the nested pass becomes a top-level one."""
    lines = records(two_target_trace)
    nested = next(
        i for i, line in enumerate(lines) if line["record"] == "pass" and line["parent"] is not None
    )
    parent_index = lines[nested]["parent"]
    cut = lines[: nested + 1]
    with_starts = load_trace(write(tmp_path / "starts.jsonl", cut))
    run = with_starts.runs[0]
    parent = next(p for p in run.passes if p.index == parent_index)
    assert run.running == parent.name and parent.failed and with_starts.ir_before(parent)
    without = load_trace(write(tmp_path / "old.jsonl", [line for line in cut if line["record"] != "start"]))
    orphan = next(p for p in without.runs[0].passes if p.index == lines[nested]["index"])
    assert orphan.parent is None and orphan.depth == 0
    for path in (tmp_path / "starts.jsonl", tmp_path / "old.jsonl"):
        codes = check_every_reader(path, tmp_path, capsys)
        assert codes["passviz html"] == codes["irtrace show"] == ExitCode.OK, codes
