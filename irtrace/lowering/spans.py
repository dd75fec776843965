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
from collections.abc import Sequence
from dataclasses import dataclass, field
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


@dataclass(frozen=True)
class Allocation:
    """A buffer a block allocates (or a statement declares), on the line that prints it."""

    ir_line: int
    name: str
    data: Any = field(compare=False, repr=False)
    """the buffer's data variable (its storage): held, so its identity stays unique"""
    span: tuple[str, int] | None = None
    kind: tuple[str, str, tuple[str, ...]] = ("", "", ())
    """the buffer's dtype, scope and shape (printed)"""


def _buffer_kind(buffer: Any) -> tuple[str, str, tuple[str, ...]]:
    return str(buffer.dtype), str(buffer.scope()), tuple(str(extent) for extent in buffer.shape)


@dataclass(frozen=True)
class StatementFacts:
    """One statement of a module, placed with its text, as ``carry_spans`` matches it across a pass.

    The statement itself is held, not hashes of it: a TIR statement is immutable (TVM copies one
    that more than one reference holds before changing it; a span is the one field set in place,
    and structural hashes leave spans out), so hashing it later, only when a pass dropped a line,
    gives what hashing it now would, and costs nothing in the passes that drop none."""

    ir_line: int | None
    """where the plain print prints it (``None``: no line of its own)"""
    span: tuple[str, int] | None
    """its own span's file and line"""
    stmt: Any = field(compare=False, repr=False)


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
        block = stmt.block if _kind(stmt) == "SBlockRealize" else stmt
        if _kind(stmt) in _BLOCKS and number in first_line and block.__chandle__() not in blocks_done:
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
        elif _kind(stmt) == "DeclBuffer" and number in first_line:
            span = (file, line) if file is not None and line is not None else None
            buffer = stmt.buffer
            allocations.append(
                Allocation(first_line[number], str(buffer.name), buffer.data, span, _buffer_kind(buffer))
            )
    facts: tuple[StatementFacts, ...] = ()
    owned: tuple[tuple[int, str, int], ...] = ()
    owned_statements: tuple[CarrySource, ...] = ()
    if carry:
        owned, owned_statements = owned_block_lines(found, first_line)
        facts = tuple(
            StatementFacts(first_line.get(number), (file, line) if file is not None and line else None, stmt)
            for number, (stmt, file, line) in enumerate(spanned)
        )
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
    )


def _statements_in(node: Any) -> list[Any]:
    """Every statement under ``node`` (itself excluded, statement sequences left out)."""
    from tvm.tirx.stmt_functor import ir_transform

    found: list[Any] = []
    ir_transform(node, None, found.append, _statement_type_keys())
    return [stmt for stmt in found if not stmt.same_as(node)]


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
        if _kind(stmt) not in _BLOCKS or file is None or line is None:
            continue
        inside = _statements_in((stmt.block if _kind(stmt) == "SBlockRealize" else stmt).body)
        spans = [get_stmt_span(each) for each in inside]
        if any(s is not None and str(s.source_name.name) == file and int(s.line) != line for s in spans):
            continue
        for each, span in zip(inside, spans, strict=True):
            ir_line = first_line.get(number_of.get(each, -1))
            if span is None or str(span.source_name.name) != file:
                statements.append(CarrySource((file, line), each, carried=True))
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
    if _kind(stmt) != "DeclBuffer":
        return None, None
    from tilelang.ir import get_buffer_span

    span = get_buffer_span(stmt.buffer)
    return (None, None) if span is None else (str(span.source_name.name), int(span.line))


_BLOCK_HEADER = re.compile(
    r"T\.(reads|writes|sblock_attr)\(.*|\w+ = T\.(handle|Buffer)\(.*"
    r"|(?P<name>\w+) = T\.(sblock_alloc_buffer|match_buffer)\(.*"
)


def block_allocations(block: Any, text_lines: list[str], with_line: int) -> list[Allocation]:
    """Each buffer ``block`` allocates, on its printed line: the printer writes a block's
    allocations in its header, ``NAME = T.sblock_alloc_buffer(...)``, right after its ``with`` line
    (at ``with_line``). A buffer is placed only when exactly one header line allocates its name and
    one buffer of the block has that name (a renamed or missing one is left out)."""
    from tilelang.ir import get_buffer_span

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
        span = get_buffer_span(buffer)
        where = None if span is None else (str(span.source_name.name), int(span.line))
        found.append(Allocation(numbers[0], name, buffer.data, where, _buffer_kind(buffer)))
    return found


Storage = dict[int, tuple[Allocation, tuple[str, int]]]
"""data variable's handle -> an allocation of it and the line it carries (its span or carried)"""


def carry_allocations(known: Storage, allocations: Sequence[Allocation]) -> list[tuple[int, str, int]]:
    """``(ir_line, file, line)`` for each allocation without a span that is provably a buffer an
    earlier module allocated with a line (spanned or carried), by one of two rules:

    - **same storage**: the same name and the very same data variable (TVM's buffer remap rebuilds
      a buffer, with a new shape or layout, over the same storage variable);
    - **multi-versioned**: the same name, dtype and scope, its shape the earlier one's with one
      leading dimension added (software pipelining gives a buffer one version per stage), the
      earlier buffer's storage no longer allocated here, and no other earlier buffer matching.

    ``known`` is updated with this module's allocations that have a line; it holds the data
    variables, so a handle is never reused."""
    carried: list[tuple[int, str, int]] = []
    here = {allocation.data.__chandle__() for allocation in allocations}
    previous = dict(known)
    for allocation in allocations:
        handle = allocation.data.__chandle__()
        line = allocation.span
        if line is None:
            earlier = previous.get(handle)
            if earlier is not None and earlier[0].name == allocation.name:
                line = earlier[1]
            else:
                dtype, scope, shape = allocation.kind
                versioned = {
                    old[1]
                    for key, old in previous.items()
                    if key not in here
                    and old[0].name == allocation.name
                    and old[0].kind[:2] == (dtype, scope)
                    and shape[1:] == old[0].kind[2]
                }
                if len(versioned) == 1:
                    (line,) = versioned
            if line is not None:
                carried.append((allocation.ir_line, *line))
        if line is not None:
            known[handle] = (allocation, line)
    return carried


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


# ----------------------------------------------------------------------------- the kernel source

LINE_DIRECTIVES_CONFIG = "tl.emit_line_directives"
"""TileLang's pass config that makes its C-family codegen write ``#line N "file"`` before each
statement carrying a span (``CodeGenCWithLineDirectives``, TileLang 0.1.15)."""
_DIRECTIVE = re.compile(r'#line (?P<line>[1-9][0-9]{0,8}) "(?P<file>(?:[^"\\\n]|\\.)*)"')
_WITHOUT_COMPILE = "_without_compile"


def codegen_without_compile(name: str) -> str | None:
    """The codegen function that writes the same source as ``name`` without compiling it (a
    ``target.build.*`` global function), or ``None`` when there is none."""
    import tvm

    candidate = name if name.endswith(_WITHOUT_COMPILE) else name + _WITHOUT_COMPILE
    if not candidate.startswith("target.build."):
        return None
    return candidate if tvm.ffi.get_global_func(candidate, allow_missing=True) is not None else None


def source_with_line_directives(mod: Any, target: Any, codegen: str) -> str:
    """The kernel source codegen ``codegen`` writes for ``mod`` with TileLang's ``#line``
    directives on, under the current pass configs otherwise."""
    import tvm

    current = tvm.transform.PassContext.current()
    config = {str(key): value for key, value in dict(current.config).items()}
    config[LINE_DIRECTIVES_CONFIG] = True
    with tvm.transform.PassContext(opt_level=current.opt_level, config=config):
        built = tvm.ffi.get_global_func(codegen)(mod, target)
    return str(built.inspect_source())


_CLOSER = re.compile(r"[ ]*(?:\}(?: else \{)?)?")
"""A line a scope statement prints after its body (``}``, ``} else {``), or a blank one: the last
directive above it names a statement of that body, not the scope, so it is left unattributed."""


def place_line_directives(
    annotated: str, plain: str, unnamed: str = ""
) -> tuple[tuple[str, ...], list[tuple[int, int, int]]] | None:
    """``(files, [(source_line, file_index, python_line), ...])``: each line of ``plain`` after a
    ``#line N "file"`` directive of ``annotated`` gets that directive's ``N`` (not ``N`` plus the
    lines since, as ``#line`` means to a C compiler: the codegen writes one directive as it begins a
    statement, and the lines up to the next one are that statement's). Lines after a directive
    naming ``unnamed`` (a statement without a span) and closing braces are left out. ``None`` when
    ``annotated`` without its directive lines is not ``plain`` byte for byte, or has none."""
    files: dict[str, int] = {}
    lines: list[tuple[int, int, int]] = []
    kept: list[str] = []
    current: tuple[str, int] | None = None
    for line in annotated.split("\n"):
        directive = _DIRECTIVE.fullmatch(line)
        if directive is not None:
            current = (re.sub(r"\\(.)", r"\1", directive.group("file")), int(directive.group("line")))
            continue
        kept.append(line)
        if current is not None and current[0] != unnamed and _CLOSER.fullmatch(line) is None:
            lines.append((len(kept), files.setdefault(current[0], len(files)), current[1]))
    if "\n".join(kept) != plain or len(kept) == len(annotated.split("\n")):
        return None
    return tuple(files), lines


def _buffer_line(buffer: Any) -> tuple[str, int] | None:
    from tilelang.ir import get_buffer_span

    span = get_buffer_span(buffer)
    return None if span is None else (str(span.source_name.name), int(span.line))


def _allocated_buffer_line(
    stmt: Any, storage: dict[tuple[int, str], tuple[str, int]]
) -> tuple[str, int] | None:
    """The line of the buffer an ``AllocBuffer`` or ``DeclBuffer`` statement without a span of
    its own allocates: the buffer's span (the frontend spans a buffer with the line that allocated
    it), else that of a buffer of the same name over the same storage (``storage``: a flattened
    buffer is rebuilt without a span, its declaration keeps the spanned one). Codegen writes the
    allocation as a declaration, ``float C_local[128];``. ``None`` for any other statement."""
    if _kind(stmt) not in ("AllocBuffer", "DeclBuffer"):
        return None
    buffer = stmt.buffer
    return _buffer_line(buffer) or storage.get((buffer.data.__chandle__(), str(buffer.name)))


def kernel_source_spans(
    mod: Any, target: Any, codegen: str, source: str, carried: dict[int, tuple[str, int]] | None = None
) -> ModuleSpans | None:
    """Which lines of ``source`` (what codegen ``codegen`` wrote for ``mod``) come from which Python
    line, by TileLang's own ``#line`` directives: ``None`` when the backend has no codegen without
    compiling or writes no directives; ``lines`` is ``None`` when the source with directives, the
    directives removed, is not ``source`` byte for byte.

    The codegen writes a directive only for a statement with a span, so the lines of a statement
    without one would pass for the last one's: a copy of the module gives every such statement a
    span of a file of its own (a random name), whose lines are then left out. ``mod`` is unchanged.

    ``carried`` (a statement's handle -> file and line) names the statements of ``mod`` that the
    last pass's map carried a line to (``carry_spans``): their source lines are listed under
    ``owned`` (views mark them as carried) instead of being left out.
    """
    import tvm
    from tilelang.ir import make_span, set_stmt_span

    name = codegen_without_compile(codegen)
    if name is None:
        return None
    found = statement_spans(mod)
    statements, with_span = len(found), sum(1 for _, file, _ in found if file is not None)
    copy = tvm.ir.load_json(tvm.ir.save_json(mod))
    unnamed = f"irtrace-unnamed-{secrets.token_hex(6)}"
    storage: dict[tuple[int, str], tuple[str, int]] = {}
    """(data variable's handle, name) -> the span of a buffer over that storage that has one"""
    for stmt, _, _ in found:
        if _kind(stmt) in ("AllocBuffer", "DeclBuffer"):
            buffer_line = _buffer_line(stmt.buffer)
            if buffer_line is not None:
                storage[(stmt.buffer.data.__chandle__(), str(stmt.buffer.name))] = buffer_line
    aliases: dict[str, tuple[str, int]] = {}
    """a file name of its own for each carried line: its directives are told apart"""
    for number, ((original, _, _), (stmt, file, _)) in enumerate(
        zip(found, statement_spans(copy), strict=True), start=1
    ):
        if file is not None:
            continue
        carried_line = (carried or {}).get(original.__chandle__()) or _allocated_buffer_line(
            original, storage
        )
        if carried_line is None:
            set_stmt_span(stmt, make_span(unnamed, number))
        else:
            alias = f"{unnamed}-carried-{len(aliases)}"
            aliases[alias] = carried_line
            set_stmt_span(stmt, make_span(alias, carried_line[1]))
    annotated = source_with_line_directives(copy, target, name)
    if "#line " not in annotated:
        return None  # a backend whose codegen does not write them
    placed = place_line_directives(annotated, source, unnamed)
    if placed is None:
        return ModuleSpans(files=(), lines=None, statements=statements, with_span=with_span)
    named, placed_lines = placed
    files_found: dict[str, int] = {}
    lines: list[tuple[int, int, int]] = []
    owned: set[tuple[int, str, int]] = set()
    for source_line, file_index, line in placed_lines:
        name = named[file_index]
        if name in aliases:
            owned.add((source_line, *aliases[name]))
        else:
            lines.append((source_line, files_found.setdefault(name, len(files_found)), line))
    return ModuleSpans(
        files=tuple(files_found),
        lines=tuple(lines),
        statements=statements,
        with_span=with_span,
        owned=tuple(sorted(owned)),
    )


# ----------------------------------------------------------------------------- carrying spans over

_COPY_OPS = {"tl.tileop.copy": "copy", "tl.tileop.tma_copy": "tma_copy"}
_BLOCKS = ("SBlock", "SBlockRealize")


def _hash(node: Any, map_free_vars: bool = False) -> int:
    """TVM's structural hash (spans do not enter it); free variables by identity unless mapped."""
    import tvm

    return int(tvm.ir.structural_hash(node, map_free_vars=map_free_vars))


def _copy_source(stmt: Any) -> tuple[str, int] | None:
    """``("copy" | "tma_copy", key)`` for a statement evaluating a ``T.copy`` or ``T.tma_copy``:
    the key is the source region's structure with the identity of the buffer it reads (the same
    buffer object, not only one of the same shape)."""
    value = getattr(stmt, "value", None)
    name = _COPY_OPS.get(str(getattr(getattr(value, "op", None), "name", "")))
    args = getattr(value, "args", None)
    if name is None or not args:
        return None
    region = args[0]
    load = region.args[0] if getattr(region, "args", None) else None
    buffer = getattr(load, "buffer", None)
    if buffer is None:
        return None
    # the loop variable may be a new one (the warp-specialized loops are new loops): mapped
    return name, hash((_hash(region, map_free_vars=True), buffer.__chandle__()))


def _tma_load_source(stmt: Any) -> int | None:
    """The data variable's handle of the global buffer a ``T.tma_load`` statement reads (the
    ``A.data`` its TMA descriptor names); ``None`` for any other statement or when not exactly one
    variable is named."""
    value: Any = getattr(stmt, "value", None)
    if str(getattr(getattr(value, "op", None), "name", "")) != "tl.tma_load" or not value.args:
        return None
    descriptor = value.args[0]
    if str(getattr(getattr(descriptor, "op", None), "name", "")) != "tl.create_tma_descriptor":
        return None
    handles = {arg.__chandle__() for arg in descriptor.args if type(arg).__name__ == "Var"}
    return handles.pop() if len(handles) == 1 else None


def _copy_global_source(stmt: Any) -> int | None:
    """The data variable's handle of the buffer a ``T.tma_copy`` statement reads."""
    copy = _copy_source(stmt)
    if copy is None or copy[0] != "tma_copy":
        return None
    return int(stmt.value.args[0].args[0].buffer.data.__chandle__())


def _loop_key(stmt: Any) -> int:
    """A loop's variable name and range: a loop split into several keeps them."""
    return hash(("loop", str(stmt.loop_var.name), _hash(stmt.min), _hash(stmt.extent)))


def _kind(stmt: Any) -> str:
    return type(stmt).__name__


def _is_sequence(node: Any) -> bool:
    return node is not None and _kind(node) == "SeqStmt"


@dataclass(frozen=True)
class CarrySource:
    """A statement of the module before a pass that had a line, spanned or carried."""

    span: tuple[str, int]
    stmt: Any = field(compare=False, repr=False)
    carried: bool = False


def _was_keys(source: CarrySource) -> set[tuple[str, int]]:
    """What ``source`` may have become in a pass that dropped its line: itself; a block, its body
    (``tl.LowerOpaqueBlock`` replaces a block by its body); a ``T.copy``, a ``T.tma_copy`` of the
    same source region (``tl.ProducerConsumerWarpSpecialized``); a carried ``T.tma_copy``, one of
    the same source region."""
    stmt = source.stmt
    keys = {("equal", _hash(stmt))}
    copy = _copy_source(stmt)
    if copy is not None and copy[0] == ("tma_copy" if source.carried else "copy"):
        keys.add(("copy", copy[1]))
    if copy is not None and source.carried and copy[0] == "tma_copy":
        keys.add(("tma_load", _copy_global_source(stmt) or 0))
    if _kind(stmt) == "For":
        keys.add(("split", _loop_key(stmt)))
    if not source.carried and _kind(stmt) in _BLOCKS:
        block = stmt.block if _kind(stmt) == "SBlockRealize" else stmt
        body = block.body
        keys.add(("body", _hash(body)) if _is_sequence(body) else ("equal", _hash(body)))
    return keys


def _is_keys(stmt: Any, kinds: set[str], copies: bool, bodies: bool) -> set[tuple[str, int]]:
    """What an unspanned statement after the pass is, for the kinds of statements lost."""
    keys: set[tuple[str, int]] = set()
    if _kind(stmt) in kinds:
        keys.add(("equal", _hash(stmt)))
    if copies:
        copy = _copy_source(stmt)
        if copy is not None and copy[0] == "tma_copy":
            keys.add(("copy", copy[1]))
        load = _tma_load_source(stmt)
        if load is not None:
            keys.add(("tma_load", load))
    if "For" in kinds and _kind(stmt) == "For":
        keys.add(("split", _loop_key(stmt)))
    body = getattr(stmt, "body", None)
    if bodies and _is_sequence(body):
        keys.add(("body", _hash(body)))
    return keys


def carry_spans(
    before: Sequence[CarrySource], after: Sequence[StatementFacts]
) -> tuple[list[tuple[int, str, int]], list[CarrySource]]:
    """The lines a pass dropped that are provably carried by statements of its output: a line no
    statement of ``after`` carries any more, whose statement before the pass is, by one of the
    keys of ``_was_keys``, the one and only statement of ``after`` without a span having that key,
    and no other statement before the pass has that key. Gives ``[(ir_line, file, line)]`` of the
    carried statements and what the next pass is matched against (spanned and carried).
    Statements are hashed only when a line was dropped, and only those of the kinds dropped."""
    present = {fact.span for fact in after if fact.span is not None}
    following = [CarrySource(f.span, f.stmt) for f in after if f.span is not None]
    lost = [source for source in before if source.span not in present]
    if not lost:
        return [], following
    kinds = {_kind(source.stmt) for source in lost}
    # block bodies and body-holding statements are matched only when a block was lost
    copies = any(_copy_source(source.stmt) is not None for source in lost)
    bodies = bool(kinds & set(_BLOCKS))
    offered: dict[tuple[str, int], set[tuple[str, int] | None]] = {}
    for source in before:
        if _kind(source.stmt) not in kinds:
            continue
        for key in _was_keys(source):
            offered.setdefault(key, set()).add(source.span if source.span not in present else None)
    targets: dict[tuple[str, int], list[int]] = {}
    for number, fact in enumerate(after):
        if fact.span is None:
            for key in _is_keys(fact.stmt, kinds, copies, bodies):
                targets.setdefault(key, []).append(number)
    chosen: dict[int, set[tuple[str, int]]] = {}
    for key, spans in offered.items():
        found = targets.get(key, [])
        # a loop split carries to every part; any other key, to its one statement
        if len(spans) == 1 and None not in spans and (len(found) == 1 or (key[0] == "split" and found)):
            for number in found:
                chosen.setdefault(number, set()).update(s for s in spans if s is not None)
    carried: list[tuple[int, str, int]] = []
    for number, claims in sorted(chosen.items()):
        if len(claims) != 1:
            continue  # two lines claim one statement: neither is proven
        (line,) = claims
        fact = after[number]
        following.append(CarrySource(line, fact.stmt, carried=True))
        if fact.ir_line is not None:
            carried.append((fact.ir_line, *line))
    return carried, following
