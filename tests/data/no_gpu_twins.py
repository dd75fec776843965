"""A GPU program that sizes its kernel from its own tensors' values (as TileLang's paged MLA decode
does with ``cache_seqlens.max().item()``), launches a kernel that writes a buffer it passed in, and
makes a huge tensor on the GPU.

``python no_gpu_twins.py`` prints ``size N`` (the kernel's size, read from GPU tensors),
``built copy_rows``, then reads values: ``read-only sum S`` (a buffer the kernel only reads),
``check passed`` (an ``assert`` of a result), its peak memory, and ends reading the sum of the buffer the kernel
wrote (``written sum ...``). Under ``irtrace run --no-gpu`` that last value is unknown (the
kernel did not run), so the run stops there.
"""

import resource

import tilelang
import tilelang.language as T
import torch


@tilelang.jit
def copy_rows(N, dtype=T.int32):
    @T.prim_func
    def main(Src: T.Tensor((N,), dtype), Dst: T.Tensor((N,), dtype)):
        with T.Kernel(T.ceildiv(N, 128), threads=128) as bx:
            for i in T.Parallel(128):
                if bx * 128 + i < N:
                    Dst[bx * 128 + i] = Src[bx * 128 + i] + 1

    return main


def main() -> None:
    lengths = torch.tensor([100 + 3 * i for i in range(7)], dtype=torch.int32, device="cuda")
    huge = torch.full((1 << 28,), 1, dtype=torch.int32, device="cuda")  # 1 GiB on the GPU
    listed = torch.tensor([7] * 5_000_000, device="cuda")  # 40 MB, from a list
    steps = torch.arange(7, device="cuda") * 2
    n = int((lengths + steps).max().item() + lengths.float().mean().int().item())
    print(f"size {n}", flush=True)
    kernel = copy_rows(n)
    print("built copy_rows", flush=True)
    src = torch.arange(n, dtype=torch.int32, device="cuda")
    dst = torch.zeros(n, dtype=torch.int32, device="cuda")
    kernel(src, dst)
    print(f"read-only sum {src.sum().item()}", flush=True)
    assert (dst - src - 1).abs().max() == 0
    print(f"check passed, huge tensors of {huge.numel()} and {listed.numel()} elements", flush=True)
    print(f"peak rss {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024} MiB", flush=True)
    print(f"written sum {dst.sum().item()}", flush=True)
    print("END", flush=True)


if __name__ == "__main__":
    main()
