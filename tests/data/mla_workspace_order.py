"""TileLang alone, no irtrace: the paged MLA decode kernel's source depends on memory addresses.

Run it a few times: ``python tests/data/mla_workspace_order.py EXAMPLES/deepseek_mla/example_mla_decode_paged.py``
(tile-ai/tilelang's example, at the sizes its ``__main__`` gives). Each run lowers the kernel once
for ``cuda:sm_90a``, untraced, in a fresh process and prints which ``workspace`` buffer each of its
two reductions uses. ``tl.MergeSharedMemoryAllocations`` leaves the two tied workspaces in the order
of their ``VarNode`` addresses (as flash attention's on HIP: ``workspace_order.py``, docs/ci.md), so
``workspace_1 workspace`` and ``workspace workspace_1`` both come (measured 2026-12-07: 1 run in 6
gave the second).
"""

import importlib.util
import re
import sys

import tilelang
import tvm

spec = importlib.util.spec_from_file_location("example_mla_decode_paged", sys.argv[1])
assert spec is not None and spec.loader is not None
example = importlib.util.module_from_spec(spec)
spec.loader.exec_module(example)
# batch 128, 128 query heads, 1 kv head, cache 8192 + 2 i padded to 8448, dv 512, dpe 64
func = example.mla_decode_tilelang.get_tir(128, 128, 1, 8448, 512, 64, 64, 64, 1, 64, 576**-0.5)
target = tvm.target.Target({"kind": "cuda", "arch": "sm_90a"})
with target:
    source = tilelang.lower(func, target=target).kernel_source
print(" ".join(re.findall(r"\(\(float\*\)(workspace\w*)\)", source)))
