"""Call sites whose sizes are written as tuple unpacking (``N, K = 256, 256``), integer arithmetic or
a config built from literals (a dict, a dataclass, a plain class) are read from the source alone,
and every value read is the one the program's own call passes: the oracle runs the file with each
kernel factory replaced by a function that notes its arguments. A config that anything may change
(written to, handed to a function, a method called) is never read."""

from __future__ import annotations

import inspect
import sys
import types
from typing import Any

import pytest

from irtrace.lowering.resolve.source import scan_kernels

CONFIGS = """
import tilelang.language as T
from dataclasses import dataclass, field


@dataclass
class MoeConfig:
    d_hidden: int = 7168
    d_expert: int = 2048
    n_routed_experts: int = 8
    batch_size: int = 1
    seq_len: int = field(default=4096)


class Tiles:
    block_M = 128
    block_N = 64


def kernel(M, N, block_M=64, block_N=64, dtype=T.float16):
    @T.prim_func
    def main(A: T.Tensor((M, N), dtype)):
        T.evaluate(0)

    return main


def unpacked(N, K, block_N, block_K):
    @T.prim_func
    def main(A: T.Tensor((N, K), T.float16)):
        T.evaluate(0)

    return main


def from_dict(M, N, block_M):
    @T.prim_func
    def main(A: T.Tensor((M, N), T.float16)):
        T.evaluate(0)

    return main


def from_dataclass(M, N, E):
    @T.prim_func
    def main(A: T.Tensor((M, N), T.float16)):
        T.evaluate(0)

    return main


def from_dict_call(M, N):
    @T.prim_func
    def main(A: T.Tensor((M, N), T.float16)):
        T.evaluate(0)

    return main


def mutated(M, N):
    @T.prim_func
    def main(A: T.Tensor((M, N), T.float16)):
        T.evaluate(0)

    return main


def handed_on(M, N):
    @T.prim_func
    def main(A: T.Tensor((M, N), T.float16)):
        T.evaluate(0)

    return main


def factory_field(M, N):
    @T.prim_func
    def main(A: T.Tensor((M, N), T.float16)):
        T.evaluate(0)

    return main


def touch(config):
    config["M"] = 4096


@dataclass
class WithList:
    sizes: list = field(default_factory=list)
    M: int = 16


def program():
    N, K = 256, 256
    block_N, block_K = 64, 2 * 32
    unpacked(N, K, block_N, block_K)
    kernel(1 << 10, K * 4, block_M=Tiles.block_M, block_N=Tiles.block_N)
    config = {"d_hidden": 7168, "n_tokens": 8192, "block": 128}
    from_dict(config["n_tokens"], config["d_hidden"] // 2, block_M=config["block"])
    moe = MoeConfig(d_expert=1024)
    from_dataclass(moe.batch_size * moe.seq_len, moe.d_expert, moe.n_routed_experts)
    sizes = dict(M=32, N=48)
    from_dict_call(sizes["M"], sizes["N"])
    changed = {"M": 1024, "N": 1024}
    changed["M"] = 2048
    mutated(changed["M"], changed["N"])
    passed = {"M": 1024, "N": 1024}
    touch(passed)
    handed_on(passed["M"], passed["N"])
    listed = WithList()
    factory_field(listed.M, len(listed.sizes))


program()
"""

READ = ("unpacked", "kernel", "from_dict", "from_dataclass", "from_dict_call")
"""Kernels whose call the source settles."""
NOT_READ = ("mutated", "handed_on", "factory_field")
"""Kernels whose call reads a config that may change, or a value that is not a literal."""


def program_calls(text: str) -> dict[str, dict[str, Any]]:
    """The arguments each factory is really called with, bound to its parameters (defaults left
    out, as the source shows the call): the file run with its factories replaced."""
    module = types.ModuleType("configs_under_test")
    sys.modules[module.__name__] = module  # dataclasses look their module up
    try:
        exec(compile(text.replace("\nprogram()\n", "\n"), "<configs>", "exec"), module.__dict__)
    finally:
        del sys.modules[module.__name__]
    namespace = module.__dict__
    calls: dict[str, dict[str, Any]] = {}
    for name in (*READ, *NOT_READ):
        signature = inspect.signature(namespace[name])

        def noted(*args: Any, _name: str = name, _signature: Any = signature, **kwargs: Any) -> None:
            calls[_name] = dict(_signature.bind(*args, **kwargs).arguments)

        namespace[name] = noted
    namespace["program"]()
    return calls


def test_unpacked_arithmetic_and_config_values_are_the_programs_own() -> None:
    calls = program_calls(CONFIGS)
    kernels = {k.name: k for k in scan_kernels(CONFIGS)}
    for name in READ:
        site = kernels[name].call_site
        assert site is not None, name
        read = dict(zip(kernels[name].params, site.args, strict=False)) | dict(site.kwargs)
        assert read == calls[name], name
    assert calls["mutated"]["M"] == 2048 and calls["handed_on"]["M"] == 4096  # the oracle saw the change
    for name in NOT_READ:
        assert kernels[name].call_site is None, name


@pytest.mark.parametrize(
    "hostile",
    [
        "a = b\nb = a\nkernel(a, 1)\n",  # a loop of names
        "N = 1 << 10**9\nkernel(N, 1)\n",  # a value no size has: never computed
        "N = 10**10**10\nkernel(N, 1)\n",
        "cfg = {'M': 1, 'M': 2}\nkernel(cfg['M'], 1)\n",  # a repeated key
        "cfg = {**other, 'M': 1}\nkernel(cfg['M'], 1)\n",
        "class C:\n    M = 1\nC.M = 2\nkernel(C.M, 1)\n",
        "class C:\n    def __getattr__(self, n):\n        return 5\n    M = 1\nkernel(C().M, 1)\n",
        "x = 1\nkernel(x // 0, 1)\n",
        "N, K = 1, 2, 3\nkernel(N, K)\n",
        "N, *K = 1, 2, 3\nkernel(N, 1)\n",
    ],
)
def test_settled_values_never_guess_on_hostile_text(hostile: str) -> None:
    head = CONFIGS[: CONFIGS.index("\ndef touch")]
    kernels = {k.name: k for k in scan_kernels(head + "\n" + hostile)}
    assert kernels["kernel"].call_site is None
