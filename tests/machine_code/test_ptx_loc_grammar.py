"""``ptx_source_lines`` on PTX written here: what a ``.loc`` chain resolves to, and what it refuses."""

from __future__ import annotations

from irtrace.lowering.machine_lines import ptx_source_lines

PTX = """
.visible .entry k(
)
{
\t.loc\t1 22 0
\tmov.u32 \t%r1, %tid.x;
\t.loc\t2 149 5, function_name $L__info_string0, inlined_at 1 29 3
\tmov.u32 \t%r2, %tid.y;
\t.loc\t3 194 11, function_name $L__info_string1, inlined_at 2 149 5
\tadd.s32 \t%r3, %r1, %r2;
$L__BB0_1:
\t.loc\t4 7 1, function_name $L__info_string2, inlined_at 5 9 9
\tret;
\t.loc\t1 0 0
\tret;
}
.visible .entry k2(
)
{
\t.loc\t3 194 11, function_name $L__info_string1, inlined_at 2 149 5
\tret;
}
\t.file\t1 "tvm_kernels.cu"
\t.file\t2 "intrin.h"
\t.file\t3 "cluster_sm90.hpp"
\t.file\t4 "other.h"
\t.file\t5 "more.h"
"""


def test_loc_chains_reach_the_kernel_source_or_nothing() -> None:
    lines = PTX.split("\n")
    found = {lines[n - 1].strip(): line for n, line in ptx_source_lines(PTX)}
    assert found == {
        "mov.u32 \t%r1, %tid.x;": 22,  # a .loc in the kernel source
        "mov.u32 \t%r2, %tid.y;": 29,  # inlined at a line of it
        "add.s32 \t%r3, %r1, %r2;": 29,  # inlined at a header line that was itself inlined at 29
    }
    # not mapped: a chain into files never inlined into the kernel source; line 0; and in k2,
    # a call site seen only in another function (each function's chains start afresh)


def test_a_kernel_source_of_another_name_maps_nothing() -> None:
    assert ptx_source_lines(PTX.replace('"tvm_kernels.cu"', '"evil.cu"')) == []
    assert ptx_source_lines("") == []
