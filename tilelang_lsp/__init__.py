"""tilelang-lsp: a language server that runs TileLang's real frontend and pipeline as you type."""

__version__ = "0.1.0"
