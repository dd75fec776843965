"""How a statement's Python line is carried over a pass that drops its span: the rules of
docs/source-maps.md, "Carried lines", for statements (``carry_spans``) and for the buffers a module
allocates (``carry_allocations``), with the facts of a module's statements they match on. Kept
apart from placing spans on a print (``irtrace.lowering.spans``), which uses these records, so
that the rules read on their own. tilelang and tvm are imported lazily.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any


def span_line(span: Any) -> tuple[str, int] | None:
    """A TVM span as ``(file, line)``; ``None`` for no span."""
    return None if span is None else (str(span.source_name.name), int(span.line))


def stmt_line(stmt: Any) -> tuple[str, int] | None:
    """The ``(file, line)`` TileLang's frontend spanned a statement with, if any."""
    from tilelang.ir import get_stmt_span

    return span_line(get_stmt_span(stmt))


def buffer_line(buffer: Any) -> tuple[str, int] | None:
    """The ``(file, line)`` of the line that allocated a buffer, if TileLang spanned it."""
    from tilelang.ir import get_buffer_span

    return span_line(get_buffer_span(buffer))


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


_SEQUENCE = "tirx.SeqStmt"
"""A statement sequence prints no line of its own; it is neither counted nor mapped."""
_stmt_type_keys: list[str] | None = None


def statement_type_keys() -> list[str]:
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


def statements_in(node: Any) -> list[Any]:
    """Every statement under ``node`` (itself excluded, statement sequences left out)."""
    from tvm.tirx.stmt_functor import ir_transform

    found: list[Any] = []
    ir_transform(node, None, found.append, statement_type_keys())
    return [stmt for stmt in found if not stmt.same_as(node)]


BLOCKS = ("SBlock", "SBlockRealize")
"""The kinds of a block statement: the block itself and its realize (``with T.sblock(...)``)."""


def node_kind(stmt: Any) -> str:
    """A TIR node's class name (``"For"``, ``"SBlockRealize"``): what statements are told apart by."""
    return type(stmt).__name__


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


_COPY_OPS = {"tl.tileop.copy": "copy", "tl.tileop.tma_copy": "tma_copy"}


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
                if node_kind(fact.stmt) == "BufferStore":
                    handle = fact.stmt.buffer.__chandle__()
                    self._stores[handle] = self._stores.get(handle, 0) + 1
        return self._stores

    def _calls(self) -> list[Any]:
        return [
            value for fact in self._facts if node_kind(value := getattr(fact.stmt, "value", None)) == "Call"
        ]


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


def _is_sequence(node: Any) -> bool:
    return node is not None and node_kind(node) == "SeqStmt"


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
    for each in [stmt, *statements_in(stmt)]:
        kind = node_kind(each)
        if kind in BLOCKS:
            block = each.block if kind == "SBlockRealize" else each
            found.update(buffer.data.__chandle__() for buffer in block.alloc_buffers)
        elif kind == "AllocBuffer":
            found.add(each.buffer.data.__chandle__())
    return frozenset(found)


def _lexical_scope_key(stmt: Any) -> tuple[str, int] | None:
    """``("lexical_scope", ...)`` of the buffers allocated inside a block annotated
    ``lexical_alloc_scope``, or inside a ``T.attr(0, "lexical_alloc_scope", 1)``; ``None`` when
    nothing is allocated there or for any other statement."""
    kind = node_kind(stmt)
    if kind in BLOCKS:
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
    while node_kind(stmt) == "For":
        stmt = stmt.body
    if node_kind(stmt) != "BufferStore":
        return None
    where = stmt_line(stmt)
    return None if where is None else (stmt, where)


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
    if node_kind(stmt) == "For":
        keys.add(("split", _loop_key(stmt)))
        inner = _store_in_loops(stmt)
        if inner is not None:
            keys |= _loop_store_keys(*inner)
            if _is_vectorized(stmt) and node_kind(stmt.body) == "BufferStore":
                keys.add(("vectorized", _vector_key(inner[0], inner[1], stmt.extent)))
    for part in _unit_loop_body(stmt):
        keys.add(("unit_body", _hash(part)))
    if node_kind(stmt) == "BufferStore" and _only_store(source):
        keys.add(_store_key(stmt))
    if not source.carried and node_kind(stmt) in BLOCKS:
        block = stmt.block if node_kind(stmt) == "SBlockRealize" else stmt
        body = block.body
        keys.add(("body", _hash(body)) if _is_sequence(body) else ("equal", _hash(body)))
    scope = _lexical_scope_key(stmt)
    if scope is not None:
        keys.add(scope)
    return keys


def _unit_loop_body(stmt: Any) -> list[Any]:
    """The statements of the body of a loop of one iteration (``tl.LowerOpaqueBlock`` replaces
    such a loop by its body, and a block by its body); empty for any other statement."""
    if node_kind(stmt) != "For" or getattr(stmt.extent, "value", None) != 1:
        return []
    body = stmt.body
    while node_kind(body) in BLOCKS:  # an opaque block, which the same pass replaces by its body
        body = (body.block if node_kind(body) == "SBlockRealize" else body).body
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
    if node_kind(stmt) in kinds:
        keys.add(("equal", _hash(stmt)))
    if copies:
        copy = _copy_source(stmt)
        if copy is not None and copy[0] == "tma_copy":
            keys.add(("copy", copy[1]))
        keys |= _tma_load_keys(stmt, context)
    if "For" in kinds and node_kind(stmt) == "For":
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
    if node_kind(stmt) != "BufferStore":
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
    kinds = {node_kind(source.stmt) for source in lost}
    copies = any(
        _copy_source(source.stmt) is not None
        or _op_name(getattr(source.stmt, "value", None)) == "tl.tma_load"
        for source in lost
    )
    # block bodies and body-holding statements are matched only when a block was lost
    bodies = bool(kinds & set(BLOCKS))
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
        if node_kind(source.stmt) not in kinds:
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
            units[_hash(part)] = stmt_line(part)
    unit_spans = set(units.values())
    stores = {
        source.stmt.buffer.__chandle__()
        for source in lost
        if node_kind(source.stmt) == "BufferStore" and _only_store(source)
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
        if stores and node_kind(fact.stmt) == "BufferStore" and fact.stmt.buffer.__chandle__() in stores:
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
    if node_kind(stmt) != "BufferStore":
        return {("own", hash((own, node_kind(stmt))))}
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


def _one_nest(numbers: list[int], after: Sequence[StatementFacts]) -> bool:
    """Whether the loops ``numbers`` of ``after`` are one nest: one of them holds the others, each
    the body of the one before."""
    handles = {after[number].stmt.__chandle__() for number in numbers}
    for number in numbers:
        nest: set[int] = set()
        loop = after[number].stmt
        while node_kind(loop) == "For":
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
        inside = [facts[each.__chandle__()] for each in statements_in(scope) if each.__chandle__() in facts]
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
