"""What the text around the cursor names, read without running anything: the file's TileLang
imports (``import tilelang.language as T``), the dotted name at or before the cursor, and the call
the cursor is in. Line by line and token by token, so half-typed text works too."""

from __future__ import annotations

import io
import re
import tokenize
from dataclasses import dataclass

_IMPORT = re.compile(r"^\s*import\s+(?P<names>[\w.]+(?:\s+as\s+\w+)?(?:\s*,\s*[\w.]+(?:\s+as\s+\w+)?)*)")
_FROM = re.compile(r"^\s*from\s+(?P<module>tilelang[\w.]*)\s+import\s+(?P<names>.*)")
_NAME_AS = re.compile(r"([\w.]+)(?:\s+as\s+(\w+))?")
_BEFORE_DOT = re.compile(r"(?P<path>[A-Za-z_]\w*(?:\s*\.\s*[A-Za-z_]\w*)*)\s*\.\s*(?P<prefix>\w*)$")
_FROM_PARTIAL = re.compile(
    r"^\s*from\s+(?P<module>tilelang[\w.]*)\s+import\s+(?:\(?\s*[\w\s,]*,\s*)?\(?\s*(?P<prefix>\w*)$"
)
_WORD = re.compile(r"[A-Za-z_]\w*")
_CHAIN_BEFORE = re.compile(r"(?:[A-Za-z_]\w*\s*\.\s*)*$")
LOOKBACK_LINES = 60
"""How far back signature help looks for the opening parenthesis of the call."""


def import_aliases(text: str) -> dict[str, str]:
    """Names the file binds to TileLang modules or names: ``{"T": "tilelang.language",
    "tilelang": "tilelang", "gemm": "tilelang.language.gemm"}``."""
    aliases: dict[str, str] = {}
    lines = text.splitlines()
    for number, line in enumerate(lines):
        code = line.split("#", 1)[0]
        found = _FROM.match(code)
        if found is not None:
            names = found.group("names")
            if "(" in names and ")" not in names:  # a parenthesized list over several lines
                rest = (part.split("#", 1)[0] for part in lines[number + 1 : number + 40])
                for more in rest:
                    names += " " + more
                    if ")" in more:
                        break
            for name, alias in _NAME_AS.findall(names.replace("(", " ").split(")")[0]):
                if name != "*":
                    aliases[alias or name] = f"{found.group('module')}.{name}"
            continue
        found = _IMPORT.match(code)
        if found is None:
            continue
        for name, alias in _NAME_AS.findall(found.group("names")):
            if not name.startswith("tilelang"):
                continue
            if alias:
                aliases[alias] = name
            else:
                aliases[name.split(".")[0]] = name.split(".")[0]
    return aliases


def expand(aliases: dict[str, str], parts: list[str]) -> list[str] | None:
    """The dotted name with its first part replaced by what the file imported it as."""
    if not parts or parts[0] not in aliases:
        return None
    return aliases[parts[0]].split(".") + parts[1:]


def _parts(dotted: str) -> list[str]:
    return [p.strip() for p in dotted.split(".")]


def completion_context(line: str, column: int) -> tuple[list[str], str, bool] | None:
    """``(dotted name, prefix, from_import)`` when the cursor follows ``T.al`` (or ``from
    tilelang.language import al``): complete the members of the name that start with the prefix."""
    before = line[:column]
    found = _FROM_PARTIAL.match(before)
    if found is not None:
        return _parts(found.group("module")), found.group("prefix"), True
    if _in_string_or_comment(before):
        return None
    found = _BEFORE_DOT.search(before)
    if found is None:
        return None
    start = found.start()
    if start > 0 and (before[start - 1].isalnum() or before[start - 1] in "_.)]"):
        return None  # ``x().T.`` or a number: not a name the file imported
    return _parts(found.group("path")), found.group("prefix"), False


def name_at(line: str, column: int) -> tuple[list[str], bool] | None:
    """The dotted name up to the end of the word under the cursor (``T.gemm`` on ``gemm``), and
    whether that word is an attribute (after a dot: never a local buffer name)."""
    for word in _WORD.finditer(line):
        if word.start() <= column <= word.end():
            chain = _CHAIN_BEFORE.search(line[: word.start()])
            dotted = (chain.group() if chain is not None else "") + word.group()
            return _parts(dotted), dotted != word.group()
    return None


@dataclass(frozen=True)
class CallContext:
    """The call the cursor is in: its callee and which argument the cursor is at."""

    callee: list[str]
    position: int
    """How many positional arguments come before the cursor's."""
    keyword: str | None
    """The keyword of the cursor's argument (``num_stages=``), if it has one."""


@dataclass
class _Frame:
    callee: list[str] | None
    commas: int = 0
    keyword: str | None = None
    keywords_seen: int = 0


def call_context(text: str, line: int, column: int) -> CallContext | None:
    """The innermost call whose parentheses hold the cursor (0-based line and column)."""
    lines = text.splitlines()
    if line >= len(lines):
        return None
    first = max(0, line - LOOKBACK_LINES)
    source = "\n".join([*lines[first:line], lines[line][:column]])
    stack: list[_Frame] = []
    tokens: list[tokenize.TokenInfo] = []
    try:
        for token in tokenize.generate_tokens(io.StringIO(source).readline):
            tokens.append(token)
    except (tokenize.TokenError, IndentationError, SyntaxError):
        pass  # the text stops inside the call: what was read so far is what counts
    for index, token in enumerate(tokens):
        if token.type != tokenize.OP:
            if token.type == tokenize.NAME and stack and _is_keyword(tokens, index):
                stack[-1].keyword = token.string
            continue
        if token.string in "([{":
            stack.append(_Frame(_callee(tokens, index) if token.string == "(" else None))
        elif token.string in ")]}":
            if stack:
                stack.pop()
        elif token.string == "," and stack:
            frame = stack[-1]
            frame.commas += 1
            if frame.keyword is not None:
                frame.keywords_seen += 1
            frame.keyword = None
    if not stack or stack[-1].callee is None:
        return None
    frame = stack[-1]
    return CallContext(frame.callee or [], frame.commas - frame.keywords_seen, frame.keyword)


def _is_keyword(tokens: list[tokenize.TokenInfo], index: int) -> bool:
    """``name =`` right after ``(`` or ``,``: a keyword argument (not ``a == b`` nor a lambda)."""
    if index + 1 >= len(tokens) or tokens[index + 1].string != "=":
        return False
    return index > 0 and tokens[index - 1].string in ("(", ",")


def _callee(tokens: list[tokenize.TokenInfo], index: int) -> list[str] | None:
    """The dotted name right before the ``(`` at ``index`` (``None`` for ``f()(`` or ``x[0].f(``)."""
    at = index - 1
    if at < 0 or tokens[at].type != tokenize.NAME:
        return None
    parts = [tokens[at].string]
    while at >= 2 and tokens[at - 1].string == ".":
        if tokens[at - 2].type != tokenize.NAME:
            return None
        parts.insert(0, tokens[at - 2].string)
        at -= 2
    return parts


def _in_string_or_comment(before: str) -> bool:
    """Whether the cursor is in a comment or a string on its line (quotes counted, roughly)."""
    quote: str | None = None
    for char in before:
        if quote is None and char == "#":
            return True
        if char in "'\"":
            quote = None if quote == char else (quote or char)
    return quote is not None
