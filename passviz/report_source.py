"""The report's Python lines: per run recorded with source maps, the kernel's source with each line
that some pass's IR came from clickable; the page's script then lists that line's IR lines after
every pass and marks them in the run's diffs (report.js, "Python lines").

Only the trace's ``srcmap`` records say where a line went (docs/source-maps.md): a run without
them shows no mapping, and says how to record one. Entries naming IR lines past their text, lines
past the kernel's file, or another file are left out (``origins_by_ir_line``).
"""

from __future__ import annotations

import html
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from irtrace.facts.instruction_classes import CLASS_TITLES, CLASSES, line_counts, run_line_costs, total
from irtrace.facts.source_map import (
    NOT_RUN,
    AuthorLines,
    RunMaps,
    author_lines,
    input_map,
    kernel_files,
    origins_by_ir_line,
    pass_maps,
    used_by_words,
)
from irtrace.trace.model import KernelRun, PassRecord, Trace
from irtrace.trace.schema import SourceMapRecord
from passviz.source_map import MAX_SOURCE_CHARS, KernelSource

NO_MAPS = (
    "Python lines: this run was recorded without source maps; <code>irtrace record --source-map</code> "
    "records which Python line each IR line comes from, and this report then highlights them."
)

NO_KERNEL_LINES = "Python lines: no statement of this run's source maps carries a line of the kernel's file."

STYLE = """
.pysrc { display: grid; grid-template-columns: minmax(0, 1fr) minmax(0, 1fr); gap: 1em; }
.pysrc pre { margin: 0; background: #fafafa; border: 1px solid #eee; padding: .5em; overflow-x: auto;
  font-size: 12px; }
.pysrc [data-py] { cursor: pointer; display: inline-block; width: 100%; background: #eef4fb; }
.pysrc [data-py]:hover { background: #dbe8f7; } .pysrc [data-py].chosen { background: #ffe08a; }
.pysrc .n { color: #5f87af; user-select: none; }
.pythrough h4 { font-size: 12px; margin: .6em 0 .2em; font-weight: 600; }
.pythrough pre span { display: block; }
.pyhit, .diffbody td.t.pyhit { background: #ffe08a !important; }
.pysass { font-weight: 600; }
.pythrough .carried::after { content: "  (carried)"; color: #8a6d00; }
.pysrc [data-py].notrun { background: #f3f3f3; color: #888; }
.pythrough .pyvalue { color: #8a6d00; }
"""


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


@dataclass
class RunSourceMaps:
    """A run's maps as the page holds them: each distinct map once, as Python line -> IR lines."""

    maps: list[dict[int, list[int]]] = field(default_factory=list)
    numbers: dict[int, int] = field(default_factory=dict)
    """``id`` of a ``SourceMapRecord`` -> its number in ``maps``"""
    through: dict[int, list[list[Any]]] = field(default_factory=dict)
    """Python line -> ``[first index, last index, first label, last label, anchor, text number,
    map number]`` per run of passes after which it printed the same lines: the IR lines are the
    map's, held once in ``maps`` (a list per entry would repeat them for every run of passes)"""
    carried: list[dict[int, list[int]]] = field(default_factory=list)
    """per map in ``maps``: Python line -> those of its IR lines carried (over a pass that dropped
    the span, or inside a block of the line: docs/source-maps.md)"""


class SourceLines:
    """The Python-lines section of one run, and the attributes its diffs carry."""

    def __init__(self, trace: Trace, run: KernelRun, store_text: Callable[[str], int]) -> None:
        self.trace, self.run = trace, run
        self._store_text = store_text
        files = kernel_files(run) if run.source_maps else set()
        kernel_file = trace.kernel_file(run)
        if kernel_file is not None and len(kernel_file) > MAX_SOURCE_CHARS:
            kernel_file = None  # not shown either (``kernel_source``)
        self.source = tuple(kernel_file.splitlines()) if kernel_file is not None else None
        self.enabled = bool(files) and self.source is not None
        self._files = files
        self._maps = RunMaps(run) if self.enabled else None
        self.data = RunSourceMaps()
        self.facts = author_lines(trace, run) if self.enabled else AuthorLines()
        self._by_content: dict[tuple[tuple[int, tuple[int, ...], tuple[int, ...]], ...], int] = {}

    def _number(self, source_map: SourceMapRecord | None, sha: str | None) -> int | None:
        if source_map is None or sha is None or not source_map.placed or self.source is None:
            return None
        found = self.data.numbers.get(id(source_map))
        if found is None:
            text = self.trace.text(sha)
            by_ir = origins_by_ir_line(source_map, self._files, text, len(self.source))
            spanned = origins_by_ir_line(source_map, self._files, text, len(self.source), carried=False)
            by_py: dict[int, list[int]] = {}
            carried: dict[int, list[int]] = {}
            for ir, lines in sorted(by_ir.items()):
                for py in lines:
                    by_py.setdefault(py, []).append(ir)
                    if py not in spanned.get(ir, ()):
                        carried.setdefault(py, []).append(ir)
            for py, users in self.facts.value_users.items():  # shown with its readers' IR
                irs = sorted({ir for user in users for ir in by_py.get(user, ())})
                if irs and py not in by_py:
                    by_py[py] = irs
                    carried[py] = sorted({ir for user in users for ir in carried.get(user, ())})
            by_py = dict(sorted(by_py.items()))
            key = tuple((py, tuple(irs), tuple(carried.get(py, ()))) for py, irs in sorted(by_py.items()))
            found = self._by_content.get(key)
            if found is None:
                found = self._by_content[key] = len(self.data.maps)
                self.data.maps.append(by_py)
                self.data.carried.append(carried)
            self.data.numbers[id(source_map)] = found
        return found

    def diff_attributes(self, record: PassRecord) -> str:
        """``data-run``, ``data-pya`` and ``data-pyb`` of a pass's diff: the maps of the module it
        received and of the one it produced (nothing when either has none)."""
        if self._maps is None:
            return ""
        before = self._number(self._maps.received(record), record.ir_before)
        after = self._number(self._maps.produced(record), record.ir_after)
        if before is None and after is None:
            return ""
        return (
            f" data-run='run{self.run.run_id}' data-pya='{'' if before is None else before}'"
            f" data-pyb='{'' if after is None else after}'"
        )

    def section(self, anchor: Callable[[PassRecord], str | None], shown: KernelSource | None) -> str:
        """The kernel's source with its mapped lines clickable, the panel the script fills, and
        the maps (numbers only) as JSON."""
        if shown is None:
            return ""
        note = f"<p class='unchanged'>{NO_KERNEL_LINES if self.run.source_maps else NO_MAPS}</p>"
        if self.source is None:
            return note
        first, last = shown.first, min(shown.last, len(self.source) - 1)
        if not self.enabled:  # the recorded source, with nothing to click
            rows = [
                f"<span class='n'>{n + 1:>4}</span> {_semantic(self.source[n])}"
                for n in range(first, last + 1)
            ]
            return (
                f"<details><summary>The kernel's source as the trace recorded it: <code>{_e(shown.name)}"
                f"</code></summary>{note}<pre class='pysource'>{chr(10).join(rows)}</pre></details>"
            )
        self._collect(anchor)
        mapped = set(self.data.through) | set(self.facts.skipped)
        rows = []
        for number in range(first, last + 1):
            text = f"<span class='n'>{number + 1:>4}</span> {_semantic(self.source[number])}"
            clickable = f" data-py='{number + 1}'" if number + 1 in mapped else ""
            if self.facts.not_run(number + 1):
                clickable += f" class='notrun' title='{_e(NOT_RUN.format(line=number + 1))}'"
            rows.append(f"<span{clickable}>{text}</span>")
        payload: dict[str, Any] = {
            "maps": [{str(py): irs for py, irs in m.items()} for m in self.data.maps],
            "carried": [{str(py): irs for py, irs in m.items()} for m in self.data.carried],
            "through": {str(py): entries for py, entries in self.data.through.items()},
            "values": {
                str(py): used_by_words(users)
                for py, users in self.facts.value_users.items()
                if py in self.data.through
            },
            "not_run": {str(py): NOT_RUN.format(line=py) for py in self.facts.skipped},
        }
        sass = self._sass_counts()
        if sass is not None:
            payload["sass"] = sass
        data = json.dumps(payload, separators=(",", ":")).replace("<", "\\u003c").replace(">", "\\u003e")
        run_id = f"run{self.run.run_id}"
        newline = "\n"
        return (
            f"<details open><summary>Python lines through the passes: click a line of "
            f"<code>{_e(shown.name)}</code> for the IR lines it became after every "
            "pass (highlighted here and in the diffs below)</summary>"
            "<p>Exact, from the spans TileLang set on the statements (the trace's source maps): an IR "
            "line is listed when a statement it prints carries the Python line, or (marked carried) "
            "is provably that line's statement without a span of it: carried over a pass that "
            "dropped the span, or inside a block of that line. A line that made no statement but "
            "binds a value shows the IR of the lines reading it, and says so; a line the frontend "
            "did not run (a branch Python left out) says that. Lines no statement carries are not "
            "clickable.</p>"
            f"<div class='pysrc' data-run='{run_id}'><pre class='pysource'>{newline.join(rows)}</pre>"
            "<div class='pythrough'><p class='unchanged'>Choose a line.</p></div></div>"
            f"<script type='application/json' class='pymap' data-run='{run_id}'>{data}</script>"
            "</details>"
        )

    def _sass_counts(self) -> dict[str, Any] | None:
        """The SASS instructions per line of the kernel's file, by class, for the panel (``None``
        when the trace does not count them): ``{"classes": [...], "lines": {"38": [0, 64, ...]}}``,
        each list the classes' counts and then the total."""
        costs = run_line_costs(self.trace, self.run)
        if costs is None or self.source is None:
            return None
        lines: dict[str, list[int]] = {}
        for item in costs.lines:
            if item.file in self._files and item.line <= len(self.source):
                counts = line_counts(costs, self._files, item.line)
                lines[str(item.line)] = [*(getattr(counts, name) for name in CLASSES), total(counts)]
        return {"classes": [CLASS_TITLES[name] for name in CLASSES], "lines": lines}

    def _collect(self, anchor: Callable[[PassRecord], str | None]) -> None:
        """For each Python line, the passes after which it printed, consecutive passes printing the
        same text and lines taken together (as ``irtrace ir --line``), the input module first."""
        items: list[tuple[int, str, str, str | None, SourceMapRecord | None]] = []
        if self.run.input_ir:
            items.append((-1, "input", "", None, input_map(self.run)))
        items += [
            (p.record.index, p.label, anchor(p.record) or "", p.record.ir_after, p.source_map)
            for p in pass_maps(self.run)
        ]
        last_seen: dict[int, tuple[str | None, list[int]]] = {}
        previous_index = -2
        for index, label, link, sha, source_map in items:
            number = self._number(source_map, sha if source_map is not None else None)
            by_py = self.data.maps[number] if number is not None else {}
            for py, irs in by_py.items():
                entries = self.data.through.setdefault(py, [])
                previous = last_seen.get(py)
                if previous == (sha, irs) and entries and entries[-1][1] == previous_index:
                    entries[-1][1], entries[-1][3] = index, label
                    continue
                entries.append(
                    [index, index, label, label, link, self._store_text(self.trace.text(sha)), number]
                )
                last_seen[py] = (sha, irs)
            for py in set(last_seen) - set(by_py):
                del last_seen[py]
            previous_index = index


def _semantic(line: str) -> str:
    from passviz.semantics import semantic_html

    return semantic_html(line)
