"""Tile-size choices (no tilelang here: a plain helper module)."""


def pick_block_m(hidden):
    return 4 if hidden >= 2048 else 8
