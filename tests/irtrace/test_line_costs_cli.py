"""``irtrace show TRACE --lines KERNEL`` without nvcc: its errors (an unknown kernel, a trace without
machine code, options it does not go with), hostile counts in a trace, and the opcode grammar on
the SASS line forms nvdisasm prints. The counts themselves are checked against nvdisasm's line
table in tests/machine_code/test_sass_line_costs.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from irtrace.base.errors import ExitCode
from irtrace.cli.main import main
from irtrace.facts.instruction_classes import instruction_class, opcode_of
from irtrace.trace.model import Trace


@pytest.mark.parametrize(
    ("line", "opcode", "kind"),
    [
        (
            "        /*0440*/                   HGMMA.64x128x16.F32.BF16 R24, gdesc[UR8], RZ, !UPT ;",
            "HGMMA",
            "mma",
        ),
        ("        /*1be0*/              @!P0 HMMA.16816.F32.BF16 R4, R8, R12, R4 ;", "HMMA", "mma"),
        (
            "        /*0db0*/                   LDGSTS.E.BYPASS.128 [R51+0x1800], [R40.64] ;",
            "LDGSTS",
            "global_memory",
        ),
        (
            "        /*0300*/              @P0 UTMALDG.2D [UR8], [UR14], desc[UR16] ;",
            "UTMALDG",
            "global_memory",
        ),
        ("        /*2000*/                   STG.E.64 desc[UR4][R2.64], R6 ;", "STG", "global_memory"),
        ("        /*0a10*/                   LDSM.16.M88.4 R12, [R3] ;", "LDSM", "shared_memory"),
        ("        /*0a20*/              @!PT LDS.U.128 R4, [R2] ;", "LDS", "shared_memory"),
        ("        /*0290*/                   SYNCS.EXCH.64 URZ, [UR4], UR6 ;", "SYNCS", "barrier"),
        ("        /*0b00*/                   BAR.SYNC.DEFER_BLOCKING 0x0 ;", "BAR", "barrier"),
        ("        /*0c00*/                   WARPGROUP.DEPBAR.LE gsb0, 0x0 ;", "WARPGROUP", "barrier"),
        ("        /*0100*/                   BSSY.RECONVERGENT B0, `(.L_x_1) ;", "BSSY", "other"),
        ("        /*0010*/                   S2R R0, SR_TID.X ;", "S2R", "other"),
        ("        /*0020*/              @UP0 UIADD3 UR4, UR4, 0x1, URZ ;", "UIADD3", "other"),
    ],
)
def test_the_grammar_reads_nvdisasm_s_instruction_lines(line: str, opcode: str, kind: str) -> None:
    assert opcode_of(line) == opcode
    assert instruction_class(opcode) == kind


@pytest.mark.parametrize(
    "line", ["", ".L_x_1:", '        .headerflags    @"EF_CUDA_SM90"', "//-- .text.k --//"]
)
def test_lines_that_are_not_instructions_have_no_opcode(line: str) -> None:
    assert opcode_of(line) is None


def test_show_lines_says_what_to_record_and_refuses_unknown_kernels(
    gemm_trace: Trace, capsys: pytest.CaptureFixture[str]
) -> None:
    path = str(gemm_trace.path)
    assert main(["show", path, "--lines", "no_such_kernel"]) == ExitCode.NOT_FOUND
    assert "no_such_kernel is not in the trace; it holds: matmul" in capsys.readouterr().err
    assert main(["show", path, "--lines", "matmul"]) == ExitCode.NOT_FOUND
    err = capsys.readouterr().err
    assert "no SASS instructions per line" in err and "--machine-code --source-map" in err
    assert main(["show", path, "--lines", "matmul", "-k", "matmul"]) == ExitCode.USAGE
    assert "--lines goes alone" in capsys.readouterr().err
    assert main(["show", path, "--lines", "matmul", "--by-pass"]) == ExitCode.USAGE


def _with_counts(gemm_trace: Trace, folder: Path, costs: dict[str, object]) -> str:
    """The GEMM trace with a ``machine`` record for its sm_90 run whose SASS map holds ``costs``."""
    run = gemm_trace.find_run("matmul", "cuda:sm_90")
    assert gemm_trace.path is not None and run.source_sha256 is not None
    lines = Path(gemm_trace.path).read_text().splitlines()
    machine = {
        "record": "machine",
        "run": run.run_id,
        "line_maps": [
            {"stage": "sass", "ir": run.source_sha256, "source": run.source_sha256, "costs": costs}
        ],
    }
    footer = next(i for i, line in enumerate(lines) if '"record":"footer"' in line)
    lines.insert(footer, json.dumps(machine))
    out = folder / "counts.jsonl"
    out.write_text("\n".join(lines) + "\n")
    return str(out)


def test_hostile_counts_are_refused_or_shown_as_text(
    gemm_trace: Trace, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    zero = _with_counts(gemm_trace, tmp_path, {"lines": [{"file": "x.py", "line": 0, "counts": {"mma": 1}}]})
    assert main(["show", zero, "--lines", "matmul", "-t", "cuda:sm_90"]) == ExitCode.TRACE_FORMAT
    negative = _with_counts(gemm_trace, tmp_path, {"total": {"mma": -1}})
    assert main(["show", negative, "--lines", "matmul", "-t", "cuda:sm_90"]) == ExitCode.TRACE_FORMAT
    capsys.readouterr()
    kernel_file = str(next(iter({f for m in gemm_trace.runs[0].source_maps for f in m.files if "gemm" in f})))
    far = _with_counts(
        gemm_trace,
        tmp_path,
        {"lines": [{"file": kernel_file, "line": 10**6, "counts": {"global_memory": 3}}]},
    )
    assert main(["show", far, "--lines", "matmul", "-t", "cuda:sm_90"]) == ExitCode.OK
    out = capsys.readouterr().out
    (row,) = [line for line in out.splitlines() if line.split()[:1] == [str(10**6)]]
    assert row.split()[1:] == ["-", "3", "-", "-", "-", "3"]
