"""``DigestIndex`` answers as a dict does, whether its entries are in memory or in its file, and a
corpus whose texts outgrow memory is merged and checked with the same results.

Oracles: a plain dict fed the same operations; the whole-trace reader (``load_trace``) and the
in-memory merge (``write_merged``) on the same files; Python's allocation tracker for what each run
costs a merge.
"""

from __future__ import annotations

import hashlib
import random
import sqlite3
import tracemalloc
from collections import ChainMap
from pathlib import Path

import pytest
from msgspec.structs import replace

from irtrace.ci.check import check_traces
from irtrace.trace import digest_index
from irtrace.trace.digest_index import DigestIndex
from irtrace.trace.model import Trace, text_sha256
from irtrace.trace.reader import load_trace
from irtrace.trace.stream import open_trace
from irtrace.trace.writer import TraceWriter, stream_merged, write_merged


def test_answers_as_a_dict_across_the_move_to_its_file() -> None:
    chooser = random.Random(7)
    keys = [hashlib.sha256(str(n).encode()).digest() for n in range(500)]
    index, oracle = DigestIndex(in_memory=37), {}
    for step in range(2_000):
        key = chooser.choice(keys)
        # keys come back (a later place replaces an earlier one); places of a large file pass 2**63
        index[key] = oracle[key] = step << 40 << (step % 3 * 20) | step
        if step % 97 == 0:
            probe = chooser.choice(keys)
            assert index.get(probe) == oracle.get(probe)
    assert index.spilled
    assert all(index.get(key) == oracle.get(key) for key in keys)
    assert sorted(index) == sorted(oracle) and len(index) == len(oracle)
    assert (b"x" * 32 in index, "not bytes" in index) == (False, False)
    index.close()
    assert index.get(keys[0]) is None and len(index) == 0


def _unique_corpus(folder: Path, template: Trace, runs: int, texts_per_run: int) -> list[Path]:
    """Shards of ``runs`` runs, each with texts of its own (a regression corpus shares few)."""
    folder.mkdir()
    shards = [TraceWriter(folder / f"shard-{k}.jsonl") for k in range(3)]
    run = template.runs[0]
    for number in range(runs):
        passes, texts = [], {}
        for place, record in enumerate(run.passes[:texts_per_run]):
            text = f"# kernel k{number}, pass {place}\n{template.texts[run.input_ir or '']}"
            sha = text_sha256(text)
            texts[sha] = text
            passes.append(replace(record, ir_after=sha, changed=True))
        copy = replace(run, kernel=f"k{number}", passes=tuple(passes), source_maps=(), layouts=())
        shards[number % 3].add_run(copy, ChainMap(texts, template.texts))
    for shard in shards:
        shard.close()
    return [folder / f"shard-{k}.jsonl" for k in range(3)]


def test_a_merge_past_memory_matches_the_in_memory_merge(
    gemm_trace: Trace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shards = _unique_corpus(tmp_path / "corpus", gemm_trace, runs=30, texts_per_run=12)
    write_merged([load_trace(path) for path in shards], tmp_path / "oracle.jsonl")
    monkeypatch.setattr(digest_index, "IN_MEMORY", 25)  # the corpus's 360 texts outgrow it
    moved: list[int] = []
    move = DigestIndex._spill
    monkeypatch.setattr(DigestIndex, "_spill", lambda index: (moved.append(1), move(index))[1])
    stream_merged([open_trace(path) for path in shards], tmp_path / "merged.jsonl")
    assert len(moved) > 3 * 4 + 360 // 25  # every shard's index, and the merge's written digests
    ours, oracle = load_trace(tmp_path / "merged.jsonl"), load_trace(tmp_path / "oracle.jsonl")
    assert [run.kernel for run in ours.runs] == [run.kernel for run in oracle.runs]
    assert [run.passes for run in ours.runs] == [run.passes for run in oracle.runs]
    assert dict(ours.texts) == dict(oracle.texts)
    report = check_traces(open_trace(tmp_path / "merged.jsonl"), open_trace(tmp_path / "oracle.jsonl"))
    assert len(report.runs) == 30 and not report.gated


def _merge_peak(shards: list[Path], out: Path) -> int:
    tracemalloc.start()
    try:
        stream_merged([open_trace(path) for path in shards], out)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_merge_keeps_no_text_index_per_run_once_past_memory(
    gemm_trace: Trace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each run adds 40 texts of its own: in dicts, the shards' indexes and the merge's list of
    written digests keep about 10 KB a run (measured: 11 KB); past memory, nothing of them."""
    monkeypatch.setattr(digest_index, "IN_MEMORY", 64)
    small = _unique_corpus(tmp_path / "n", gemm_trace, runs=20, texts_per_run=40)
    large = _unique_corpus(tmp_path / "4n", gemm_trace, runs=80, texts_per_run=40)
    _merge_peak(small, tmp_path / "warm.jsonl")  # first-call allocations (imports, caches)
    per_run = (_merge_peak(large, tmp_path / "4n.jsonl") - _merge_peak(small, tmp_path / "n.jsonl")) / 60
    assert per_run < 3_000, f"a merge keeps {per_run:.0f} bytes a run"


def test_without_room_for_its_file_the_index_stays_in_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    """A full or read-only temporary folder is not an error of the command that reads the trace."""

    def no_room(*args: object, **kwargs: object) -> None:
        raise sqlite3.OperationalError("unable to open database file")

    monkeypatch.setattr(digest_index.sqlite3, "connect", no_room)
    index, oracle = DigestIndex(in_memory=10), {}
    for number in range(100):
        key = hashlib.sha256(str(number).encode()).digest()
        index[key] = oracle[key] = number << 70
    assert not index.spilled
    assert all(index.get(key) == value for key, value in oracle.items()) and len(index) == 100
