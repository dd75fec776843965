"""The backend coverage matrix: which kernel lowers on which target, and why not where it fails.

Built from a trace alone (no tilelang): one cell per kernel x target with ``ok``, the failing
pass and the error's headline. Failures that share a root cause (the same pass and the same
message once target details are masked) are grouped, so a missing operator on one backend shows
once however many kernels it stops.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from irtrace.targets.backends import TARGETS
from irtrace.trace.model import STATUS_FAILED, STATUS_OK, KernelRun, PassRecord

OK = "ok"
FAILED = "failed"
CUT_SHORT = "incomplete"

_TARGET_JSON = re.compile(r"\{\"kind\":\s*\"[^\"]*\".*?(\}|$)")
_NOISE_LINE = re.compile(r"^\s*(\||\^|~|File \"|at |Stack trace|\d+: |Traceback)")
_CHECK_FAILED = re.compile(r"Check failed: (.*? : |\(.*?\) is false: )")
_TARGET_NAME = re.compile(r"target `[^`]+`")


@dataclass(frozen=True)
class Cause:
    """One root cause of failures: a pass and an error headline, with where it struck."""

    number: int
    """1-based, in order of first appearance; the matrix's footnote number."""
    failed_pass: str | None
    """The innermost pass that failed; ``None`` when the kernel could not be built."""
    headline: str
    """The error's first meaningful line, target details masked."""
    cells: tuple[tuple[str, str], ...] = ()
    """Every (kernel, target) it stopped."""


@dataclass(frozen=True)
class Cell:
    """One kernel on one target."""

    status: str
    """``ok``, ``failed`` or ``incomplete`` (the recording was cut short)."""
    failed_pass: str | None = None
    cause: int | None = None
    """The number of the cause, for failures."""
    lower_ms: float | None = None


@dataclass(frozen=True)
class CoverageMatrix:
    """Kernels x targets; a missing cell means the pair was not recorded."""

    kernels: tuple[str, ...]
    targets: tuple[str, ...]
    cells: dict[tuple[str, str], Cell] = field(default_factory=dict)
    causes: tuple[Cause, ...] = ()

    @property
    def failures(self) -> int:
        return sum(cell.status != OK for cell in self.cells.values())


def error_headline(error: str | None) -> str:
    """The first line of an error that says what went wrong, without TVM's check prefix,
    backtrace lines or the target's JSON (``<target>`` instead)."""
    for line in (error or "").splitlines():
        text = line.strip()
        if not text or _NOISE_LINE.match(line):
            continue
        text = _CHECK_FAILED.sub("", text)
        text = _TARGET_JSON.sub("<target>", text)
        text = _TARGET_NAME.sub("target `<target>`", text)
        return text[:240]
    return "failed without a message"


def failing_pass(run: KernelRun) -> PassRecord | None:
    """The innermost failed pass: its ancestors fail with it and carry the same error."""
    failed = [p for p in run.passes if p.failed]
    return max(failed, key=lambda p: (p.depth, p.index)) if failed else None


def _target_order(name: str) -> tuple[int, str]:
    order = list(TARGETS)
    return (order.index(name), name) if name in order else (len(order), name)


def coverage_matrix(runs: Sequence[KernelRun]) -> CoverageMatrix:
    """The matrix of ``runs``; a kernel x target recorded twice shows its last run."""
    kernels = tuple(dict.fromkeys(run.kernel for run in runs))
    targets = tuple(sorted(dict.fromkeys(run.target for run in runs), key=_target_order))
    cells: dict[tuple[str, str], Cell] = {}
    cause_cells: dict[tuple[str | None, str], list[tuple[str, str]]] = {}
    for run in runs:
        key = (run.kernel, run.target)
        lower_ms = run.total_s * 1000 if run.total_s is not None else None
        if run.status == STATUS_OK:
            cells[key] = Cell(OK, lower_ms=lower_ms)
            continue
        failed = failing_pass(run)
        error = (failed.error if failed is not None else None) or run.error
        root = (failed.name if failed is not None else None, error_headline(error))
        cause_cells.setdefault(root, []).append(key)
        status = FAILED if run.status == STATUS_FAILED else CUT_SHORT
        number = list(cause_cells).index(root) + 1
        cells[key] = Cell(status, root[0], number, lower_ms)
    causes = tuple(
        Cause(number, failed_pass, headline, tuple(where))
        for number, ((failed_pass, headline), where) in enumerate(cause_cells.items(), start=1)
    )
    return CoverageMatrix(kernels, targets, cells, causes)


def cell_text(cell: Cell | None) -> str:
    """What a cell shows: ``ok``, ``✗ pass (N)`` or blank for a pair not recorded."""
    if cell is None:
        return ""
    if cell.status == OK:
        return "ok"
    where = cell.failed_pass or "build"
    mark = "cut short" if cell.status == CUT_SHORT else "✗"
    return f"{mark} {where} ({cell.cause})"


def matrix_markdown(matrix: CoverageMatrix) -> str:
    """A Markdown table and a numbered list of causes, fit for a CI job summary or a README."""
    header = "| kernel | " + " | ".join(f"`{t}`" for t in matrix.targets) + " |"
    rule = "| --- |" + " --- |" * len(matrix.targets)
    rows = [
        f"| `{kernel}` | "
        + " | ".join(_escape_cell(cell_text(matrix.cells.get((kernel, t)))) for t in matrix.targets)
        + " |"
        for kernel in matrix.kernels
    ]
    lines = [header, rule, *rows]
    if matrix.causes:
        lines += ["", "Failures, one line per root cause:", ""]
        for cause in matrix.causes:
            where = f"`{cause.failed_pass}`" if cause.failed_pass else "building the kernel"
            pairs = ", ".join(f"{k} on {t}" for k, t in cause.cells)
            lines.append(f"{cause.number}. {where}: {_escape_cell(cause.headline)} ({pairs})")
    return "\n".join(lines) + "\n"


def _escape_cell(text: str) -> str:
    return text.replace("|", "\\|")


def matrix_document(matrix: CoverageMatrix) -> dict[str, Any]:
    """The matrix as JSON: kernels, targets, one cell per recorded pair, and the causes."""
    return {
        "kernels": list(matrix.kernels),
        "targets": list(matrix.targets),
        "cells": [
            {
                "kernel": kernel,
                "target": target,
                "status": cell.status,
                "failed_pass": cell.failed_pass,
                "cause": cell.cause,
                "lower_ms": cell.lower_ms,
            }
            for (kernel, target), cell in matrix.cells.items()
        ],
        "causes": [
            {
                "number": cause.number,
                "failed_pass": cause.failed_pass,
                "headline": cause.headline,
                "cells": [{"kernel": k, "target": t} for k, t in cause.cells],
            }
            for cause in matrix.causes
        ],
    }
