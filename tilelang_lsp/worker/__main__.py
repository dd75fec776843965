"""``python -m tilelang_lsp.worker``: the analysis worker."""

from tilelang_lsp.worker.loop import main

main()
