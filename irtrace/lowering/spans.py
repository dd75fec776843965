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

Carrying a line over a pass that drops its span is ``irtrace.lowering.carry_rules``; the kernel
source's ``#line`` directives, ``irtrace.lowering.kernel_source_spans``.
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass, field
from typing import Any

from irtrace.lowering.carry_rules import (
    BLOCKS,
    Allocation,
    CarryContext,
    CarrySource,
    StatementFacts,
    buffer_line,
    node_kind,
    span_line,
    statement_type_keys,
    statements_in,
)


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
    facts: tuple[StatementFacts, ...] = ()
    """what carrying a span over a pass needs of each statement (``carry_spans``); empty when
    the lines could not be placed"""
    inner: tuple[tuple[int, int, int], ...] = ()
    """``(ir_line, file_index, line)``: the macro's own line (the inner frame) of a statement whose
    span names the kernel line that called the macro (``irtrace.lowering.frontend_lines``)"""
    owned: tuple[tuple[int, str, int], ...] = ()
    """``(ir_line, file, line)``: statements without a span inside a block that has one and whose
    body carries no span at all (``owned_block_lines``); views mark them as carried"""
    owned_statements: tuple[CarrySource, ...] = ()
    """the statements behind ``owned``, followed into the next pass as carried ones"""
    allocations: tuple[Allocation, ...] = ()
    """the buffers the module's blocks allocate (and its buffer declarations), placed on their
    printed lines, for ``carry_allocations``"""
    context: CarryContext | None = field(default=None, compare=False, repr=False)
    """the rest of the module as ``carry_spans`` needs it (with ``facts``)"""
    in_blocks: tuple[tuple[int, str, int], ...] = ()
    """of ``owned`` in a kernel source's map, those whose statement the last module had only
    inside a block of that line (``CarrySource.owned``), not carried over a pass"""


def _binds_storage(stmt: Any) -> bool:
    """Whether a ``Bind`` names a pointer (a storage variable), not a scalar."""
    return str(getattr(stmt.var, "dtype", "")) == "handle"


def _buffer_kind(buffer: Any) -> tuple[str, str, tuple[str, ...]]:
    return str(buffer.dtype), str(buffer.scope()), tuple(str(extent) for extent in buffer.shape)


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

    keys = statement_type_keys()
    for _, func in mod.functions.items():
        body = getattr(func, "body", None)
        if body is not None:
            ir_transform(body, None, note, keys)
    return found


def module_spans(mod: Any, text: str, carry: bool = True) -> ModuleSpans:
    """The spans of ``mod``'s statements on the lines of ``text`` (its plain print); no lines when
    the annotated print cannot be matched line by line with ``text``. With ``carry``, every
    statement is placed and its ``StatementFacts`` kept, so that ``carry_spans`` can follow a span
    a later pass drops."""
    found = statement_spans(mod)
    statements, with_span = len(found), sum(1 for _, file, _ in found if file is not None)
    # a buffer declaration without a span of its own prints the buffer, which has one
    spanned = [
        (stmt, *(_declared_buffer_line(stmt) if file is None else (file, line))) for stmt, file, line in found
    ]
    files: dict[str, int] = {}
    marks: dict[Any, str] = {}
    places: list[tuple[int, int]] = []
    marked: list[int] = []
    """the index in ``found`` of each mark's statement"""
    nonce = f"irtrace-{secrets.token_hex(6)}:"
    for number, (stmt, file, line) in enumerate(spanned):
        if file is None or line is None:
            continue
        index = files.setdefault(file, len(files))
        marks[stmt] = f"{nonce}{len(marked)}"
        marked.append(number)
        places.append((index, line))
    if carry:
        for number, (stmt, file, _) in enumerate(spanned):
            if file is None and stmt not in marks:
                marks[stmt] = f"{nonce}{len(marked)}"
                marked.append(number)
    if not marks:
        return ModuleSpans(files=(), lines=(), statements=statements, with_span=0)
    annotated = str(mod.script(obj_to_annotate=marks))
    numbered = place_marks(annotated, text, nonce)
    if numbered is None:
        return ModuleSpans(files=tuple(files), lines=None, statements=statements, with_span=with_span)
    placed = {(ir_line, *places[mark]) for ir_line, mark in numbered if mark < len(places)}
    inner = _inner_frames(numbered, marked, found, files)
    first_line: dict[int, int] = {}
    for ir_line, mark in numbered:
        if mark < len(marked):
            first_line.setdefault(marked[mark], ir_line)
    text_lines = text.split("\n")
    allocations: list[Allocation] = []
    blocks_done: set[int] = set()
    for number, (stmt, file, line) in enumerate(spanned):
        block = stmt.block if node_kind(stmt) == "SBlockRealize" else stmt
        if node_kind(stmt) in BLOCKS and number in first_line and block.__chandle__() not in blocks_done:
            blocks_done.add(block.__chandle__())
            for allocation in block_allocations(block, text_lines, first_line[number]):
                allocations.append(allocation)
                if allocation.span is not None:
                    placed.add(
                        (
                            allocation.ir_line,
                            files.setdefault(allocation.span[0], len(files)),
                            allocation.span[1],
                        )
                    )
        elif node_kind(stmt) in ("DeclBuffer", "AllocBuffer") and number in first_line:
            span = (file, line) if file is not None and line is not None else None
            buffer = stmt.buffer
            allocations.append(
                Allocation(first_line[number], str(buffer.name), buffer.data, span, _buffer_kind(buffer))
            )
        elif node_kind(stmt) == "Bind" and number in first_line and _binds_storage(stmt):
            span = (file, line) if file is not None and line is not None else None
            allocations.append(Allocation(first_line[number], str(stmt.var.name), stmt.var, span, binds=True))
    facts: tuple[StatementFacts, ...] = ()
    owned: tuple[tuple[int, str, int], ...] = ()
    owned_statements: tuple[CarrySource, ...] = ()
    params: dict[str, tuple[Any, ...]] = {}
    if carry:
        owned, owned_statements = owned_block_lines(found, first_line)
        facts = tuple(
            StatementFacts(first_line.get(number), (file, line) if file is not None and line else None, stmt)
            for number, (stmt, file, line) in enumerate(spanned)
        )
        params = {
            str(name.name_hint): tuple(getattr(func, "params", ())) for name, func in mod.functions.items()
        }
    return ModuleSpans(
        files=tuple(files),
        lines=tuple(sorted(placed)),
        statements=statements,
        with_span=with_span,
        facts=facts,
        inner=inner,
        owned=owned,
        owned_statements=owned_statements,
        allocations=tuple(allocations),
        context=CarryContext(facts, params) if carry else None,
    )


def owned_block_lines(
    found: list[tuple[Any, str | None, int | None]], first_line: dict[int, int]
) -> tuple[tuple[tuple[int, str, int], ...], tuple[CarrySource, ...]]:
    """``(ir_line, file, line)`` for each statement inside a block whose own span names a line of a
    file, when no statement of the block's body names another line of that file: the whole block is
    that line's (``tl.LowerTileOp`` lowers a ``T.gemm`` into ``with T.sblock("_gemm_ssr")`` spanned
    with the call's line, its body without spans or spanned with lines of TileLang's own macro
    files). A block holding a statement of another line of its file owns nothing: its unspanned
    statements could come from that line."""
    from tilelang.ir import get_stmt_span

    number_of = {stmt: number for number, (stmt, _, _) in enumerate(found)}
    owned: set[tuple[int, str, int]] = set()
    statements: list[CarrySource] = []
    for stmt, file, line in found:
        if node_kind(stmt) not in BLOCKS or file is None or line is None:
            continue
        inside = statements_in((stmt.block if node_kind(stmt) == "SBlockRealize" else stmt).body)
        spans = [get_stmt_span(each) for each in inside]
        if any(s is not None and str(s.source_name.name) == file and int(s.line) != line for s in spans):
            continue
        for each, span in zip(inside, spans, strict=True):
            ir_line = first_line.get(number_of.get(each, -1))
            if span is None or str(span.source_name.name) != file:
                statements.append(
                    CarrySource((file, line), each, carried=True, owned=True, own=span_line(span))
                )
                if ir_line is not None:
                    owned.add((ir_line, file, line))
    return tuple(sorted(owned)), tuple(statements)


def _inner_frames(
    numbered: list[tuple[int, int]],
    marked: list[int],
    found: list[tuple[Any, str | None, int | None]],
    files: dict[str, int],
) -> tuple[tuple[int, int, int], ...]:
    """The inner frames (the macro's own lines) of the placed statements that have one."""
    from tilelang.ir import get_stmt_span

    from irtrace.lowering.frontend_lines import inner_frame

    frames: set[tuple[int, int, int]] = set()
    for ir_line, mark in numbered:
        if mark >= len(marked):
            continue
        stmt, file, _ = found[marked[mark]]
        span = get_stmt_span(stmt) if file is not None else None
        frame = inner_frame(int(span.column)) if span is not None else None
        if frame is not None:
            frames.add((ir_line, files.setdefault(frame[0], len(files)), frame[1]))
    return tuple(sorted(frames))


def _declared_buffer_line(stmt: Any) -> tuple[str | None, int | None]:
    """The span of the buffer a ``T.decl_buffer`` statement declares (TileLang's frontend spans a
    buffer with the line that allocated it; passes that turn a block's allocation into such a
    statement keep the buffer); ``(None, None)`` for any other statement."""
    if node_kind(stmt) not in ("DeclBuffer", "AllocBuffer"):
        return None, None
    return buffer_line(stmt.buffer) or (None, None)


_BLOCK_HEADER = re.compile(
    r"T\.(reads|writes|sblock_attr)\(.*|\w+ = T\.(handle|Buffer)\(.*"
    r"|(?P<name>\w+) = T\.(sblock_alloc_buffer|match_buffer)\(.*"
)


def block_allocations(block: Any, text_lines: list[str], with_line: int) -> list[Allocation]:
    """Each buffer ``block`` allocates, on its printed line: the printer writes a block's
    allocations in its header, ``NAME = T.sblock_alloc_buffer(...)``, right after its ``with`` line
    (at ``with_line``). A buffer is placed only when exactly one header line allocates its name and
    one buffer of the block has that name (a renamed or missing one is left out)."""
    buffers: dict[str, list[Any]] = {}
    for buffer in block.alloc_buffers:
        buffers.setdefault(str(buffer.name), []).append(buffer)
    if not buffers or not 1 <= with_line <= len(text_lines):
        return []
    indent = len(text_lines[with_line - 1]) - len(text_lines[with_line - 1].lstrip(" "))
    allocated: dict[str, list[int]] = {}
    for number in range(with_line + 1, len(text_lines) + 1):
        line = text_lines[number - 1]
        header = _BLOCK_HEADER.fullmatch(line.strip())
        if len(line) - len(line.lstrip(" ")) <= indent or header is None:
            break
        printed = header.group("name")
        if printed and "sblock_alloc_buffer" in line:
            # the printer renames a buffer whose name another one took: ``A_shared_5``
            name = printed if printed in buffers else re.sub(r"_[0-9]+$", "", printed)
            allocated.setdefault(name, []).append(number)
    found: list[Allocation] = []
    for name, numbers in allocated.items():
        if len(numbers) != 1 or len(buffers.get(name, [])) != 1:
            continue
        (buffer,) = buffers[name]
        found.append(Allocation(numbers[0], name, buffer.data, buffer_line(buffer), _buffer_kind(buffer)))
    return found


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
    marker = f"# {nonce}"  # string operations, not a pattern compiled per module (a new nonce each)
    plain_lines = plain.split("\n")
    placed: list[tuple[int, int]] = []
    pending: list[int] = []
    number = 0
    for line in annotated.split("\n"):
        if nonce in line:
            head, _, mark = line.rpartition(marker)
            if not (mark.isascii() and mark.isdigit()):
                return None
            pending.append(int(mark))
            if not head.strip(" "):
                continue  # a mark alone on its line: it belongs to the next line
            if not head.endswith("  "):
                return None
            line = head[:-2]
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
