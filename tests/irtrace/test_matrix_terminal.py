"""``irtrace matrix`` on a 100-column terminal: every target and kernel readable, no cell cut."""

from __future__ import annotations

import re

import pytest
from rich.console import Console

from irtrace.ci.coverage import coverage_matrix
from irtrace.cli.matrix import matrix_renderable
from irtrace.trace.model import STATUS_OK

from .conftest import Coverage

WIDTH = 100


def rendered(coverage: Coverage, width: int) -> list[str]:
    console = Console(width=width, no_color=True, record=True, file=open("/dev/null", "w"))  # noqa: SIM115
    console.print(matrix_renderable(coverage_matrix(coverage.trace.runs), console))
    return console.export_text().splitlines()


@pytest.mark.slow
def test_matrix_at_100_columns_names_every_target_and_shows_every_run(coverage: Coverage) -> None:
    lines = rendered(coverage, WIDTH)
    assert all(len(line) <= WIDTH for line in lines)
    kernels = list(dict.fromkeys(run.kernel for run in coverage.trace.runs))
    targets = list(dict.fromkeys(run.target for run in coverage.trace.runs))
    assert len(targets) >= 15, "the coverage records every target"
    # At 100 columns the table is turned: one row per target, named in full, one cell per kernel.
    rows = {}
    for line in lines:
        match = re.match(r"^(?:\S+)?\s+(\S+:\S+|metal|ascend|c|llvm|webgpu)\s+(.*)$", line)
        if match and match.group(1) in targets:
            rows[match.group(1)] = match.group(2).split()
    assert set(rows) == set(targets), "every target is named in full on its own row"
    # Kernel names are column headings broken at "_": joined back, each is whole and in order.
    heading = [
        line for line in lines[: lines.index(next(line for line in lines if line.startswith("vendor")))]
    ]
    heading.append(next(line for line in lines if line.startswith("vendor")))
    starts = [m.start() for m in re.finditer(r"\S+", heading[-1])][2:]
    names = []
    for number, start in enumerate(starts):
        end = starts[number + 1] if number + 1 < len(starts) else None
        names.append("".join(h[start:end].strip() for h in heading))
    assert names == kernels
    for run in coverage.trace.runs:
        cell = rows[run.target][kernels.index(run.kernel)]
        assert (cell == "ok") == (run.status == STATUS_OK), (run.kernel, run.target, cell)
        assert re.fullmatch(r"ok|[✗…]\d+", cell), f"cell cut or unclear: {cell!r}"


@pytest.mark.slow
def test_matrix_on_a_wide_terminal_keeps_kernels_as_rows_with_full_target_names(coverage: Coverage) -> None:
    lines = rendered(coverage, 250)
    header = lines[0].split()
    targets = list(dict.fromkeys(run.target for run in coverage.trace.runs))
    assert header[0] == "kernel" and sorted(header[1:]) == sorted(targets)
    assert not any("…" in name for name in header)
