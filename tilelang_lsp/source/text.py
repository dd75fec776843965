"""What the server checks in a document's text before anything runs: whether it imports
tilelang, whether it parses, its dialect, and target names as users write them.

Pure Python (``ast``, ``re``): the server process uses it, so it never imports tilelang.
"""

from __future__ import annotations

import ast
import re

from irtrace.facts.source_tree import parse_source

_USES_TILELANG = re.compile(r"^[ \t]*(?:import|from)[ \t]+tilelang\b", re.MULTILINE)


def imports_tilelang(text: str) -> bool | None:
    """Whether the module has a real ``import tilelang...`` or ``from tilelang... import`` statement
    (at any depth: in a function, a class, an ``if``), read with ``ast``; ``None`` when the text does
    not parse. Only a file for which this is ``True`` is ever executed: an import named in a string,
    a docstring or a comment does not count."""
    try:
        tree = parse_source(text)  # the tree the worker's loader and resolver read too
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    for node in ast.walk(tree):
        if isinstance(node, ast.Import) and any(_is_tilelang(alias.name) for alias in node.names):
            return True
        if isinstance(node, ast.ImportFrom) and node.level == 0 and _is_tilelang(node.module or ""):
            return True
    return False


def _is_tilelang(module: str) -> bool:
    return module == "tilelang" or module.startswith("tilelang.")


def uses_tilelang(text: str) -> bool:
    """Whether analysis may execute the text: it parses and really imports tilelang."""
    return imports_tilelang(text) is True


def looks_like_tilelang(text: str) -> bool:
    """Whether a line of the text starts with an import of tilelang. Display only (a half-typed
    kernel file that does not parse keeps its source hints and gets its syntax error); it never
    decides whether anything runs."""
    return _USES_TILELANG.search(text) is not None


def syntax_problem(text: str) -> tuple[int, str] | None:
    """The line (1-based) and message of the text's syntax error, found without running anything."""
    try:
        parse_source(text)
    except SyntaxError as error:
        return error.lineno or 1, f"syntax error: {error.msg}"
    except (ValueError, RecursionError, MemoryError) as error:
        return 1, f"syntax error: {type(error).__name__}: {error}"
    return None
