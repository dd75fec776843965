"""An ``@autotune`` kernel called twice on a GPU program: once with its tunable given (TileLang
compiles that value, no tuning), once without (TileLang tunes; under ``--no-gpu`` the first config
is built). Prints ``block given 128`` and ``block tuned FIRST`` (the oracle)."""

import tilelang
import tilelang.language as T
import torch

CONFIGS = [{"block": 64}, {"block": 128}]


@tilelang.autotune(configs=CONFIGS)
@tilelang.jit(out_idx=[-1])
def double(N, block=None, dtype=T.float32):
    @T.prim_func
    def main(A: T.Tensor((N,), dtype), B: T.Tensor((N,), dtype)):
        with T.Kernel(T.ceildiv(N, block), threads=64) as bx:
            for i in T.Parallel(block):
                B[bx * block + i] = A[bx * block + i] * 2

    return main


if __name__ == "__main__":
    a = torch.randn(1024, device="cuda")
    torch.testing.assert_close(double(1024, block=128)(a), a * 2)
    print("block given 128", flush=True)
    torch.testing.assert_close(double(2048)(torch.randn(2048, device="cuda")).shape, (2048,))
    print(f"block tuned {CONFIGS[0]['block']}", flush=True)
