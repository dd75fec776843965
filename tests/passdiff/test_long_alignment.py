"""Pass alignment of long pipelines: linear memory, the longest pairing, and a bound that says so.

The oracle for "how many passes do the runs share at one level" is a plain O(n*m) longest common
subsequence table computed here; the runs are built from pipelines shaped like TileLang's
(nested ``tl.Simplify`` inside ``tl.LowerTileOp``), long enough that the old full table could not
be built (32k x 32k cells).
"""

from __future__ import annotations

import hashlib
import json
import random
import subprocess
import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path

import pytest

from irtrace.cli.main import main as irtrace_main
from irtrace.diff import ONLY_A, ONLY_B, SHARED, align_passes
from irtrace.diff.align import AlignLimits
from irtrace.diff.compare import APPROXIMATE_NOTE
from irtrace.trace.model import KernelRun, PassRecord
from irtrace.trace.writer import TraceWriter
from passdiff.cli import main as passdiff_main

ROOT = Path(__file__).resolve().parents[2]
TEXTS = {hashlib.sha256(text.encode()).hexdigest(): text for text in (f"# module {k}\n" for k in range(7))}
SHAS = list(TEXTS)
NAMES = ["tl.Simplify", "tl.LowerTileOp", "tl.LayoutInference", "tirx.BindTarget", "tl.InjectFenceProxy"]


def make_run(
    tree: Sequence[tuple[str, int | None]], target: str = "cuda:sm_90", changing: int = 0
) -> KernelRun:
    """A run of passes ``(name, parent position)`` in start order; every ``changing``-th changes the IR."""
    depth: dict[int, int] = {}
    passes = []
    for index, (name, parent) in enumerate(tree):
        depth[index] = 0 if parent is None else depth[parent] + 1
        sha = SHAS[index % len(SHAS)]
        changed = bool(changing) and index % changing == 0
        after = SHAS[(index + 1) % len(SHAS)] if changed else sha
        passes.append(
            PassRecord(
                index=index,
                name=name,
                raw_name=name,
                phase="lower",
                pipeline="cuda",
                depth=depth[index],
                parent=parent,
                start_s=0.0,
                wall_s=0.0,
                self_s=0.0,
                changed=changed,
                ir_before=sha,
                ir_after=after,
            )
        )
    return KernelRun(
        run_id=0, kernel="k", spec="synthetic.py::k()", args={}, target=target, target_detail="{}",
        pass_configs={}, tilelang_version="0.1.15", host={}, passes=tuple(passes), status="ok",
    )  # fmt: skip


def flat(names: list[str]) -> KernelRun:
    return make_run([(name, None) for name in names])


def plain_lcs_length(a: list[str], b: list[str]) -> int:
    """The oracle: the textbook O(n*m) table."""
    previous = [0] * (len(b) + 1)
    for x in a:
        current = [0] * (len(b) + 1)
        for j, y in enumerate(b):
            current[j + 1] = previous[j] + 1 if x == y else max(previous[j + 1], current[j])
        previous = current
    return previous[-1]


def edited(rng: random.Random, names: list[str], edits: int, alphabet: int) -> list[str]:
    out = list(names)
    for _ in range(edits):
        if out and rng.random() < 0.5:
            del out[rng.randrange(len(out))]
        else:
            out.insert(rng.randint(0, len(out)), f"p{rng.randrange(alphabet + 2)}")
    return out


# The linear-space path on every case, however small: no full table, tiny windows.
LINEAR_ONLY = AlignLimits(full_table_cells=0, window_cells=40, max_edits=10**9)


@pytest.mark.parametrize("seed", range(4))
def test_matched_count_equals_a_plain_lcs_table_on_random_pipelines(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(60):
        alphabet = rng.randint(1, 8)
        a = [f"p{rng.randrange(alphabet)}" for _ in range(rng.randint(0, 220))]
        b = (
            edited(rng, a, rng.randint(0, 40), alphabet)
            if rng.random() < 0.7
            else edited(rng, [], 150, alphabet)
        )
        for limits in (LINEAR_ONLY, None):
            rows = align_passes(flat(a), flat(b), limits)
            shared = [row for row in rows if row.status == SHARED]
            assert len(shared) == plain_lcs_length(a, b)
            assert not rows.approximate
            assert all(row.a is not None and row.b is not None and row.a.name == row.b.name for row in shared)
            indices = [(row.a.index, row.b.index) for row in shared if row.a and row.b]
            assert indices == sorted(indices) and len({i for i, _ in indices}) == len(indices)
            assert sorted(row.b.index for row in rows if row.b is not None) == list(range(len(b)))


def test_nested_passes_pair_only_inside_their_paired_parents() -> None:
    """Level by level: a child of ``tl.LowerTileOp`` never faces a top-level ``tl.Simplify``."""
    a = [("tl.Simplify", None), ("tl.LowerTileOp", None), ("tl.Simplify", 1), ("tl.Simplify", None)]
    b = [("tl.Simplify", None), ("tl.LowerTileOp", None), ("tl.Simplify", None)]
    for limits in (LINEAR_ONLY, None):
        rows = align_passes(make_run(a), make_run(b), limits)
        assert [(r.status, r.depth) for r in rows] == [(SHARED, 0), (SHARED, 0), (ONLY_A, 1), (SHARED, 0)]


def pipeline_tree(blocks: int) -> list[tuple[str, int | None]]:
    """``blocks`` copies of a pipeline of 40 passes, each with two ``tl.Simplify`` nested."""
    tree: list[tuple[str, int | None]] = []
    for block in range(blocks):
        for k in range(38):
            if k == 10:
                tree.append(("tl.LowerTileOp", None))
                parent = len(tree) - 1
                tree += [("tl.Simplify", parent), ("tl.Simplify", parent)]
            else:
                tree.append((NAMES[(k + block) % len(NAMES)] if k % 3 else f"tl.Pass{k}", None))
    return tree


LONG_RUNS = textwrap.dedent(
    """
    import resource, sys, time
    sys.path.insert(0, {root!r})
    from tests.passdiff.test_long_alignment import make_run, pipeline_tree, random
    from irtrace.diff import SHARED, align_passes
    tree = pipeline_tree(800)
    rng = random.Random(7)
    other = list(tree)
    for k in sorted(rng.sample(range(len(tree)), 400), reverse=True):
        if other[k][1] is None and (k + 1 == len(other) or other[k + 1][1] is None):
            other[k] = ("tl.Added", None)
    other[0] = ("tl.First", None)
    other[-1] = ("tl.Last", None)
    run_a, run_b = make_run(tree), make_run(other)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    started = time.perf_counter()
    rows = align_passes(run_a, run_b)
    took = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    shared = sum(row.status == SHARED for row in rows)
    print(len(run_a.passes), len(run_b.passes), shared, rows.approximate, (after - before) / 1024, took)
    """
)


def test_alignment_of_two_32k_pass_runs_stays_under_200_mb() -> None:
    script = LONG_RUNS.format(root=str(ROOT))
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300, cwd=ROOT, check=True
    )
    passes_a, passes_b, shared, approximate, grown_mb, _ = done.stdout.split()
    assert int(passes_a) == int(passes_b) == 32_000
    # Each replaced top-level pass is one removed and one added; every other pass is shared.
    assert int(shared) >= 32_000 - 402
    assert approximate == "False"
    assert float(grown_mb) < 200, done.stdout


def write_trace(path: Path, run: KernelRun) -> None:
    with TraceWriter(path) as writer:
        writer.add_run(run, TEXTS)


def test_runs_past_the_bound_pair_greedily_and_both_commands_say_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rng = random.Random(3)
    names = [f"p{rng.randrange(30)}" for _ in range(3000)]
    other = [f"p{rng.randrange(30)}" for _ in range(3000)]
    rows = align_passes(flat(names), flat(other))
    assert rows.approximate
    shared = [row for row in rows if row.status == SHARED]
    assert shared and all(row.a and row.b and row.a.name == row.b.name for row in shared)
    assert len(rows) == 6000 - len(shared) - sum(row.status not in (SHARED, ONLY_A, ONLY_B) for row in rows)

    write_trace(tmp_path / "old.jsonl", flat(names))
    write_trace(tmp_path / "new.jsonl", flat(other))
    passdiff_main(["runs", str(tmp_path / "old.jsonl"), str(tmp_path / "new.jsonl")])
    assert "passes aligned greedily by name" in capsys.readouterr().out
    irtrace_main(
        [
            "check",
            str(tmp_path / "new.jsonl"),
            "--baseline",
            str(tmp_path / "old.jsonl"),
            "--json",
            str(tmp_path / "c.json"),
        ]
    )
    assert "passes aligned greedily by name" in capsys.readouterr().out
    assert f"k on cuda:sm_90: {APPROXIMATE_NOTE}" in json.loads((tmp_path / "c.json").read_text())["notes"]
