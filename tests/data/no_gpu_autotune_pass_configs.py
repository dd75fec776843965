"""A tuner whose configs carry their own ``pass_configs`` (TileLang's
``examples/gemm/example_gemm_autotune_pass_configs.py`` does this): TileLang compiles each config
with those pass configs. Under ``--no-gpu`` the first config is built, with its pass configs.
Prints ``config FIRST`` and ``END`` (the oracle: the program's own view of the tuner's result)."""

import tilelang
import tilelang.language as T
from tilelang import PassConfigKey
from tilelang.autotuner import AutoTuner

CONFIGS = [
    {"block": 64, "pass_configs": {PassConfigKey.TL_DISABLE_WARP_SPECIALIZED: True}},
    {"block": 128, "pass_configs": {PassConfigKey.TL_DISABLE_WARP_SPECIALIZED: False}},
]


def double(block=None):
    @T.prim_func
    def main(A: T.Tensor((1024,), T.float32), B: T.Tensor((1024,), T.float32)):
        with T.Kernel(T.ceildiv(1024, block), threads=64) as bx:
            for i in T.Parallel(block):
                B[bx * block + i] = A[bx * block + i] * 2

    return main


if __name__ == "__main__":
    tuner = AutoTuner.from_kernel(kernel=double, configs=CONFIGS).set_compile_args(out_idx=[-1], target="auto")
    result = tuner.run(warmup=1, rep=1)
    print("config", result.config["block"], {str(k.value): v for k, v in result.config["pass_configs"].items()}, flush=True)
    print("END", flush=True)
