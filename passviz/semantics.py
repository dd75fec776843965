"""What a line of IR or kernel source does, for colouring: tile operators, synchronization and
lowered hardware intrinsics, as TileLang's Pass Visualizer tells them apart.

Plain regular expressions over one line, so the browser can colour only the lines on screen and
the HTML report can mark the same spans. No Textual or rich here.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass

TILE_OP = "tile"
SYNC = "sync"
INTRINSIC = "intrinsic"


@dataclass(frozen=True)
class Category:
    name: str
    title: str
    """What the legend says."""
    colour: str
    """Foreground colour on the browser's dark background."""
    light_colour: str
    """The same hue, darker, for the report's white background."""
    pattern: re.Pattern[str]


CATEGORIES: tuple[Category, ...] = (
    Category(
        SYNC,
        "synchronization: barriers, fences, waits, commits",
        "#ff9e3b",
        "#b35900",
        # Calls only (a name followed by "(" or "<"), so a barrier buffer's name is not coloured.
        re.compile(
            r"\b(?:T\.|tl::|tl\.)?\w*(?:barrier|Barrier|fence|(?<!a)sync|arrive|wait|commit_group|expect_tx)\w*"
            r"(?=\s*[(<])"
        ),
    ),
    Category(
        INTRINSIC,
        "lowered hardware intrinsics: PTX, WGMMA, TMA, MFMA, simdgroup, tl:: device functions",
        "#d16dff",
        "#8a2be2",
        re.compile(
            r"\b(?:T\.(?:ptx_\w+|tvm_mfma\w*|mma\w*|tma_load\w*|tma_store\w*|simdgroup_\w+"
            r"|make_filled_simdgroup_matrix|\w*wgmma\w*|\w*descriptor\w*|set_max_nreg|tl_shuffle_elect"
            r"|warpgroup_reg_\w+|call_extern|call_pure_extern|call_intrin|tvm_warp_shuffle\w*)"
            r"|tl::\w+|__builtin_\w+|__shfl\w*|simdgroup_\w+|AscendC::\w+)(?=\s*[(<])"
        ),
    ),
    Category(
        TILE_OP,
        "tile operators: T.copy, T.gemm, T.fill, T.reduce, T.Parallel, T.Pipelined...",
        "#3ddbd9",
        "#0a7e8c",
        re.compile(
            r"\bT\.(?:copy|gemm\w*|fill|clear|reduce\w*|cumsum|atomic_\w+|Parallel|Pipelined|Persistent"
            r"|tma_copy|c2d_im2col|finalize_reducer|annotate_layout|use_swizzle)\b"
        ),
    ),
)
"""In priority order: where two match the same characters, the first wins."""

BY_NAME = {category.name: category for category in CATEGORIES}


def semantic_spans(line: str) -> list[tuple[int, int, str]]:
    """``(start, end, category)`` of every operator in ``line``, in order, not overlapping."""
    if not any(mark in line for mark in ("T.", "tl", "__", "simdgroup", "AscendC", "(")):
        return []
    taken: list[tuple[int, int, str]] = []
    for category in CATEGORIES:
        for match in category.pattern.finditer(line):
            start, end = match.span()
            if all(end <= a or start >= b for a, b, _ in taken):
                taken.append((start, end, category.name))
    return sorted(taken)


def semantic_html(line: str) -> str:
    """``line`` escaped for HTML, with each operator in ``<span class="op-CATEGORY">``."""
    out = []
    position = 0
    for start, end, name in semantic_spans(line):
        out.append(html.escape(line[position:start]))
        out.append(f'<span class="op-{name}">{html.escape(line[start:end])}</span>')
        position = end
    out.append(html.escape(line[position:]))
    return "".join(out)


def semantic_css() -> str:
    """The report's colours for ``semantic_html`` spans."""
    return " ".join(f".op-{c.name} {{ color: {c.light_colour}; font-weight: 600; }}" for c in CATEGORIES)
