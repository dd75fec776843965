"""Tile sizes shared by the package's kernels."""

BLOCK = 64
