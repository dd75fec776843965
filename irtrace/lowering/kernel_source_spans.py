"""Which lines of the generated CUDA/HIP kernel source come from which Python line, by TileLang's
own ``#line`` directives (docs/source-maps.md, "The kernel source"): the codegen is run once more
without compiling, directives on, over a copy of the module whose statements without a span are
given names of their own, and its lines placed on the source that was built. tilelang and tvm are
imported lazily.
"""

from __future__ import annotations

import re
import secrets
from typing import Any

from irtrace.lowering.carry_rules import Storage, buffer_line, node_kind
from irtrace.lowering.spans import ModuleSpans, statement_spans

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
    if node_kind(stmt) == "Bind":
        earlier = (known or {}).get(stmt.var.__chandle__())
        return earlier[1] if earlier is not None and earlier[0].name == str(stmt.var.name) else None
    if node_kind(stmt) not in ("AllocBuffer", "DeclBuffer"):
        return None
    buffer = stmt.buffer
    found = buffer_line(buffer) or storage.get((buffer.data.__chandle__(), str(buffer.name)))
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
        if node_kind(stmt) in ("AllocBuffer", "DeclBuffer"):
            allocated_at = buffer_line(stmt.buffer)
            if allocated_at is not None:
                storage[(stmt.buffer.data.__chandle__(), str(stmt.buffer.name))] = allocated_at
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
