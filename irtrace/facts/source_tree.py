"""A document's syntax tree, parsed once per text and shared by everything that reads it.

The language server's worker reads one document version in several places (does it import
tilelang, its kernels and directives, its entry point, the module it runs); each asks here, so an
edit is parsed once. Pure Python: the server process uses it too.
"""

from __future__ import annotations

import ast
import functools
import types


@functools.lru_cache(maxsize=8)
def parse_source(text: str) -> ast.Module:
    """The syntax tree of ``text``, parsed once per text. Raises ``SyntaxError``/``ValueError``
    (not cached: a text that does not parse is parsed again); callers must not change the tree."""
    return ast.parse(text)


def compile_source(text: str, filename: str) -> types.CodeType:
    """``compile(text, filename, "exec", dont_inherit=True)`` from the shared tree (the compiler
    takes a tree as it takes text, without parsing again); a text that does not parse is compiled
    as text, so that its ``SyntaxError`` names ``filename``."""
    try:
        tree: ast.Module | str = parse_source(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        tree = text
    return compile(tree, filename, "exec", dont_inherit=True)
