"""How long passdiff takes to normalize and diff two large IR snapshots, against plain difflib.

Records the flash-attention example through irtrace's real pipeline (Metal first, as the issue
asks; every target whose lowering fails is reported and the next one is tried), then builds two
5,000-line texts from the real before/after snapshots of the passes that changed the module:
the k-th changed pass's input goes into the "before" text and its output into the "after" text,
so the pair has the mix of equal and changed regions of real IR. Both timings run in this
process on the same texts; each is the best of several interleaved repeats.

Then the hostile texts of issue 19, made of the same real IR: an 88 KB line and a 660 KB line
changed throughout (every integer bumped) and with one word changed, and 20,000 lines all
re-indented. A long line is timed through diff + terminal lines + HTML table (every view that
compares words), against one tokenising pass over both lines (the least any word diff does); the
re-indented text through diff + per-line records (the re-indent pairing), against
``difflib.unified_diff`` of the same texts. Each must take under 1 s.

Run: .venv/bin/python bench/diff_speed.py [--lines 5000] [--repeats 15] [--bounded-repeats 3] [--smoke]
``--smoke`` (for CI) records one target, times 500 lines twice and the 88 KB line and re-indented
text once, leaving out the 660 KB line.
Ends with: RESULT ms_5000_lines=<ms> ratio_vs_difflib=<x> long_line_88k_s=<s> ... reindent_20k_s=<s> ...
"""

from __future__ import annotations

import argparse
import difflib
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from irtrace.diff import NormalizeRules, diff_texts, normalize_ir  # noqa: E402
from irtrace.lowering.api import RecordRequest, record_kernels  # noqa: E402
from irtrace.targets.specs import parse_spec  # noqa: E402
from irtrace.trace.model import STATUS_OK, Trace  # noqa: E402
from irtrace.trace.writer import TraceWriter  # noqa: E402
from passdiff.render import html_table, terminal_lines  # noqa: E402

SPEC = f"{ROOT / 'examples' / 'flash_attention.py'}::flash_attention_fwd()"
TARGETS = ("metal", "hip:gfx942", "cuda:sm_90")


def record(targets: tuple[str, ...] = TARGETS) -> Trace:
    """The flash-attention kernel lowered for each target in turn, in memory."""
    writer = TraceWriter(None)
    for target in targets:
        started = time.perf_counter()
        recording = record_kernels([RecordRequest(parse_spec(SPEC), (target,))], writer)
        runs, errors = recording.runs, recording.errors
        took = time.perf_counter() - started
        for error in errors:
            print(f"record {target}: error {error.message}")
        for run in runs:
            where = "" if run.status == STATUS_OK else f" ({(run.error or '').splitlines()[0][:100]})"
            print(f"record {target}: {run.status}, {len(run.passes)} passes in {took:.1f} s{where}")
    return writer.trace()


def build_pair(trace: Trace, lines: int) -> tuple[str, str, int]:
    """Two texts of ``lines`` lines each from real before/after snapshots of changed passes."""
    pairs = [
        (trace.ir_before(p), trace.ir_after(p))
        for run in trace.runs
        for p in run.passes
        if p.changed and p.ir_after is not None and p.name != "codegen"
    ]
    largest = max((len(after.splitlines()) for _, after in pairs), default=0)
    if not pairs:
        raise SystemExit("no pass changed the module; nothing to diff")
    before: list[str] = []
    after: list[str] = []
    k = 0
    while len(before) < lines or len(after) < lines:
        old, new = pairs[k % len(pairs)]
        before += old.splitlines()
        after += new.splitlines()
        k += 1
    return "\n".join(before[:lines]) + "\n", "\n".join(after[:lines]) + "\n", largest


def best_ms(actions: dict[str, Callable[[], object]], repeats: int) -> dict[str, float]:
    """Best time of each action in ms, the actions interleaved round by round so that load from
    other processes on the machine falls on all of them alike."""
    times: dict[str, list[float]] = {name: [] for name in actions}
    for _ in range(repeats):
        for name, action in actions.items():
            started = time.perf_counter()
            action()
            times[name].append(time.perf_counter() - started)
    return {name: min(values) * 1000 for name, values in times.items()}


def long_line(lines: list[str], size: int) -> str:
    """One line of ``size`` characters made of real IR statements."""
    statements = " ".join(line.strip() for line in lines)
    return (statements * (size // len(statements) + 1))[:size]


def bump_numbers(line: str) -> str:
    """Every integer plus one: changes spread over the whole line."""
    return re.sub(r"\b\d+\b", lambda m: str(int(m[0]) + 1), line)


def one_word_changed(line: str) -> str:
    middle = line.index(" ", len(line) // 2) + 1
    return line[:middle] + "edited_" + line[middle:]


def seconds(action: Callable[[], object], repeats: int) -> float:
    """Best of ``repeats`` runs, in seconds."""
    return best_ms({"action": action}, repeats)["action"] / 1000


LONG_LINES = (("long_line_88k", 88_000), ("long_line_660k", 660_000))


def bounded_cases(
    trace: Trace, repeats: int, long_lines: tuple[tuple[str, int], ...] = LONG_LINES
) -> dict[str, float]:
    """The issue-19 texts: seconds for each and its ratio against a baseline timed here too."""
    snapshots = [trace.ir_after(p) for run in trace.runs for p in run.passes if p.changed and p.ir_after]
    ir_lines = max(snapshots, key=len).splitlines()
    half = len(ir_lines) // 2
    rules = NormalizeRules()
    token = re.compile(r"\s+|\w+|[^\w\s]")
    results: dict[str, float] = {}
    for name, size in long_lines:
        old = long_line(ir_lines, size)
        worst = ratio = 0.0
        for label, new in (
            ("changed throughout", bump_numbers(old)),
            ("one word changed", one_word_changed(old)),
        ):
            before = "\n".join([*ir_lines[:half], old, *ir_lines[half:]]) + "\n"
            after = "\n".join([*ir_lines[:half], new, *ir_lines[half:]]) + "\n"

            def views(before: str = before, after: str = after) -> None:
                diff = diff_texts(before, after, rules)
                list(terminal_lines(diff))
                html_table(diff)

            took = seconds(views, repeats)
            floor = seconds(lambda old=old, new=new: (token.findall(old), token.findall(new)), repeats)
            skipped = any(
                "word-level diff skipped" in text.plain for text in terminal_lines(diff_texts(before, after))
            )
            print(
                f"{size // 1000} KB line, {label}: {took:6.3f} s "
                f"({took / floor:.1f}x one tokenising pass; "
                f"word diff {'skipped, noted' if skipped else 'made'})"
            )
            if took > worst:
                worst, ratio = took, took / floor
        results[f"{name}_s"], results[f"{name}_ratio"] = worst, ratio
    old_lines = [ir_lines[k % len(ir_lines)] for k in range(20_000)]
    before = "\n".join(old_lines) + "\n"
    after = "\n".join("  " + line for line in old_lines) + "\n"
    took = seconds(lambda: diff_texts(before, after, rules).lines, repeats)
    floor = seconds(
        lambda: list(difflib.unified_diff(before.splitlines(True), after.splitlines(True))), repeats
    )
    rendered = seconds(lambda: list(terminal_lines(diff_texts(before, after, rules))), 1)
    print(
        f"20,000 re-indented lines: {took:6.3f} s for diff + records "
        f"({took / floor:.1f}x difflib.unified_diff); terminal lines {rendered:.2f} s"
    )
    results["reindent_20k_s"], results["reindent_20k_ratio"] = took, took / floor
    met = all(results[key] < 1 for key in ("long_line_88k_s", "reindent_20k_s"))
    print(f"goal: 88 KB line and 20,000 re-indented lines each under 1 s: {'met' if met else 'NOT met'}")
    return results


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--lines", type=int, default=5000)
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--bounded-repeats", type=int, default=3, help="repeats of the issue-19 texts")
    parser.add_argument("--smoke", action="store_true", help="run once, small (see above): for CI")
    args = parser.parse_args()
    if args.smoke:
        args.lines, args.repeats, args.bounded_repeats = 500, 2, 1

    trace = record(TARGETS[-1:] if args.smoke else TARGETS)
    before, after, largest = build_pair(trace, args.lines)
    print(
        f"largest real snapshot: {largest} lines; bench texts: {args.lines} lines each, "
        f"{len(before) + len(after)} characters"
    )
    rules = NormalizeRules()

    def plain_difflib() -> list[str]:
        return list(difflib.unified_diff(before.splitlines(True), after.splitlines(True)))

    def passdiff_full() -> str:
        return diff_texts(before, after, rules).unified()

    raw = NormalizeRules.none()
    timings = best_ms(
        {
            "difflib": plain_difflib,
            "passdiff": passdiff_full,
            "normalize": lambda: (normalize_ir(before, rules), normalize_ir(after, rules)),
            "diff": lambda: diff_texts(before, after, raw),
            "records": lambda: diff_texts(before, after, rules).lines,
        },
        args.repeats,
    )
    baseline, total, normalize, diff_only = (timings[k] for k in ("difflib", "passdiff", "normalize", "diff"))
    result = diff_texts(before, after, rules)
    unified = best_ms({"unified": result.unified}, args.repeats)["unified"]
    plain_lines = sum(1 for line in plain_difflib() if line[:1] in "+-" and line[:3] not in ("+++", "---"))
    ours_lines = result.added + result.removed
    print(f"difflib.unified_diff (raw texts):      {baseline:8.2f} ms  ({plain_lines} +/- lines)")
    print(
        f"passdiff normalize (both texts):       {normalize:8.2f} ms  (rules: {', '.join(rules.enabled())})"
    )
    print(f"passdiff line diff (no normalization): {diff_only:8.2f} ms")
    print(f"passdiff unified rendering:            {unified:8.2f} ms")
    print(
        f"passdiff normalize + diff + unified:   {total:8.2f} ms  (+{result.added} -{result.removed} lines, "
        f"{ours_lines} +/- lines)"
    )
    print(f"passdiff normalize + diff + DiffLine records (rich/HTML views): {timings['records']:8.2f} ms")
    ratio = total / baseline
    print(f"goal: < 100 ms and <= 2x difflib: {'met' if total < 100 and ratio <= 2 else 'NOT met'}")
    bounded = bounded_cases(trace, args.bounded_repeats, LONG_LINES[:1] if args.smoke else LONG_LINES)
    extra = " ".join(
        f"{key}={value:.3f}" if key.endswith("_s") else f"{key}={value:.1f}" for key, value in bounded.items()
    )
    print(f"RESULT ms_{args.lines}_lines={total:.1f} ratio_vs_difflib={ratio:.2f} {extra}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
