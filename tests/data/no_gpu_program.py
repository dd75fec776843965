"""A GPU program as TileLang's examples are written: tensors go to the GPU before the first
compile, each kernel is checked against a torch reference and timed, and the SM count sizes a
grid. Without a GPU it stops at the first ``.cuda()``; under ``irtrace run --no-gpu`` it runs to
its end.

``python no_gpu_program.py`` prints ``built NAME`` for each kernel it compiles (the oracle for
what a capture must hold) and ``END`` when it has run to its end.
"""

import tilelang
import tilelang.language as T
import torch


@tilelang.jit(out_idx=[-1])
def scale_rows(M, N, block=128, dtype=T.float16):
    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(M, threads=128) as bx:
            for j in T.Parallel(N):
                Y[bx, j] = X[bx, j] * 2

    return main


def add_one(N, dtype=T.float16):
    @T.prim_func
    def main(A: T.Tensor((N,), dtype), B: T.Tensor((N,), dtype)):
        with T.Kernel(T.ceildiv(N, 256), threads=128) as bx:
            for i in T.Parallel(256):
                B[bx * 256 + i] = A[bx * 256 + i] + 1

    return main


def main() -> None:
    x = torch.randn(64, 512).cuda().half()  # the first GPU call, before any compile
    kernel = scale_rows(64, 512)
    print("built scale_rows", flush=True)
    y = kernel(x)
    torch.testing.assert_close(y, x * 2)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    compiled = tilelang.compile(add_one(sms * 256), out_idx=[1])
    print("built add_one", flush=True)
    a = torch.randn(sms * 256, device="cuda", dtype=torch.float16)
    assert torch.allclose(compiled(a), a + 1)
    latency = compiled.get_profiler().do_bench()
    print(f"latency {latency} ms, {1 / latency:.3f} per ms", flush=True)
    print("END", flush=True)


if __name__ == "__main__":
    main()
