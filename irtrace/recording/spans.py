"""Which lines of a printed module come from which Python line: the spans TileLang's script builder
sets on statements, placed on the printed text through TVM's printer.

The spans are read from the module's statements, never from the text. The printer's
``obj_to_annotate`` puts a comment on the line where it prints each annotated object; that print
differs from the plain one only by those comments and by scopes it no longer folds (a statement
with a comment prints ``with T.launch_thread(...) as bx:`` instead of ``bx = T.launch_thread(...)``,
same line count). The map is kept only when, comments removed, every line of the annotated print
matches the plain print's line of the same number (equal, or the folded and unfolded forms of one
scope): then the line numbers carry over exactly. Otherwise no line is mapped (only the counts
are kept), never a guess. tilelang is imported lazily.
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ModuleSpans:
    """The spans of one module's statements, placed on the lines of its plain print."""

    files: tuple[str, ...]
    """the source files the spans name, in the order first seen"""
    lines: tuple[tuple[int, int, int], ...] | None
    """``(ir_line, file_index, python_line)``, IR lines counted from 1 in the plain print, sorted;
    ``None`` when the annotated print could not be matched with the plain one line by line"""
    statements: int
    """statements in the module (statement sequences left out)"""
    with_span: int
    """of those, how many carry a span"""


_SEQUENCE = "tirx.SeqStmt"
"""A statement sequence prints no line of its own; it is neither counted nor mapped."""
_stmt_type_keys: list[str] | None = None


def _statement_type_keys() -> list[str]:
    """Every TIR statement kind but the sequence (their TVM type keys)."""
    global _stmt_type_keys
    if _stmt_type_keys is None:
        import tvm.tirx.stmt as stmt_module

        base = stmt_module.Stmt
        kinds: list[Any] = [
            kind
            for kind in vars(stmt_module).values()
            if isinstance(kind, type) and issubclass(kind, base) and kind is not base
        ]
        _stmt_type_keys = sorted({str(kind.__tvm_ffi_type_info__.type_key) for kind in kinds} - {_SEQUENCE})
    return _stmt_type_keys


def statement_spans(mod: Any) -> list[tuple[Any, str | None, int | None]]:
    """Every statement of ``mod``'s functions (statement sequences left out) with the file and
    line of its span (``None`` when it has none).

    TVM's ``ir_transform`` restricted to statement kinds walks in C++ and calls back only for
    statements (``post_order_visit`` calls back for every expression too, and a walk written in
    Python costs ten times as much); the callback returns ``None``, so nothing is rebuilt.
    """
    from tilelang.ir import get_stmt_span
    from tvm.tirx.stmt_functor import ir_transform

    found: list[tuple[Any, str | None, int | None]] = []

    def note(stmt: Any) -> None:
        span = get_stmt_span(stmt)
        if span is None:
            found.append((stmt, None, None))
        else:
            found.append((stmt, str.__new__(str, str(span.source_name.name)), int(span.line)))

    keys = _statement_type_keys()
    for _, func in mod.functions.items():
        body = getattr(func, "body", None)
        if body is not None:
            ir_transform(body, None, note, keys)
    return found


def module_spans(mod: Any, text: str) -> ModuleSpans:
    """The spans of ``mod``'s statements on the lines of ``text`` (its plain print); no lines when
    the annotated print cannot be matched line by line with ``text``."""
    found = statement_spans(mod)
    files: dict[str, int] = {}
    marks: dict[Any, str] = {}
    places: list[tuple[int, int]] = []
    nonce = f"irtrace-{secrets.token_hex(6)}:"
    for stmt, file, line in found:
        if file is None or line is None:
            continue
        index = files.setdefault(file, len(files))
        marks[stmt] = f"{nonce}{len(places)}"
        places.append((index, line))
    statements, with_span = len(found), len(places)
    if not marks:
        return ModuleSpans(files=(), lines=(), statements=statements, with_span=0)
    annotated = str(mod.script(obj_to_annotate=marks))
    numbered = place_marks(annotated, text, nonce)
    if numbered is None:
        return ModuleSpans(files=tuple(files), lines=None, statements=statements, with_span=with_span)
    lines = sorted({(ir_line, *places[mark]) for ir_line, mark in numbered if mark < len(places)})
    return ModuleSpans(files=tuple(files), lines=tuple(lines), statements=statements, with_span=with_span)


_SCOPE = re.compile(r"with (?P<expr>.+?)(?: as (?P<var>[^:=]+))?:")


def _same_line(annotated: str, plain: str) -> bool:
    """Whether two lines print the same statement: equal but for indentation, or one scope as
    ``with E as v:`` / ``with E:`` (annotated, unfolded) and ``v = E`` / ``E`` (plain, folded)."""
    annotated, plain = annotated.strip(), plain.strip()
    if annotated == plain:
        return True
    scope = _SCOPE.fullmatch(annotated)
    if scope is None:
        return False
    expr, var = scope.group("expr"), scope.group("var")
    return plain == (f"{var} = {expr}" if var else expr)


def place_marks(annotated: str, plain: str, nonce: str) -> list[tuple[int, int]] | None:
    """``(line of plain, mark number)`` for every mark in ``annotated``: a mark alone on a comment
    line belongs to the next line that is not a mark, a mark at the end of a line to that line.
    ``None`` when the lines, marks removed, do not match ``plain`` one to one."""
    alone = re.compile(rf"[ ]*# {re.escape(nonce)}(\d+)")
    trailing = re.compile(rf"(.*?)  # {re.escape(nonce)}(\d+)")
    plain_lines = plain.split("\n")
    placed: list[tuple[int, int]] = []
    pending: list[int] = []
    number = 0
    for line in annotated.split("\n"):
        if nonce in line:
            only = alone.fullmatch(line)
            if only is not None:
                pending.append(int(only.group(1)))
                continue
            end = trailing.fullmatch(line)
            if end is None:
                return None
            line = end.group(1)
            pending.append(int(end.group(2)))
        if number >= len(plain_lines):
            return None
        if line != plain_lines[number] and not _same_line(line, plain_lines[number]):
            return None
        number += 1
        if pending:
            placed.extend((number, mark) for mark in pending)
            pending = []
    if pending or number != len(plain_lines) or nonce in plain:
        return None
    return placed
