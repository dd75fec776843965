import tilelang.language as T


def loops_forever(N=128):
    while True:
        pass
    @T.prim_func
    def kern(A: T.Tensor((N,), T.float32)):
        with T.Kernel(1, threads=128) as bx:
            T.clear(A)

    return kern
