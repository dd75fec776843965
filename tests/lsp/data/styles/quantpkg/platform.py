"""Platform facts the kernels share: sizes and the FP8 format of the current target."""

import tilelang.language as T
from tvm.target import Target

HIDDEN = 2048
FP8_MAX = {"float8_e4m3fn": 448.0, "float8_e4m3fnuz": 240.0}


def determine_fp8_type():
    """The E4M3 variant the current target computes in: FNUZ on MI300 (gfx942), OCP elsewhere."""
    target = Target.current(allow_none=True)
    if target is not None and target.kind.name == "hip" and "gfx942" in str(target.attrs.get("mcpu", "")):
        return T.float8_e4m3fnuz
    return T.float8_e4m3fn
