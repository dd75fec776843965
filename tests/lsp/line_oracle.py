"""What the bundled GEMM's ``T.gemm`` line became after each pass, by the route ORACLES.md gives for
source maps: ``tilelang.lower`` under a plain TVM instrument that visits the module after each pass
with TVM's ``post_order_visit``, reads each statement's span, and asks TVM's printer to underline
each statement of that line (``tests/irtrace/test_source_map.py``'s oracle). Shared by the
language server's hover test and the MCP tool's test; computed once per process."""

from __future__ import annotations

import functools
from dataclasses import dataclass

from tests.conftest import EXAMPLES
from tests.irtrace.test_source_map import PassTruth, oracle
from tests.passdiff.oracle import load_kernel_module

GEMM_FILE = EXAMPLES / "gemm.py"


@dataclass(frozen=True)
class LineOracle:
    line: int
    """The ``T.gemm`` line of ``examples/gemm.py``."""
    truths: list[PassTruth]
    """Each pass's truth, in ``run_before_pass`` order (the recorder's pass index)."""

    def at(self, index: int, label: str) -> PassTruth | None:
        """The truth of pass ``index`` when it is the pass ``label`` names; ``None`` for the passes
        TVM runs inside codegen, which the recorder numbers after its codegen step."""
        if index >= len(self.truths):
            return None
        truth = self.truths[index]
        name = label.split("#", 1)[0]
        return truth if truth.name in (name, "pass_fn") else None  # pass_fn: named by its factory

    def spanned(self) -> list[int]:
        """The passes after which a statement carries the line."""
        return [i for i, truth in enumerate(self.truths) if truth.first_lines.get(self.line)]


@functools.cache
def gemm_line_oracle(target: str = "cuda:sm_90a") -> LineOracle:
    """``matmul()`` (its defaults, as the language server analyzes the file) lowered for ``target``."""
    import tilelang
    import tvm

    from irtrace.lowering.tvm_targets import make_tvm_target
    from irtrace.targets.backends import get_target

    line = next(n for n, text in enumerate(GEMM_FILE.read_text().splitlines(), start=1) if "T.gemm(" in text)
    truths: list[PassTruth] = []
    func = load_kernel_module(GEMM_FILE).matmul()
    tvm_target = make_tvm_target(get_target(target))
    with (
        tvm.transform.PassContext(opt_level=3, instruments=[oracle(str(GEMM_FILE), {line}, truths)]),
        tvm_target,
    ):
        tilelang.lower(func, target=tvm_target)
    return LineOracle(line, truths)


@functools.cache
def gemm_source_lines_by_directive(line: int, target: str = "cuda:sm_90a") -> tuple[str, set[int]]:
    """``matmul()``'s CUDA source from plain ``tilelang.lower``, and the lines of it that TileLang's
    own codegen, with its ``tl.emit_line_directives`` config, puts under a ``#line`` directive
    naming ``line`` of the GEMM's file (as a C preprocessor would read the directives: each one
    applies to the lines after it, up to the next)."""
    import re

    import tilelang
    import tvm

    from irtrace.lowering.tvm_targets import make_tvm_target
    from irtrace.targets.backends import get_target

    tvm_target = make_tvm_target(get_target(target))
    sources = []
    for directives in (False, True):
        func = load_kernel_module(GEMM_FILE).matmul()
        config = {"tl.emit_line_directives": True} if directives else {}
        with tvm.transform.PassContext(opt_level=3, config=config), tvm_target:
            sources.append(tilelang.lower(func, target=tvm_target).kernel_source)
    plain, annotated = sources
    under: set[int] = set()
    current: tuple[int, str] | None = None
    number = 0
    for text in annotated.split("\n"):
        directive = re.fullmatch(r'#line (\d+) "(.*)"', text)
        if directive is not None:
            current = (int(directive[1]), directive[2])
            continue
        number += 1
        if current is not None and current[0] == line and current[1].endswith(GEMM_FILE.name):
            under.add(number)
    return plain, under
