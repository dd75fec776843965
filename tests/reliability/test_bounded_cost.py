"""Every cost a hostile input can raise is bounded (issue 34): a ``.gz`` bomb's memory, a layout
expression's arithmetic, XML that names from a trace could break, the startup hook's warnings.
Each test is the attack; memory is the child's peak as the kernel counts it (``getrusage``)."""

from __future__ import annotations

import json
import subprocess
import sys
import xml.etree.ElementTree as ElementTree
import zlib
from pathlib import Path

import msgspec
import pytest

from irtrace.cli.main import main
from irtrace.diff.layouts import NOT_COMPARED, compare_mapping
from irtrace.facts.layout_eval import LayoutExpressionError, evaluate
from irtrace.trace.model import Trace
from irtrace.trace.reader import MAX_RATIO
from irtrace.trace.schema import BufferLayout
from tests.conftest import DATA, ROOT

HEADER = b'{"record":"header","format":"irtrace","schema":1,"created":"2026-12-03T08:30:22+00:00"}\n'


def gzip_bomb(path: Path, gigabytes: int = 1) -> int:
    """About 1 MB of gzip that decompresses to ``gigabytes`` GB: one member of 1 MB of text,
    repeated (a gzip file may hold many members)."""
    compressor = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    member = compressor.compress(b"a" * (1 << 20)) + compressor.flush()
    first = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    path.write_bytes(first.compress(HEADER) + first.flush() + member * (1024 * gigabytes))
    return path.stat().st_size


def peak_rss_mb(command: list[str]) -> tuple[int, str, float]:
    """Run ``command`` from a fresh Python whose only child it is: exit code, stderr, and the
    child's peak resident memory in MB."""
    probe = (
        "import json, resource, subprocess, sys\n"
        "done = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
        "peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024\n"
        "print(json.dumps([done.returncode, done.stderr, peak]))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe, *command], capture_output=True, text=True, check=True)
    code, err, peak = json.loads(done.stdout)
    return code, err, peak


def test_a_gz_bomb_is_refused_with_memory_about_its_bound(tmp_path: Path) -> None:
    bomb = tmp_path / "bomb.jsonl.gz"
    size = gzip_bomb(bomb)
    assert size < 1_100_000
    bound_mb = MAX_RATIO * size / 2**20  # the text a file of this size may decompress to
    code, err, peak = peak_rss_mb([sys.executable, "-m", "irtrace.cli", "show", str(bomb)])
    assert code == 6, err
    assert "decompression bomb" in err and len(err.strip().splitlines()) == 1, err
    # the interpreter and irtrace's imports take about 60 MB; before the bound, 1 GB of text cost 4 GB
    assert peak < bound_mb + 200, (peak, bound_mb)


def test_a_file_of_empty_lines_is_no_trace(tmp_path: Path) -> None:
    """Each line is an object in memory: millions of empty ones would cost far more than the text."""
    compressor = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    empty = tmp_path / "lines.jsonl.gz"
    empty.write_bytes(compressor.compress(HEADER + b"\n" * (20 << 20)) + compressor.flush())
    code, err, _ = peak_rss_mb([sys.executable, "-m", "irtrace.cli", "show", str(empty)])
    assert code == 6 and "mostly empty lines" in err, err


def test_huge_constants_in_a_layout_are_refused_before_any_arithmetic() -> None:
    """Two 10,000-digit constants multiplied: four nodes, and before the bound a millisecond per
    element (minutes per buffer). Hex, since Python refuses decimal literals that long."""
    digits = "0x" + "f" * 8_300  # 33,200 bits, under the 20,000-character expression limit twice
    for text, message in (
        (f"{digits} * {digits} + _i", "an integer constant of 33200 bits (at most 64)"),
        ("_i * 4294967296 * 4294967296 * 4294967296 * 4294967296", "a value wider than 128 bits"),
        ("T.shift_left(_i, 64) * 18446744073709551615 * 18446744073709551615", "a value wider than 128 bits"),
        ("+".join(["_i"] * 2_001), "operations (at most 2000)"),
    ):
        with pytest.raises(LayoutExpressionError, match=message.replace("(", r"\(").replace(")", r"\)")):
            evaluate(text, {"_i": 3})
    wide = BufferLayout(
        buffer="A",
        scope="shared",
        dtype="float16",
        shape=[64, 64],
        kind="layout",
        input_shape=[64, 64],
        output_shape=[4096],
        forward_vars=["_i", "_j"],
        forward_index=[f"_i * 64 + _j + {digits} * {digits}"],
        summary="linear",
        text="",
    )
    plain = msgspec.structs.replace(wide, forward_index=["_i * 64 + _j"])
    check = compare_mapping(plain, wide)
    assert check.status == NOT_COMPARED and "33200 bits" in (check.reason or "")


def test_junit_parses_whatever_control_characters_a_kernel_name_holds(
    gemm_trace: Trace, tmp_path: Path
) -> None:
    import xmlschema

    assert gemm_trace.path is not None
    hostile = "gemm\x00\x01\x1b[31m\x0b\x0c\ufffe\uffff"
    lines = []
    for line in Path(gemm_trace.path).read_text().splitlines():
        record = json.loads(line)
        if record["record"] == "run":
            record["kernel"] = hostile
        lines.append(json.dumps(record))
    new = tmp_path / "new.jsonl"
    new.write_text("\n".join(lines) + "\n")
    junit = tmp_path / "junit.xml"
    code = main(["check", str(new), "--baseline", gemm_trace.path, "--junit", str(junit)])
    assert code in (0, 1)
    xmlschema.XMLSchema(str(DATA / "junit.xsd")).validate(str(junit))
    names = {case.get("name") for case in ElementTree.parse(junit).getroot().iter("testcase")}
    # the name still says what it held, as visible escapes
    assert r"gemm\x00\x01\x1b[31m\x0b\x0c\ufffe\uffff" in names, names


def test_the_startup_hook_warns_once_when_irtrace_cannot_be_imported(tmp_path: Path) -> None:
    """``-S``: no site-packages, so no irtrace; the hook's folder added twice (the .pth then runs
    twice in that process), and a Python child started with IRTRACE still set."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "irtrace-autocapture.pth").write_text((ROOT / "irtrace-autocapture.pth").read_text())
    add = f"import site; site.addsitedir({str(site)!r}); site.addsitedir({str(site)!r})"
    child = f"import subprocess, sys; subprocess.run([sys.executable, '-S', '-c', {add!r}])"
    done = subprocess.run(
        [sys.executable, "-S", "-c", f"{add}; {child}; print('ran')"],
        cwd=tmp_path,
        env={"IRTRACE": str(tmp_path / "out.jsonl"), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
    )
    assert done.stdout == "ran\n", done.stderr
    (line,) = done.stderr.splitlines()
    assert line.startswith("irtrace: warning: IRTRACE is set but irtrace cannot be imported")
