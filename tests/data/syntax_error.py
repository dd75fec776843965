import tilelang.language as T


def broken(M=128):
    @T.prim_func
    def main(A: T.Tensor((M,), T.float32)):
        with T.Kernel(1, threads=128) as bx
            A[0] = 1.0

    return main
