"""Tile shapes for the kernels below; no folder here has an ``__init__.py``."""

TILE = 64
