import tilelang.language as T


def racy(N=128, dtype=T.float32):
    @T.prim_func
    def kern(A: T.Tensor((N,), dtype), B: T.Tensor((1,), dtype)):
        with T.Kernel(1, threads=128) as bx:
            s = T.alloc_shared((1,), dtype)
            for i in T.Parallel(N):
                s[0] = A[i]
            T.copy(s, B)

    return kern
