import tilelang.language as T


def half_typed(N=128, dtype=T.float16):
    @T.prim_func
    def kern(A: T.Tensor((N,), dtype)):
        with T.Kernel(1, threads=128) as bx:
            s = T.alloc_shared((64, 32), T.float16)
            T.copy(A[0:64], s[
