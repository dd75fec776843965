"""A helper module imported by its sibling kernel file, as `python kernel.py` would."""

THREADS = 128
