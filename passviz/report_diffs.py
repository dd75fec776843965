"""The report's diffs: every IR text stored once in the page, each diff drawn by the page's script
when it comes into view.

A coverage trace holds thousands of diffs of a few hundred distinct texts, most lines shared
between them. Pre-rendering every diff made the page 40 MB; here each distinct line is stored
once, each text as runs of line numbers, the whole gzip-compressed and base64-encoded, and a
diff is its opcodes (computed here, by passdiff, so the page shows what ``passdiff pass``
shows). The script decompresses with the browser's ``DecompressionStream`` and builds the diff
with DOM text nodes only, so trace text is never parsed as HTML.
"""

from __future__ import annotations

import base64
import gzip
import json
from pathlib import Path

from irtrace.diff import NormalizeRules, diff_texts
from irtrace.diff.normalize import normalize_ir
from irtrace.trace.model import Trace

RULES = NormalizeRules()
"""passdiff's default rules: what ``passdiff pass`` and every tool's ``+/-`` compare."""

CONTEXT = 3
"""Unchanged lines shown around each change (as ``diff -u``)."""

OPEN_LIMIT = 400
"""A diff with more changed lines than this starts folded (a codegen stage, a whole new text)."""


class TextStore:
    """Distinct texts, each kept once, split into lines that are also kept once."""

    def __init__(self) -> None:
        self._lines: dict[str, int] = {}
        self._texts: dict[str, int] = {}
        self._encoded: list[list[int]] = []
        self._html: dict[str, int] = {}

    def add(self, text: str) -> int:
        """The text's number in the page."""
        found = self._texts.get(text)
        if found is not None:
            return found
        runs: list[int] = []
        lines = text.split("\n")
        if lines[-1] == "":
            lines.pop()  # as passdiff splits them: the line numbers of its opcodes
        known = self._lines
        numbers = [known.get(line, -1) for line in lines]  # most lines are known: one lookup each
        for k, number in enumerate(numbers):
            if number < 0:
                number = numbers[k] = known.setdefault(lines[k], len(known))
            # Runs of consecutive line numbers: a text that mostly repeats an earlier one is a few runs.
            if runs and runs[-2] + runs[-1] == number:
                runs[-1] += 1
            else:
                runs += [number, 1]
        self._texts[text] = len(self._encoded)
        self._encoded.append(runs)
        return self._texts[text]

    def lazy(self, fragment: str) -> str:
        """A placeholder the script fills with ``fragment`` (HTML escaped here, in Python) when it
        comes near the window: pass lists, source maps and drawings stay compressed until seen."""
        number = self._html.setdefault(fragment, len(self._html))
        return f"<div class='lazyhtml' data-h='{number}'></div>"

    def encoded(self) -> str:
        """Base64 of the gzip of ``{"lines": [...], "texts": [[start, count, ...], ...], "html":
        [...]}``."""
        data = json.dumps(
            {"lines": list(self._lines), "texts": self._encoded, "html": list(self._html)},
            separators=(",", ":"),
        )
        return base64.b64encode(gzip.compress(data.encode("utf-8"), 6, mtime=0)).decode("ascii")


class DiffStore:
    """Diffs by the pair of normalized texts they compare: pairs repeat across the runs of one
    kernel, and across its targets once the target strings are masked (half of a coverage
    trace's pairs)."""

    def __init__(self, trace: Trace, texts: TextStore) -> None:
        self._trace = trace
        self._texts = texts
        self._normal: dict[str | None, str] = {None: ""}
        self._diffs: dict[tuple[str, str], tuple[int, int, str, int, tuple[int, int]]] = {}
        self.counts: dict[tuple[str, str], tuple[int, int]] = {}
        self.lazy = texts.lazy
        """``(added, removed)`` by the pair of texts, as ``passviz.model.line_counts`` caches them:
        the diff drawn is the diff counted, computed once."""

    def store_text(self, text: str) -> int:
        """A text shown whole (the IR a failed pass received)."""
        return self._texts.add(text)

    def _normalized(self, sha: str | None) -> str:
        if sha not in self._normal:
            self._normal[sha] = normalize_ir(self._trace.text(sha), RULES)
        return self._normal[sha]

    def diff(self, before: str | None, after: str | None) -> tuple[int, int, str, int]:
        """(old text's number, new text's number, the changed blocks as ``i1,i2,j1,j2;...``,
        changed lines). Texts are stored normalized, as passdiff compares them."""
        old, new = self._normalized(before), self._normalized(after)
        found = self._diffs.get((old, new))
        if found is None:
            # passdiff's default diff (``count_line_changes``), on texts normalized once each.
            diff = diff_texts(old, new, NormalizeRules.none())
            blocks = [op[1:] for op in diff.line_opcodes if op[0] != "equal"]
            found = (
                self._texts.add(old),
                self._texts.add(new),
                ";".join(",".join(str(n) for n in block) for block in blocks),
                diff.added + diff.removed,
                (diff.added, diff.removed),
            )
            self._diffs[(old, new)] = found
        if after is not None:
            self.counts[(before or "", after)] = found[4]
        return found[:4]


def texts_element(texts: TextStore) -> str:
    """The stored texts; base64 holds no character HTML would read as markup."""
    return f"<script type='application/octet-stream' id='passviz-texts'>{texts.encoded()}</script>"


STYLE = """
.diffbody { overflow-x: auto; font: 12px/1.4 ui-monospace, monospace; border: 1px solid #eee; }
.diffbody table { border-collapse: collapse; width: 100%; table-layout: fixed; }
.diffbody td { padding: 0 6px; white-space: pre-wrap; overflow-wrap: anywhere; vertical-align: top; }
.diffbody td.n { width: 4ch; color: #999; text-align: right; user-select: none; white-space: nowrap; }
.diffbody td.n, .diffbody td.s { font-variant-numeric: tabular-nums; }
.diffbody td.s { width: 1.5ch; color: #999; user-select: none; }
.diffbody tr.del td.t, .diffbody td.t.del { background: #ffeef0; }
.diffbody tr.ins td.t, .diffbody td.t.ins { background: #e6ffed; }
.diffbody td.t.re { background: #f3f0ff; } .diffbody tr.hunk td { background: #f1f8ff; color: #6f42c1; }
.diffbody .del, .diffbody .ins { color: inherit; font-weight: normal; }
.diffbody .del .w { background: #fdb8c0; } .diffbody .ins .w { background: #acf2bd; }
.diffbody td.gap { background: #fafafa; }
.diff > summary .hint { color: #888; font-size: 12px; }
pre.lazy { white-space: pre-wrap; overflow-wrap: anywhere; }
"""


def _script() -> str:
    """The script, with the context the Python side uses."""
    source = (Path(__file__).parent / "report.js").read_text(encoding="utf-8")
    return source.replace("CONTEXT_LINES", str(CONTEXT))


def script_element() -> str:
    """The page's one script: ours, inline (the page refers to nothing outside itself)."""
    return f"<script>{_script()}</script>"
