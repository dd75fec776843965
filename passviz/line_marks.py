"""The browser's Python lines: which rows of the code pane print a line of the kernel's file, from
the trace's source maps only (``irtrace.facts.source_map``; nothing is guessed from the text)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from irtrace.facts.source_map import RunMaps, kernel_files, origins_by_ir_line
from irtrace.trace.model import KernelRun, PassRecord, Trace
from passviz.widgets.code_view import IrRows, Row, UnifiedRows

Origins = dict[int, tuple[int, ...]]
"""IR line (from 1) -> lines of the kernel's file its statements carry."""


@dataclass(frozen=True)
class RunLineMaps:
    """One run's source maps, read for its kernel's file."""

    maps: RunMaps
    files: set[str]
    source_lines: int | None
    """lines of the kernel's file as the trace holds it (``None``: it holds none)"""

    def origins(self, trace: Trace, record: PassRecord, *, after: bool) -> Origins | None:
        """For the module after ``record`` (or the one it received); ``None`` without a map."""
        source_map = self.maps.produced(record) if after else self.maps.received(record)
        sha = (record.ir_after or record.ir_before) if after else record.ir_before
        if source_map is None or not source_map.placed or not self.files or sha is None:
            return None
        return origins_by_ir_line(source_map, self.files, trace.text(sha), self.source_lines)


def run_line_maps(run: KernelRun, source_lines: int | None) -> RunLineMaps | None:
    """``None`` when the trace holds no source maps for ``run``."""
    if not run.source_maps:
        return None
    return RunLineMaps(RunMaps(run), kernel_files(run), source_lines)


def gutter(origins: Origins | None, text: str) -> list[int | None] | None:
    """Per line of ``text``, the (smallest) kernel line it comes from: the ``L31`` column."""
    if origins is None:
        return None
    return [origins[n][0] if n in origins else None for n in range(1, text.count("\n") + 2)]


def rows_of_line(
    rows: Sequence[Row], line: int, after: Origins | None, before: Origins | None
) -> frozenset[int] | None:
    """0-based rows of an IR view (through ``after``) or a unified diff (removed rows through
    ``before``, the others through ``after``) that print ``line``; ``None``: no map, or a view
    of another kind."""
    if isinstance(rows, IrRows):
        if after is None:
            return None
        return frozenset(n - 1 for n, lines in after.items() if line in lines)
    if isinstance(rows, UnifiedRows):
        if after is None and before is None:
            return None
        new = {n for n, lines in (after or {}).items() if line in lines}
        old = {n for n, lines in (before or {}).items() if line in lines}
        return frozenset(
            k
            for k, item in enumerate(rows.items)
            if (item.new_no in new and item.kind != "delete")
            or (item.old_no in old and item.kind == "delete")
        )
    return None
