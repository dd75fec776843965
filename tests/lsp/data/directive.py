import tilelang.language as T


# tilelang: args(64, N=32) target=hip:gfx942
def scaled(M, N, dtype=T.float16):
    @T.prim_func
    def kern(A: T.Tensor((M, N), dtype), B: T.Tensor((M, N), dtype)):
        with T.Kernel(1, threads=128) as bx:
            tile = T.alloc_shared((M, N), dtype)
            T.copy(A, tile)
            T.copy(tile, B)

    return kern


def needs_config(M):
    @T.prim_func
    def kern(A: T.Tensor((M,), T.float32)):
        with T.Kernel(1, threads=128) as bx:
            T.clear(A)

    return kern


if __name__ == "__main__":
    scaled(1024, 1024)
