"""Helpers shared by the package's kernels."""

ROW_TILE = 32


def pick_block(n, widest=256):
    """The widest power-of-two tile, at most ``widest``, that divides ``n``."""
    block = widest
    while n % block:
        block //= 2
    return block
