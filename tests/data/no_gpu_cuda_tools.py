"""A GPU program that profiles its kernel the way TileLang's examples and libraries do: it
initializes CUDA, brackets the launch with the CUDA profiler and an NVTX range, launches on a side
stream and waits on the current one (TileLang's ``examples/gdn/example_cumsum.py`` calls
``torch.cuda.profiler.start()``). A CPU build of torch refuses each of these. Prints ``built
double`` and ``END`` (the oracle: what a capture must hold, and that it ran to its end)."""

import tilelang
import tilelang.language as T
import torch


@tilelang.jit(out_idx=[-1])
def double(N, dtype=T.float32):
    @T.prim_func
    def main(X: T.Tensor((N,), dtype), Y: T.Tensor((N,), dtype)):
        with T.Kernel(T.ceildiv(N, 128), threads=128) as bx:
            for i in T.Parallel(128):
                Y[bx * 128 + i] = X[bx * 128 + i] * 2

    return main


if __name__ == "__main__":
    torch.cuda.init()
    x = torch.randn(1024, device="cuda")
    kernel = double(1024)
    print("built double", flush=True)
    side = torch.cuda.Stream()
    torch.cuda.profiler.start()
    torch.cuda.nvtx.range_push("double")
    with torch.cuda.stream(side):
        kernel(x)
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.nvtx.range_pop()
    torch.cuda.profiler.stop()
    torch.cuda.current_stream().synchronize()
    print("END", flush=True)
