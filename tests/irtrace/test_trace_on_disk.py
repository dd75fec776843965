"""A loaded trace reads its IR texts from its file when asked for (plain, or ``.gz`` decompressed to
a temporary file): the texts must be the ones written, whatever happens to the path afterwards,
and a merge that does not hold the texts must write every one of them.

The oracle is the texts themselves, kept by the test, and their SHA-256."""

from __future__ import annotations

import gzip
import hashlib
import os
from pathlib import Path

import pytest
from msgspec.structs import replace

from irtrace.cli.main import main as irtrace_main
from irtrace.trace.reader import load_trace
from irtrace.trace.writer import TraceWriter
from tests.passdiff.test_long_alignment import make_run, pipeline_tree


def _texts(tag: str, count: int) -> dict[str, str]:
    texts = [f"# {tag} module {k}\n" + "x = 1\n" * k for k in range(count)]
    return {hashlib.sha256(text.encode()).hexdigest(): text for text in texts}


def _write(path: Path, kernel: str, texts: dict[str, str]) -> None:
    shas = list(texts)
    run = make_run(pipeline_tree(3))
    passes = tuple(
        replace(p, ir_before=shas[k % len(shas)], ir_after=shas[(k + 1) % len(shas)], changed=True)
        for k, p in enumerate(run.passes)
    )
    with TraceWriter(path) as writer:
        writer.add_run(replace(run, kernel=kernel, passes=passes), texts)


@pytest.mark.parametrize("suffix", [".jsonl", ".jsonl.gz"])
def test_texts_come_back_from_the_file_even_after_it_is_replaced(tmp_path: Path, suffix: str) -> None:
    first, second = _texts("a", 100), _texts("b", 100)
    path, other = tmp_path / f"a{suffix}", tmp_path / f"b{suffix}"
    _write(path, "ka", first)
    _write(other, "kb", second)
    loaded = load_trace(path)
    # `irtrace merge a b -o a` replaces the file the loaded trace reads its texts from.
    assert irtrace_main(["merge", str(path), str(other), "-o", str(path)]) == 0
    for sha, text in first.items():
        assert loaded.text(sha) == text
    merged = load_trace(path)
    merged.verify()
    assert {run.kernel for run in merged.runs} == {"ka", "kb"}
    for sha, text in {**first, **second}.items():
        assert merged.text(sha) == text
    if suffix.endswith(".gz"):
        assert gzip.decompress(path.read_bytes()).startswith(b'{"record":"header"')


def test_a_gz_trace_cut_short_loads_what_it_holds(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl.gz"
    _write(path, "k", _texts("c", 100))
    whole = path.read_bytes()
    cut = tmp_path / "cut.jsonl.gz"
    cut.write_bytes(whole[: len(whole) * 3 // 4])
    trace = load_trace(cut)
    assert trace.truncated
    for run in trace.runs:
        for record in run.passes:
            assert record.ir_before is None or record.ir_before in trace.texts
    assert os.path.getsize(cut) < len(whole)
