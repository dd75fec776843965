"""What the source text alone says, without tilelang: the server's checks and source-only
buffers (``text``, ``buffers``), and the worker's reading of kernels and their arguments
(``kernels``, ``arguments``, and the scope reading under them)."""
