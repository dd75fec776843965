"""TileLang alone, no irtrace: flash attention's generated source depends on memory addresses.

Run it a few times: ``python tests/data/workspace_order.py [hip:gfx950]``. Each run lowers the
bundled flash attention once, untraced, in a fresh process and prints which ``workspace``
buffer each reduction uses. The four reduction workspaces all get the name ``workspace`` and
offset 0, and ``tl.MergeSharedMemoryAllocations`` (MakeAliasBindings) sorts its alias bindings by
offset, then name: the tie is left in the order of an ``unordered_map`` keyed by the buffers'
``VarNode`` addresses, so the codegen's ``workspace``/``workspace_1``/... follow where the heap put
them. With address randomization off and a fixed hash seed every run prints the same line:
``PYTHONHASHSEED=0 setarch -R python tests/data/workspace_order.py``. See docs/ci.md.
"""

import re
import sys
from pathlib import Path

import tilelang
import tvm

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
from flash_attention import flash_attention_fwd

kind, _, arch = (sys.argv[1] if len(sys.argv) > 1 else "hip:gfx950").partition(":")
target = tvm.target.Target({"kind": kind, "mcpu": arch} if kind == "hip" else {"kind": kind, "arch": arch})
with target:
    source = tilelang.lower(flash_attention_fwd(), target=target).kernel_source
print(" ".join(re.findall(r"\(\(float\*\)(workspace\w*)\)", source)))
