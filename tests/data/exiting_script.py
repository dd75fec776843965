"""A script that lowers a small kernel, then ends the way its first argument says.

``os_exit N`` calls ``os._exit(N)`` (no cleanup, no atexit), ``keyboard_interrupt`` raises
``KeyboardInterrupt`` itself (no Ctrl-C was pressed), ``sys_exit N`` calls ``sys.exit(N)``.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import tilelang
from misbehaving import copy
from tilelang.backend.target import determine_target

target = determine_target({"kind": "cuda", "arch": "sm_90"}, return_object=True)
with target:
    tilelang.lower(copy(), target=target)
how = sys.argv[1]
if how == "os_exit":
    os._exit(int(sys.argv[2]))
if how == "keyboard_interrupt":
    raise KeyboardInterrupt
if how == "sys_exit":
    sys.exit(int(sys.argv[2]))
