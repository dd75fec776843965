"""tilelang-lsp: a language server that runs TileLang's real frontend and pipeline as you type."""

from typing import Any


def __getattr__(name: str) -> Any:
    # The version lives in irtrace (one place for the project); importing irtrace lazily keeps
    # `tilelang-lsp` launching its worker before any of the server's own imports.
    if name == "__version__":
        from irtrace import __version__

        return __version__
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
