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
    context: CarryContext | None = field(default=None, compare=False, repr=False)
    """the rest of the module as ``carry_spans`` needs it (with ``facts``)"""
    in_blocks: tuple[tuple[int, str, int], ...] = ()
    """of ``owned`` in a kernel source's map, those whose statement the last module had only
    inside a block of that line (``CarrySource.owned``), not carried over a pass"""


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
    binds: bool = False
    """not an allocation: a ``Bind`` of the storage variable itself to an address (``A_shared =
    T.handle_add_byte_offset(buf_dyn_shmem.data, 0)``); carried only by the same-storage rule"""


def _binds_storage(stmt: Any) -> bool:
    """Whether a ``Bind`` names a pointer (a storage variable), not a scalar."""
    return str(getattr(stmt.var, "dtype", "")) == "handle"


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
        elif _kind(stmt) in ("DeclBuffer", "AllocBuffer") and number in first_line:
            span = (file, line) if file is not None and line is not None else None
            buffer = stmt.buffer
            allocations.append(
                Allocation(first_line[number], str(buffer.name), buffer.data, span, _buffer_kind(buffer))
            )
        elif _kind(stmt) == "Bind" and number in first_line and _binds_storage(stmt):
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
                own = None if span is None else (str(span.source_name.name), int(span.line))
                statements.append(CarrySource((file, line), each, carried=True, owned=True, own=own))
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
    if _kind(stmt) not in ("DeclBuffer", "AllocBuffer"):
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

    The same-storage rule also carries a ``Bind`` of the storage variable itself, by the name of
    the buffer over it (``tl.MergeSharedMemoryAllocations`` merges shared buffers into one
    allocation and binds each old data variable to its offset there, ``A_shared =
    T.handle_add_byte_offset(buf_dyn_shmem.data, 0)``).

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
            elif not allocation.binds:
                dtype, scope, shape = allocation.kind
                versioned = {
                    old[1]
                    for key, old in previous.items()
                    if key not in here
                    and not old[0].binds
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
    stmt: Any, storage: dict[tuple[int, str], tuple[str, int]], known: Storage | None = None
) -> tuple[str, int] | None:
    """The line of the buffer an ``AllocBuffer`` or ``DeclBuffer`` statement without a span of
    its own allocates: the buffer's span (the frontend spans a buffer with the line that allocated
    it), else that of a buffer of the same name over the same storage (``storage``: a flattened
    buffer is rebuilt without a span, its declaration keeps the spanned one; ``known``: the
    storage the pass maps followed, ``carry_allocations``). Codegen writes the allocation as a
    declaration, ``float C_local[128];``. A ``Bind`` of a storage variable that ``known`` holds,
    by the name of the buffer over it, gets that buffer's line (codegen writes ``void* A_shared =
    ((void*)((char*)buf_dyn_shmem + 0));``). ``None`` for any other statement."""
    if _kind(stmt) == "Bind":
        earlier = (known or {}).get(stmt.var.__chandle__())
        return earlier[1] if earlier is not None and earlier[0].name == str(stmt.var.name) else None
    if _kind(stmt) not in ("AllocBuffer", "DeclBuffer"):
        return None
    buffer = stmt.buffer
    found = _buffer_line(buffer) or storage.get((buffer.data.__chandle__(), str(buffer.name)))
    earlier = (known or {}).get(buffer.data.__chandle__())
    if found is None and earlier is not None and earlier[0].name == str(buffer.name):
        found = earlier[1]
    return found


def kernel_source_spans(
    mod: Any,
    target: Any,
    codegen: str,
    source: str,
    carried: dict[int, set[tuple[str, int]]] | None = None,
    known: Storage | None = None,
    in_blocks: set[tuple[int, tuple[str, int]]] | None = None,
) -> ModuleSpans | None:
    """Which lines of ``source`` (what codegen ``codegen`` wrote for ``mod``) come from which Python
    line, by TileLang's own ``#line`` directives: ``None`` when the backend has no codegen without
    compiling or writes no directives; ``lines`` is ``None`` when the source with directives, the
    directives removed, is not ``source`` byte for byte.

    The codegen writes a directive only for a statement with a span, so the lines of a statement
    without one would pass for the last one's: a copy of the module gives every such statement a
    span of a file of its own (a random name), whose lines are then left out. ``mod`` is unchanged.

    ``carried`` (a statement's handle -> files and lines) names the statements of ``mod`` that the
    last pass's map carried a line to (``carry_spans``): their source lines are listed under
    ``owned`` (views mark them as carried) instead of being left out, beside the line of their own
    span if they have one (a macro's line); so are those of allocations and storage bindings of the
    storage ``known`` holds (``carry_allocations``). ``in_blocks`` names the (handle, line) of
    ``carried`` that are a block's own statements, listed in ``in_blocks`` too.
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
    aliases: dict[str, tuple[tuple[tuple[str, int], ...], tuple[str, int] | None]] = {}
    """a file name of its own for each statement with carried lines (its directives are told
    apart): those lines, and the statement's own span"""
    block_aliases: dict[str, set[tuple[str, int]]] = {}
    """of an alias's carried lines, those of a block the statement is inside"""
    inside_blocks = in_blocks or set()
    for number, ((original, own_file, own_line), (stmt, file, _)) in enumerate(
        zip(found, statement_spans(copy), strict=True), start=1
    ):
        lines_carried = set((carried or {}).get(original.__chandle__(), ()))
        if file is None:
            allocated = _allocated_buffer_line(original, storage, known)
            if allocated is not None:
                lines_carried.add(allocated)
        if lines_carried:
            alias = f"{unnamed}-carried-{len(aliases)}"
            own = (own_file, own_line) if own_file is not None and own_line is not None else None
            aliases[alias] = (tuple(sorted(lines_carried)), own)
            block_aliases[alias] = {
                each for each in lines_carried if (original.__chandle__(), each) in inside_blocks
            }
            set_stmt_span(stmt, make_span(alias, own_line or min(lines_carried)[1]))
        elif file is None:
            set_stmt_span(stmt, make_span(unnamed, number))
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
    owned_in_blocks: set[tuple[int, str, int]] = set()
    for source_line, file_index, line in placed_lines:
        name = named[file_index]
        if name in aliases:
            alias_lines, own = aliases[name]
            owned.update((source_line, *each) for each in alias_lines)
            owned_in_blocks.update((source_line, *each) for each in block_aliases[name])
            if own is not None:
                lines.append((source_line, files_found.setdefault(own[0], len(files_found)), own[1]))
        else:
            lines.append((source_line, files_found.setdefault(name, len(files_found)), line))
    return ModuleSpans(
        files=tuple(files_found),
        lines=tuple(lines),
        statements=statements,
        with_span=with_span,
        owned=tuple(sorted(owned)),
        in_blocks=tuple(sorted(owned_in_blocks)),
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


def _op_name(expr: Any) -> str:
    return str(getattr(getattr(expr, "op", None), "name", ""))


def _descriptor_base(args: Any) -> int | None:
    """The handle of the global buffer's data variable among a ``T.create_tma_descriptor``'s
    arguments: the third (TileLang's ``LowerHopperIntrin`` names the descriptor after it); ``None``
    when that is not a variable."""
    return args[2].__chandle__() if len(args) > 2 and _is_var(args[2]) else None


_TENSORMAP_CREATE = {"__tvm_tensormap_create_tiled", "__tvm_tensormap_create_im2col"}


class CarryContext:
    """What following a TMA load across passes needs of the rest of its module, found only when a
    pass dropped a load's line (from the module's statements, which never change, and the
    parameters of its functions)."""

    def __init__(self, facts: Sequence[StatementFacts], params: dict[str, tuple[Any, ...]] | None = None):
        self._facts = facts
        self._params = params or {}
        self._descriptors: dict[int, int] | None = None
        self._arguments: dict[int, int] | None = None
        self._stores: dict[int, int] | None = None

    @property
    def descriptors(self) -> dict[int, int]:
        """Descriptor variable's handle -> the global data variable's handle, for each TMA
        descriptor ``tl.LowerHopperIntrin`` lifted into a variable: it initializes the variable by
        ``T.call_packed("__tvm_tensormap_create_tiled", A_desc, ..., A, ...)``, the arguments of the
        ``T.create_tma_descriptor`` it replaced. A variable initialized twice, or naming more than
        one other variable, is left out."""
        if self._descriptors is None:
            found: dict[int, int | None] = {}
            for value in self._calls():
                if _op_name(value) != "tirx.tvm_call_packed" or len(value.args) < 2:
                    continue
                variable = value.args[1]
                if str(getattr(value.args[0], "value", "")) not in _TENSORMAP_CREATE or not _is_var(variable):
                    continue
                handle = variable.__chandle__()
                found[handle] = None if handle in found else _descriptor_base(value.args[2:])
            self._descriptors = {handle: source for handle, source in found.items() if source is not None}
        return self._descriptors

    @property
    def arguments(self) -> dict[int, int]:
        """A function parameter's handle -> the variable the module's one call of that function
        passes for it (``tl.SplitHostDevice`` makes the kernel a function of new parameters and
        calls it with the host's variables, ``Module.gemm_kernel(A_desc, B_desc, C.data)``)."""
        if self._arguments is None:
            calls: dict[str, list[Any]] = {}
            for value in self._calls():
                op: Any = getattr(value, "op", None)
                if type(op).__name__ == "GlobalVar":
                    calls.setdefault(str(op.name_hint), []).append(value)
            self._arguments = {}
            for name, found in calls.items():
                params = self._params.get(name, ())
                if len(found) != 1 or len(found[0].args) != len(params):
                    continue
                for param, argument in zip(params, found[0].args, strict=True):
                    if _is_var(argument):
                        self._arguments[param.__chandle__()] = argument.__chandle__()
        return self._arguments

    @property
    def stores(self) -> dict[int, int]:
        """A buffer's handle -> how many statements of the module store into it."""
        if self._stores is None:
            self._stores = {}
            for fact in self._facts:
                if _kind(fact.stmt) == "BufferStore":
                    handle = fact.stmt.buffer.__chandle__()
                    self._stores[handle] = self._stores.get(handle, 0) + 1
        return self._stores

    def _calls(self) -> list[Any]:
        return [value for fact in self._facts if _kind(value := getattr(fact.stmt, "value", None)) == "Call"]


def _is_var(node: Any) -> bool:
    return type(node).__name__ == "Var"


def _tma_load_keys(stmt: Any, context: CarryContext | None) -> set[tuple[str, int]]:
    """What a ``T.tma_load`` statement is: ``("tma_load", handle)`` of the global buffer's data
    variable its TMA descriptor names (the ``A.data`` of ``T.create_tma_descriptor(...)``, or, once
    ``tl.LowerHopperIntrin`` has lifted the descriptor into a variable, the one ``context`` gives for
    that variable), and ``("tma_desc", handle)`` of a lifted descriptor's variable and of the host
    variable passed for it. Empty for any other statement."""
    value: Any = getattr(stmt, "value", None)
    if _op_name(value) != "tl.tma_load" or not value.args:
        return set()
    descriptor = value.args[0]
    keys: set[tuple[str, int]] = set()
    if _op_name(descriptor) == "tl.create_tma_descriptor":
        load = _descriptor_base(descriptor.args)
        if load is not None:
            keys.add(("tma_load", load))
    elif _is_var(descriptor):
        handles = {descriptor.__chandle__()}
        if context is not None and descriptor.__chandle__() in context.arguments:
            handles.add(context.arguments[descriptor.__chandle__()])
        for handle in handles:
            keys.add(("tma_desc", handle))
            if context is not None and handle in context.descriptors:
                keys.add(("tma_load", context.descriptors[handle]))
    return keys


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
    context: CarryContext | None = field(default=None, compare=False, repr=False)
    """the rest of its module, as TMA loads need it"""
    owned: bool = False
    """``span`` is the line of a block (or of the scope a block became) the statement is inside"""
    own: tuple[str, int] | None = None
    """the statement's own span, when ``span`` is carried (a macro's line, for a statement a block
    owns): a statement after the pass that keeps this span may still be this one"""


_LEXICAL_SCOPE = "lexical_alloc_scope"
"""TileLang's block annotation (and, after ``tl.LowerOpaqueBlock``, attribute) that marks the
statements one tile operation (``T.gemm``) was lowered into."""


def _allocated_in(stmt: Any) -> frozenset[int]:
    """The data variables' handles of every buffer allocated in ``stmt`` (itself included): blocks'
    ``alloc_buffers`` and ``AllocBuffer`` statements."""
    found: set[int] = set()
    for each in [stmt, *_statements_in(stmt)]:
        kind = _kind(each)
        if kind in _BLOCKS:
            block = each.block if kind == "SBlockRealize" else each
            found.update(buffer.data.__chandle__() for buffer in block.alloc_buffers)
        elif kind == "AllocBuffer":
            found.add(each.buffer.data.__chandle__())
    return frozenset(found)


def _lexical_scope_key(stmt: Any) -> tuple[str, int] | None:
    """``("lexical_scope", ...)`` of the buffers allocated inside a block annotated
    ``lexical_alloc_scope``, or inside a ``T.attr(0, "lexical_alloc_scope", 1)``; ``None`` when
    nothing is allocated there or for any other statement."""
    kind = _kind(stmt)
    if kind in _BLOCKS:
        block = stmt.block if kind == "SBlockRealize" else stmt
        if _LEXICAL_SCOPE not in block.annotations:
            return None
    elif kind != "AttrStmt" or str(stmt.attr_key) != _LEXICAL_SCOPE:
        return None
    allocated = _allocated_in(stmt)
    return ("lexical_scope", hash(tuple(sorted(allocated)))) if allocated else None


def _store_in_loops(stmt: Any) -> tuple[Any, tuple[str, int]] | None:
    """The store a loop nest ends in (following loop bodies that are one loop each) and that
    store's own span: ``None`` when the nest ends in anything else or the store has no span."""
    from tilelang.ir import get_stmt_span

    while _kind(stmt) == "For":
        stmt = stmt.body
    if _kind(stmt) != "BufferStore":
        return None
    span = get_stmt_span(stmt)
    return (stmt, (str(span.source_name.name), int(span.line))) if span is not None else None


def _loop_store_keys(store: Any, line: tuple[str, int]) -> set[tuple[str, int]]:
    """A loop nest around ``store``: by the buffer it stores into, and by that buffer's storage
    (``tl.FlattenBuffer`` rebuilds a buffer over the same data variable)."""
    return {
        ("loop_store", hash(("buffer", store.buffer.__chandle__(), line))),
        ("loop_store", hash(("data", store.buffer.data.__chandle__(), line))),
    }


def _was_keys(source: CarrySource) -> set[tuple[str, int]]:
    """What ``source`` may have become in a pass that dropped its line: itself; a block, its body
    (``tl.LowerOpaqueBlock`` replaces a block by its body) or, for a block annotated
    ``lexical_alloc_scope``, the attribute around the same allocations; a ``T.copy``, a
    ``T.tma_copy`` of the same source region (``tl.ProducerConsumerWarpSpecialized``); a carried
    ``T.tma_copy``, one of the same source region; a TMA load, one of the same global buffer or
    descriptor; a loop nest around a store, the loop around that store or (vectorized) the store."""
    stmt = source.stmt
    keys = {("equal", _hash(stmt))}
    copy = _copy_source(stmt)
    if copy is not None and copy[0] == ("tma_copy" if source.carried else "copy"):
        keys.add(("copy", copy[1]))
    if copy is not None and source.carried and copy[0] == "tma_copy":
        keys.add(("tma_load", _copy_global_source(stmt) or 0))
    keys |= _tma_load_keys(stmt, source.context)
    if _kind(stmt) == "For":
        keys.add(("split", _loop_key(stmt)))
        inner = _store_in_loops(stmt)
        if inner is not None:
            keys |= _loop_store_keys(*inner)
            if _is_vectorized(stmt) and _kind(stmt.body) == "BufferStore":
                keys.add(("vectorized", _vector_key(inner[0], inner[1], stmt.extent)))
    for part in _unit_loop_body(stmt):
        keys.add(("unit_body", _hash(part)))
    if _kind(stmt) == "BufferStore" and _only_store(source):
        keys.add(_store_key(stmt))
    if not source.carried and _kind(stmt) in _BLOCKS:
        block = stmt.block if _kind(stmt) == "SBlockRealize" else stmt
        body = block.body
        keys.add(("body", _hash(body)) if _is_sequence(body) else ("equal", _hash(body)))
    scope = _lexical_scope_key(stmt)
    if scope is not None:
        keys.add(scope)
    return keys


def _unit_loop_body(stmt: Any) -> list[Any]:
    """The statements of the body of a loop of one iteration (``tl.LowerOpaqueBlock`` replaces
    such a loop by its body, and a block by its body); empty for any other statement."""
    if _kind(stmt) != "For" or getattr(stmt.extent, "value", None) != 1:
        return []
    body = stmt.body
    while _kind(body) in _BLOCKS:  # an opaque block, which the same pass replaces by its body
        body = (body.block if _kind(body) == "SBlockRealize" else body).body
    return list(body.seq) if _is_sequence(body) else [body]


def _is_vectorized(loop: Any) -> bool:
    from tvm.tirx.stmt import ForKind

    return int(loop.kind) == int(ForKind.VECTORIZED)


def _vector_key(store: Any, line: tuple[str, int], lanes: Any) -> int:
    return hash(("vector", store.buffer.__chandle__(), line, str(lanes)))


def _is_keys(
    stmt: Any, kinds: set[str], copies: bool, bodies: bool, context: CarryContext
) -> set[tuple[str, int]]:
    """What a statement after the pass is, for the kinds of statements lost."""
    keys: set[tuple[str, int]] = set()
    if _kind(stmt) in kinds:
        keys.add(("equal", _hash(stmt)))
    if copies:
        copy = _copy_source(stmt)
        if copy is not None and copy[0] == "tma_copy":
            keys.add(("copy", copy[1]))
        keys |= _tma_load_keys(stmt, context)
    if "For" in kinds and _kind(stmt) == "For":
        keys.add(("split", _loop_key(stmt)))
        inner = _store_in_loops(stmt)
        if inner is not None:
            keys |= _loop_store_keys(*inner)
    body = getattr(stmt, "body", None)
    if bodies and _is_sequence(body):
        keys.add(("body", _hash(body)))
    if bodies:
        scope = _lexical_scope_key(stmt)
        if scope is not None:
            keys.add(scope)
    return keys


def _vector_store_key(stmt: Any, span: tuple[str, int]) -> tuple[str, int] | None:
    """``("vectorized", ...)`` of a store of a vector: what a vectorized loop around a store of the
    same line into the same buffer, with as many iterations as the vector has lanes, became."""
    if _kind(stmt) != "BufferStore":
        return None
    lanes = int(getattr(stmt.value.dtype, "lanes", 1))
    return ("vectorized", _vector_key(stmt, span, lanes)) if lanes > 1 else None


_ANY_SPAN = {"vectorized", "unit_body", "own", "store_into"}
"""Keys whose statement after the pass keeps a span of its own (the store a vectorized loop held,
the statements of a loop of one iteration, a statement keeping the span it had): the lines
carried to it go beside that span."""


def carry_spans(
    before: Sequence[CarrySource], after: Sequence[StatementFacts], context: CarryContext | None = None
) -> tuple[list[tuple[int, str, int]], list[CarrySource], list[tuple[int, str, int]]]:
    """The lines a pass dropped that are provably carried by statements of its output.

    A statement before the pass, with its lines (its span, lines carried to it, the line of a block
    that owns it), is matched by one of the keys of ``_was_keys``: it is the only statement before
    the pass with that key (or every statement with it has the very same lost lines: the parts of a
    split loop, a block and its realize), and the statement after the pass is the only one having
    that key (a split loop or a loop nest: every part), without a span or with the statement's own
    span (or, for the keys of ``_ANY_SPAN``, its own). Its lines that no statement of ``after``
    carries are then carried; two statements claiming one statement after the pass carry neither.
    A statement carried from a block owns its body as the block did (``owned_block_lines``).

    Gives ``[(ir_line, file, line)]`` of the carried statements, what the next pass is matched
    against (spanned and carried), and of the first, those owned by a scope carried from a block.
    Statements are hashed only when a line was dropped, and only those of the kinds dropped."""
    context = context or CarryContext(after)
    present = {fact.span for fact in after if fact.span is not None}
    following = [
        CarrySource(f.span, f.stmt, context=context, own=f.span) for f in after if f.span is not None
    ]
    lost = [source for source in before if source.span not in present]
    if not lost:
        return [], following, []
    kinds = {_kind(source.stmt) for source in lost}
    copies = any(
        _copy_source(source.stmt) is not None
        or _op_name(getattr(source.stmt, "value", None)) == "tl.tma_load"
        for source in lost
    )
    # block bodies and body-holding statements are matched only when a block was lost
    bodies = bool(kinds & set(_BLOCKS))
    lost_lines: dict[int, set[tuple[str, int]]] = {}
    """statement's handle -> its lines lost in the pass (empty: it keeps every line it had)"""
    owns: set[tuple[str, int]] = set()
    """the own spans of statements with a lost line that are still present: their statement after
    the pass may keep it"""
    offered: dict[tuple[str, int], set[int]] = {}
    for source in before:
        if source.own is not None:  # every statement holding that span, of any kind
            for key in _own_keys(source.stmt, source.own):
                offered.setdefault(key, set()).add(source.stmt.__chandle__())
        if _kind(source.stmt) not in kinds:
            continue
        handle = source.stmt.__chandle__()
        lines = lost_lines.setdefault(handle, set())
        if source.span not in present:
            lines.add(source.span)
            if source.own is not None and source.own in present:
                owns.add(source.own)
        for key in _was_keys(source):
            offered.setdefault(key, set()).add(handle)
    targets: dict[tuple[str, int], list[int]] = {}
    vectors = "For" in kinds
    units: dict[int, tuple[str, int] | None] = {}
    """the hashes of the statements of the lost loops of one iteration, with their own spans"""
    for source in lost:
        for part in _unit_loop_body(source.stmt):
            units[_hash(part)] = _own_span(part)
    unit_spans = set(units.values())
    stores = {
        source.stmt.buffer.__chandle__()
        for source in lost
        if _kind(source.stmt) == "BufferStore" and _only_store(source)
    }
    """the buffers of the lost stores that were the only store into their buffer"""
    for number, fact in enumerate(after):
        keys: set[tuple[str, int]] = set()
        if fact.span is None or fact.span in owns:
            keys = _is_keys(fact.stmt, kinds, copies, bodies, context)
        if vectors and fact.span is not None:
            vector = _vector_store_key(fact.stmt, fact.span)
            if vector is not None:
                keys.add(vector)
        if units and fact.span in unit_spans and _hash(fact.stmt) in units:
            keys.add(("unit_body", _hash(fact.stmt)))
        if fact.span is not None and fact.span in owns:
            keys |= _own_keys(fact.stmt, fact.span)
        if stores and _kind(fact.stmt) == "BufferStore" and fact.stmt.buffer.__chandle__() in stores:
            keys.add(_store_key(fact.stmt))
        for key in keys:
            if fact.span is None or key[0] in _ANY_SPAN or fact.span in owns:
                targets.setdefault(key, []).append(number)
    chosen: dict[int, set[frozenset[tuple[str, int]]]] = {}
    for key, handles in offered.items():
        found = targets.get(key, [])
        claims = {frozenset(lost_lines.get(handle, ())) for handle in handles}
        # a statement of that key that lost no line may be the one after the pass
        if len(claims) != 1 or frozenset() in claims:
            continue
        # a loop split carries to every part, a loop nest to every loop of it; any other key,
        # to its one statement
        if (
            len(found) == 1
            or (key[0] == "split" and found)
            or (key[0] == "loop_store" and _one_nest(found, after))
        ):
            for number in found:
                chosen.setdefault(number, set()).update(claims)
    carried: list[tuple[int, str, int]] = []
    from_blocks: list[tuple[Any, tuple[str, int]]] = []
    for number, claims in sorted(chosen.items()):
        if len(claims) != 1:
            continue  # two statements claim one statement: neither is proven
        (claimed,) = claims
        fact = after[number]
        for line in sorted(claimed):
            following.append(CarrySource(line, fact.stmt, carried=True, context=context, own=fact.span))
            if fact.ir_line is not None:
                carried.append((fact.ir_line, *line))
            if _lexical_scope_key(fact.stmt) is not None:
                from_blocks.append((fact.stmt, line))
    carried_owned: list[tuple[int, str, int]] = []
    if from_blocks:
        carried_owned, owned_sources = _owned_by_carried(from_blocks, after, context)
        carried.extend(carried_owned)
        following.extend(owned_sources)
    return carried, following, carried_owned


def _own_keys(stmt: Any, own: tuple[str, int]) -> set[tuple[str, int]]:
    """A statement by the span it keeps, its kind and (a store) the buffer it stores into, or that
    buffer's storage (``tl.FlattenBuffer`` rebuilds a buffer over the same data variable)."""
    if _kind(stmt) != "BufferStore":
        return {("own", hash((own, _kind(stmt))))}
    return {
        ("own", hash((own, "buffer", stmt.buffer.__chandle__()))),
        ("own", hash((own, "data", stmt.buffer.data.__chandle__()))),
    }


def _store_key(stmt: Any) -> tuple[str, int]:
    return ("store_into", hash(stmt.buffer.__chandle__()))


def _only_store(source: CarrySource) -> bool:
    """Whether ``source`` is the only store into its buffer in its module (every statement of the
    module counted, those without a line too)."""
    context = source.context
    return context is not None and context.stores.get(source.stmt.buffer.__chandle__(), 0) == 1


def _own_span(stmt: Any) -> tuple[str, int] | None:
    from tilelang.ir import get_stmt_span

    span = get_stmt_span(stmt)
    return None if span is None else (str(span.source_name.name), int(span.line))


def _one_nest(numbers: list[int], after: Sequence[StatementFacts]) -> bool:
    """Whether the loops ``numbers`` of ``after`` are one nest: one of them holds the others, each
    the body of the one before."""
    handles = {after[number].stmt.__chandle__() for number in numbers}
    for number in numbers:
        nest: set[int] = set()
        loop = after[number].stmt
        while _kind(loop) == "For":
            nest.add(loop.__chandle__())
            loop = loop.body
        if handles <= nest:
            return True
    return False


def _owned_by_carried(
    scopes: list[tuple[Any, tuple[str, int]]], after: Sequence[StatementFacts], context: CarryContext
) -> tuple[list[tuple[int, str, int]], list[CarrySource]]:
    """The statements inside a scope carried from a block that it owns as the block did: those
    without a span or with a span of another file, when no statement inside names another line of
    the carried line's file (``owned_block_lines``)."""
    facts = {fact.stmt.__chandle__(): fact for fact in after}
    carried: list[tuple[int, str, int]] = []
    sources: list[CarrySource] = []
    for scope, (file, line) in scopes:
        inside = [facts[each.__chandle__()] for each in _statements_in(scope) if each.__chandle__() in facts]
        if any(fact.span is not None and fact.span[0] == file and fact.span[1] != line for fact in inside):
            continue
        for fact in inside:
            if fact.span is None or fact.span[0] != file:
                sources.append(
                    CarrySource(
                        (file, line), fact.stmt, carried=True, owned=True, context=context, own=fact.span
                    )
                )
                if fact.ir_line is not None:
                    carried.append((fact.ir_line, file, line))
    return carried, sources
