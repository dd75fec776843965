"""The worker side of the language server: ``python -m tilelang_lsp.worker``, the process that
imports tilelang and lowers documents (``loop``, ``analysis``, ``facts``), and the nvcc job for
the resource lens (``python -m tilelang_lsp.worker.machine_code``). The server process never
imports this package; it speaks to it through ``tilelang_lsp.protocol``."""
