"""How a tool's answer reads: a short summary, then its body (compact JSON, or the IR or diff text
itself), and the result struct as structured content. Long texts come in pages; other strings
are clipped, since compiler errors can quote whole modules."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import msgspec
from mcp.types import CallToolResult, TextContent

from tilelang_mcp import backend

DEFAULT_LINES = 200
"""Lines of IR or diff a call returns unless it asks for another ``limit``."""
MAX_LINES = 2000
MAX_TEXT_CHARS = 60_000
"""Longest IR, source or diff text one call returns; past it the text is cut at a line."""
MAX_STRING_CHARS = 4000
"""Longest string in a JSON answer (an error message); page-able texts are bounded by pages."""

Result = TypeVar("Result", bound=msgspec.Struct)


@dataclass(frozen=True)
class Answer(Generic[Result]):
    """What a tool's ``handle`` returns: the summary line(s) for the reader, the typed result,
    and the body text when it is not the result's JSON (an IR, a diff, a Markdown table)."""

    summary: str
    result: Result
    body: str | None = None


class PageInfo(msgspec.Struct, frozen=True, kw_only=True):
    """Which lines of a long text an answer holds, and how to read on."""

    offset: int
    lines: int
    total_lines: int
    complete: bool
    note: str | msgspec.UnsetType = msgspec.UNSET
    """Which lines these are and the call that gives the rest; absent when the text is whole."""


def clip(value: Any) -> Any:
    """``value`` with every string longer than ``MAX_STRING_CHARS`` cut, saying how much was cut:
    compiler errors can quote whole modules."""
    if isinstance(value, str) and len(value) > MAX_STRING_CHARS:
        return value[:MAX_STRING_CHARS] + f"... [{len(value) - MAX_STRING_CHARS} more characters cut]"
    if isinstance(value, dict):
        return {key: clip(item) for key, item in value.items()}
    if isinstance(value, list):
        return [clip(item) for item in value]
    return value


def call_result(answer: Answer[Any]) -> CallToolResult:
    """The MCP answer: the summary, then the body (the JSON, or the IR or diff text itself), and
    the result struct as structured content."""
    data = msgspec.to_builtins(answer.result)
    if answer.body is None:  # paged texts are bounded by their pages; the rest by its strings
        data = clip(data)
    text = answer.body if answer.body is not None else backend.dump(data)
    return CallToolResult(
        content=[TextContent(type="text", text=answer.summary), TextContent(type="text", text=text)],
        structuredContent=data,
    )


def page(
    text: str, offset: int, limit: int, how_to_continue: str, max_chars: int = MAX_TEXT_CHARS
) -> tuple[str, PageInfo]:
    """Lines ``offset`` to ``offset + limit`` of ``text`` (cut sooner at ``MAX_TEXT_CHARS``), and a
    note saying which lines these are and how to get the rest."""
    lines = text.splitlines(keepends=True)
    total = len(lines)
    chunk: list[str] = []
    size = 0
    for line in lines[offset : offset + min(limit, MAX_LINES)]:
        if chunk and size + len(line) > max_chars:
            break
        chunk.append(line[:max_chars])
        size += len(chunk[-1])
    end = offset + len(chunk)
    complete = offset == 0 and end >= total
    note: str | msgspec.UnsetType
    if complete:
        note = msgspec.UNSET
    elif offset >= total:
        note = f"offset {offset} is past the end: the text has {total} lines"
    elif end < total:
        note = (
            f"showing lines {offset + 1}-{end} of {total}; {how_to_continue} with offset={end} for the rest"
        )
    else:
        note = f"showing lines {offset + 1}-{end} of {total} (the end)"
    info = PageInfo(offset=offset, lines=len(chunk), total_lines=total, complete=complete, note=note)
    return "".join(chunk), info
