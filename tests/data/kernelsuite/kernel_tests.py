"""The library's test suite: each test lowers a kernel with TileLang's own API.

Each lowering appends ``TEST_ID<TAB>SHA<TAB>PID`` to the file ``KERNELSUITE_ORACLE`` names (SHA
the SHA-256 of TileLang's kernel source): the oracle a captured trace is checked against.
"""

import hashlib
import os

import pytest
import tilelang
from tilelang.backend.target import determine_target

from kernels import scale, tiled_copy


def lower(func):
    target = determine_target({"kind": "cuda", "arch": "sm_90"}, return_object=True)
    with target:
        source = tilelang.lower(func, target=target).kernel_source
    sha = hashlib.sha256(source.encode("utf-8")).hexdigest()
    test_id = os.environ["PYTEST_CURRENT_TEST"].rsplit(" ", 1)[0]
    with open(os.environ["KERNELSUITE_ORACLE"], "a") as oracle:  # one short append: xdist-safe
        oracle.write(f"{test_id}\t{sha}\t{os.getpid()}\n")
    return source


@pytest.mark.parametrize("block", [32, 64])
def test_copy(block):
    assert "__global__" in lower(tiled_copy(256, 256, block=block))


def test_scale():
    assert "__global__" in lower(scale(1024))
