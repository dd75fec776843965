"""IR-aware diffs between passes, between runs and between targets, from irtrace traces.

The library API (no terminal code) that the ``passdiff`` command, passviz and the language
server share; ``passdiff.render`` holds the renderings.
"""

from __future__ import annotations

from irtrace.diff.compare import (
    MOVED,
    NOT_REACHED,
    ONLY_A,
    ONLY_B,
    SHARED,
    PassAlignment,
    RunComparison,
    align_passes,
    compare_runs,
    compare_targets,
    compare_traces,
    diff_pass,
    diff_span,
    key_label,
    label_in_run,
    pass_keys,
    resolve_pass,
)
from irtrace.diff.errors import DiffOutcome, PassdiffError
from irtrace.diff.normalize import NormalizeRules, normalize_ir
from irtrace.diff.summary import JSON_SCHEMA, DiffReport, PassDiff, report_document
from irtrace.diff.textdiff import (
    DiffLine,
    SideBySideRow,
    TextDiff,
    WordBudget,
    WordDiff,
    count_line_changes,
    diff_texts,
    diff_words,
    word_diff,
)

__all__ = [
    "JSON_SCHEMA",
    "MOVED",
    "NOT_REACHED",
    "ONLY_A",
    "ONLY_B",
    "SHARED",
    "DiffLine",
    "DiffOutcome",
    "DiffReport",
    "NormalizeRules",
    "PassAlignment",
    "PassDiff",
    "PassdiffError",
    "RunComparison",
    "SideBySideRow",
    "TextDiff",
    "WordBudget",
    "WordDiff",
    "align_passes",
    "compare_runs",
    "compare_targets",
    "compare_traces",
    "count_line_changes",
    "diff_pass",
    "diff_span",
    "diff_texts",
    "diff_words",
    "key_label",
    "label_in_run",
    "normalize_ir",
    "pass_keys",
    "report_document",
    "resolve_pass",
    "word_diff",
]
