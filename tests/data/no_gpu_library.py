"""A kernel library as published ones are written (flash-qla 0.1.3 does each of these): it picks
its kernels at import by ``tilelang.contrib.nvcc.get_target_compute_version()``, runs each op
inside ``with torch.cuda.device(tensor.device.index):`` and asks
``torch.cuda.is_current_stream_capturing()`` before caching. Without a GPU the import raises;
under ``irtrace run --no-gpu`` it runs to its end.

Prints ``arch X.Y`` (the capability it picked), ``built NAME`` for its kernel and ``END``.
"""

import tilelang
import tilelang.contrib.nvcc
import tilelang.language as T
import torch

ARCH = tilelang.contrib.nvcc.get_target_compute_version()
print(f"arch {ARCH}", flush=True)
WIDTH = 256 if ARCH == "9.0" else 128


@tilelang.jit(out_idx=[-1])
def double(N, dtype=T.float16):
    @T.prim_func
    def main(X: T.Tensor((N,), dtype), Y: T.Tensor((N,), dtype)):
        with T.Kernel(T.ceildiv(N, WIDTH), threads=128) as bx:
            for i in T.Parallel(WIDTH):
                Y[bx * WIDTH + i] = X[bx * WIDTH + i] * 2

    return main


def run(x: torch.Tensor) -> torch.Tensor:
    with torch.cuda.device(x.device.index):
        if not torch.cuda.is_current_stream_capturing():
            kernel = double(x.shape[0])
            print("built double", flush=True)
        return kernel(x)


if __name__ == "__main__":
    y = run(torch.randn(4096, device="cuda", dtype=torch.float16))
    print("END", flush=True)
