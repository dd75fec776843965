import tilelang.language as T


def transpose_conflict(M=128, N=128, dtype=T.float32):
    @T.prim_func
    def kern(A: T.Tensor((M, N), dtype), B: T.Tensor((M, N), dtype)):
        with T.Kernel(1, threads=128) as bx:
            f = T.alloc_fragment((M, N), dtype)
            g = T.alloc_fragment((N, M), dtype)
            T.copy(A, f)
            for i, j in T.Parallel(M, N):
                g[j, i] = f[i, j]
            for i, j in T.Parallel(M, N):
                f[i, j] = g[i, j] + f[j, i]
            T.copy(f, B)

    return kern
