"""A launcher that exits while the process it started is still alive (a detached worker).

``python outliving_child.py RELEASE``: starts itself as a child, waits until the child has
lowered a kernel, and exits. The child prints ``lowered SHA`` (the SHA-256 of TileLang's kernel
source) and lives on until the file RELEASE exists.
"""

import hashlib
import os
import subprocess
import sys
import time

if len(sys.argv) > 2 and sys.argv[2] == "child":
    import tilelang
    from misbehaving import copy
    from tilelang.backend.target import determine_target

    target = determine_target({"kind": "cuda", "arch": "sm_90"}, return_object=True)
    with target:
        source = tilelang.lower(copy(8192, 128), target=target).kernel_source
    print("lowered", hashlib.sha256(source.encode("utf-8")).hexdigest(), flush=True)
    while not os.path.exists(sys.argv[1]):
        time.sleep(0.05)
else:
    here = os.path.dirname(os.path.abspath(__file__))
    child = subprocess.Popen(
        [sys.executable, os.path.abspath(__file__), sys.argv[1], "child"],
        cwd=here,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,  # else whoever reads ours waits for the child too
        text=True,
    )
    print(child.stdout.readline(), end="", flush=True)  # the child's oracle line, once it lowered
