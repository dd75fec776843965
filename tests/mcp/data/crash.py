"""A kernel file that crashes the process that imports it (a null pointer read)."""

import ctypes

ctypes.string_at(0)
