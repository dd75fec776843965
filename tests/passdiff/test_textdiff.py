"""Normalization rules and text diffs, on real IR from the recorded GEMM."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from irtrace.diff import NormalizeRules, diff_texts, normalize_ir, word_diff
from irtrace.diff.textdiff import split_lines
from irtrace.trace.model import Trace

RAW = NormalizeRules.none()


def _ir(trace: Trace, target: str, query: str) -> str:
    run = trace.find_run("matmul", target)
    return trace.ir_after(run.find_pass(query))


def _renumber(text: str, shift: int) -> str:
    """A pure renaming: every numbered variable ``base_N`` becomes ``base_{N+shift}``."""
    return re.sub(r"\b([A-Za-z_]\w*?)_(\d+)\b(?!\")", lambda m: f"{m[1]}_{int(m[2]) + shift}", text)


def test_pure_renaming_is_no_difference_with_renaming_on_and_one_with_it_off(gemm_trace: Trace) -> None:
    # After LowerOpaqueBlock the GEMM holds many numbered variables (mbarrier_1, C_local_1, ...).
    before = _ir(gemm_trace, "cuda:sm_90", "tl.LowerOpaqueBlock")
    renamed = _renumber(before, 7)
    assert renamed != before
    numbered = set(re.findall(r"\b[A-Za-z_]\w*?_\d+\b", before))
    assert len(numbered) >= 3, numbered

    with_renaming = diff_texts(before, renamed, NormalizeRules(rename_vars=True))
    without = diff_texts(before, renamed, NormalizeRules(rename_vars=False))
    assert with_renaming.is_empty
    assert not without.is_empty
    changed = {line.text for line in without.lines if line.kind != "equal"}
    assert all(re.search(r"_\d+\b", text) for text in changed)
    assert "rename_vars" in with_renaming.rules.enabled()
    assert "rename_vars" not in without.rules.enabled()


def test_renaming_does_not_hide_a_real_change(gemm_trace: Trace) -> None:
    before = _ir(gemm_trace, "cuda:sm_90", "tl.LowerOpaqueBlock")
    line = next(line for line in before.splitlines() if "threadIdx.x" in line)
    edited = _renumber(before, 3).replace(line, line.replace("threadIdx.x", "threadIdx.y"))
    diff = diff_texts(before, edited, NormalizeRules(rename_vars=True))
    assert (diff.added, diff.removed) == (1, 1)


def test_target_masking_hides_only_the_target_json(gemm_trace: Trace) -> None:
    cuda = _ir(gemm_trace, "cuda:sm_90", "tirx.BindTarget")
    hip = _ir(gemm_trace, "hip:gfx942", "tirx.BindTarget")
    assert '"sm_90"' in cuda and '"gfx942"' in hip
    assert not diff_texts(cuda, hip, RAW).is_empty
    masked = diff_texts(cuda, hip, NormalizeRules())
    assert masked.is_empty
    assert "sm_90" not in masked.before and "T.target(<target>)" in masked.before
    # Lines are kept one for one, so line numbers point into the raw IR.
    assert len(masked.before.splitlines()) == len(cuda.splitlines())


def test_metadata_and_address_masks() -> None:
    old = 'T.sblock_attr({"layout_map": {A: metadata["tl.Layout"][0]}}) # at 0x7f3a5c2b1e90, 0xFFFFFFFF'
    new = 'T.sblock_attr({"layout_map": {A: metadata["tl.Layout"][3]}}) # at 0x55d1e3a9c010, 0xFFFFFFFF'
    assert diff_texts(old, new).is_empty
    assert normalize_ir(old).endswith("0x<addr>, 0xFFFFFFFF")
    only_addresses = NormalizeRules(mask_metadata=False)
    assert (diff_texts(old, new, only_addresses).added, diff_texts(old, new, RAW).added) == (1, 1)
    assert NormalizeRules().enabled() == ["mask_targets", "mask_addresses", "mask_metadata"]
    assert RAW.enabled() == []


@pytest.mark.parametrize("query", ["tl.LowerTileOp", "tl.LayoutInference"])
def test_line_diff_round_trips_and_unified_applies_with_patch(
    gemm_trace: Trace, tmp_path, query: str
) -> None:
    run = gemm_trace.find_run("matmul", "cuda:sm_90")
    record = run.find_pass(query)
    before, after = gemm_trace.ir_before(record), gemm_trace.ir_after(record)
    diff = diff_texts(before, after, RAW)
    old_side = [x.old_text if x.kind == "reindent" else x.text for x in diff.lines if x.kind != "insert"]
    assert old_side == split_lines(before)
    assert [x.text for x in diff.lines if x.kind != "delete"] == split_lines(after)
    assert diff.added - diff.removed == len(split_lines(after)) - len(split_lines(before))
    # The files as `irtrace ir` writes them: ending in a newline.
    target = tmp_path / "ir.py"
    target.write_text(before if before.endswith("\n") else before + "\n")
    subprocess.run(["patch", "-s", str(target)], input=diff.unified(), text=True, check=True)
    assert target.read_text() == (after if after.endswith("\n") else after + "\n")


def test_side_by_side_pairs_replaced_lines(gemm_trace: Trace) -> None:
    run = gemm_trace.find_run("matmul", "cuda:sm_90")
    record = run.find_pass("tl.LayoutInference")
    diff = diff_texts(gemm_trace.ir_before(record), gemm_trace.ir_after(record), RAW)
    rows = diff.side_by_side()
    assert sum(row.old_no is not None for row in rows) == len(split_lines(diff.before))
    assert sum(row.new_no is not None for row in rows) == len(split_lines(diff.after))
    assert any(row.kind == "replace" for row in rows)
    near = diff.side_by_side(context=1)
    assert 0 < len(near) < len(rows)
    assert all(row.kind != "equal" or row.old_text == row.new_text for row in near)


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ('tx = T.launch_thread("threadIdx.x", 256)', 'tx = T.launch_thread("threadIdx.x", 128)'),
        ("C_local = T.alloc(1)", "C_local_1 = T.alloc(1)  # moved"),
        ("", "a b"),
    ],
)
def test_word_diff_rebuilds_both_lines(old: str, new: str) -> None:
    pieces = word_diff(old, new)
    assert "".join(f for kind, f in pieces if kind != "insert") == old
    assert "".join(f for kind, f in pieces if kind != "delete") == new
    if old.startswith("tx"):
        assert ("delete", "256") in pieces and ("insert", "128") in pieces


def test_library_imports_no_terminal_or_compiler_code() -> None:
    code = "import sys, passdiff; print(sorted(m for m in ('rich', 'tilelang', 'tvm') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def _reindented(text: str) -> str:
    """Every line indented two more spaces and runs of spaces inside lines doubled."""
    return "\n".join("  " + line.replace(", ", ",  ") for line in text.splitlines()) + "\n"


def test_ignore_whitespace_agrees_with_diff_w(gemm_trace: Trace, tmp_path) -> None:
    run = gemm_trace.find_run("matmul", "cuda:sm_90")
    before = gemm_trace.ir_after(run.find_pass("tl.LayoutInference"))
    spaced = _reindented(before)
    old_file, new_file = tmp_path / "old.py", tmp_path / "new.py"
    old_file.write_text(before + "\n")
    new_file.write_text(spaced)
    # GNU diff -w, the oracle: no difference once whitespace is ignored.
    assert subprocess.run(["diff", "-w", str(old_file), str(new_file)], capture_output=True).returncode == 0
    ignoring = NormalizeRules(ignore_whitespace=True)
    assert diff_texts(before, spaced, ignoring).is_empty
    assert "ignore_whitespace" in ignoring.enabled()
    # A real change still shows: one line differing in more than whitespace.
    line = next(x for x in spaced.splitlines() if "threadIdx.x" in x)
    edited = spaced.replace(line, line.replace("threadIdx.x", "threadIdx.y"), 1)
    new_file.write_text(edited)
    assert subprocess.run(["diff", "-w", str(old_file), str(new_file)], capture_output=True).returncode == 1
    changed = diff_texts(before, edited, ignoring)
    assert (changed.added, changed.removed) == (1, 1)


def test_lines_whose_indentation_alone_changed_are_marked(gemm_trace: Trace) -> None:
    run = gemm_trace.find_run("matmul", "cuda:sm_90")
    before = gemm_trace.ir_after(run.find_pass("tl.LayoutInference"))
    wholesale = diff_texts(before, _reindented(before).replace(",  ", ", "), RAW)
    assert wholesale.reindented == wholesale.added == wholesale.removed == len(before.splitlines())
    # On real passes that wrap statements in new blocks, each marked line is the same line with
    # other leading whitespace; -w counts exactly the other changed lines.
    marked = 0
    for record in run.passes:
        if record.ir_after is None or record.ir_after == record.ir_before:
            continue
        old, new = gemm_trace.ir_before(record), gemm_trace.ir_after(record)
        diff = diff_texts(old, new, RAW)
        for line in diff.lines:
            if line.kind == "reindent":
                assert line.old_text is not None and line.old_text != line.text
                assert line.old_text.lstrip() == line.text.lstrip()
                assert split_lines(old)[line.old_no - 1] == line.old_text  # type: ignore[operator]
                assert split_lines(new)[line.new_no - 1] == line.text  # type: ignore[operator]
        rows = diff.side_by_side()
        assert sum(row.kind == "reindent" for row in rows) == diff.reindented
        marked += diff.reindented
    assert marked >= 10


def _suffix_free_tokens(line: str) -> list[str] | None:
    """The line's tokens (Python's tokenizer), with TVM's ``_N`` suffixes dropped from names that
    are not attributes: the oracle for "these lines differ only by a TVM renaming"."""
    import io
    import tokenize

    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(line.strip() + "\n").readline))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return None
    out: list[str] = []
    for token in tokens:
        if token.type == tokenize.NAME and not (out and out[-1] == "."):
            out.append(re.sub(r"(_[0-9]+)+$", "", token.string) or token.string)
        elif token.type not in (tokenize.NEWLINE, tokenize.NL, tokenize.ENDMARKER):
            out.append(token.string)
    return out


@pytest.mark.parametrize("query", ["tir.StorageRewrite", "tl.LowerTileOp"])
def test_rename_vars_hides_the_renamings_tvm_makes_on_a_real_pipeline(
    gemm_sm80_ascend_trace: Trace, query: str
) -> None:
    """On sm_80, tl.LowerTileOp prints A_shared as A_shared_6 in places and tir.StorageRewrite,
    dropping declarations, shifts C_local_3 to C_local_2."""
    run = gemm_sm80_ascend_trace.find_run("matmul", "cuda:sm_80")
    record = run.find_pass(query)
    old, new = gemm_sm80_ascend_trace.ir_before(record), gemm_sm80_ascend_trace.ir_after(record)
    old_raw, new_raw = split_lines(old), split_lines(new)

    plain = diff_texts(old, new)
    renamings = [
        row
        for row in plain.side_by_side()
        if row.kind == "replace"
        and _suffix_free_tokens(row.old_text) is not None
        and _suffix_free_tokens(row.old_text) == _suffix_free_tokens(row.new_text)
    ]
    assert renamings, "the pass renames nothing here any more"

    renamed = diff_texts(old, new, NormalizeRules(rename_vars=True))
    assert renamed.added + renamed.removed < plain.added + plain.removed
    assert not renamed.is_empty  # the pass did more than rename
    # What is left is not a renaming: no replaced pair that the tokenizer finds equal.
    for row in renamed.side_by_side():
        if row.kind == "replace" and row.old_no and row.new_no:
            before_tokens = _suffix_free_tokens(old_raw[row.old_no - 1])
            assert before_tokens is None or before_tokens != _suffix_free_tokens(new_raw[row.new_no - 1])
    # And the lines a renaming changed are no longer changed lines.
    still = {(row.old_no, row.new_no) for row in renamed.side_by_side() if row.kind != "equal"}
    assert not {(row.old_no, row.new_no) for row in renamings} & still
