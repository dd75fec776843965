import tilelang.language as T


def broken(N=128, dtype=T.float32):
    @T.prim_func
    def kern(A: T.Tensor((N,), dtype), B: T.Tensor((N,), dtype)):
        with T.Kernel(1, threads=128) as bx:
            s = T.alloc_shared((N,), dtype)
            T.copy(A, undefined_name)
            T.copy(s, B)

    return kern
