"""Which statements of a kernel's file read the names an assignment binds, by Python's ``ast``:
``loop_range = T.ceildiv(...)`` or ``tx = T.get_thread_binding()`` build no TIR statement (the
value is inlined where the name is read), so the views show such a line with the IR of the lines
that read it. The text is untrusted (a trace stores it): it is parsed, never run, and the work is
bounded by its size. No tilelang here.

A read is *reached* by a binding when some path through the function goes from the binding to the
read without another binding of that name (reaching definitions over the function's structure:
both branches of an ``if``, a loop's body twice for its back edge). Only reads in the same function
count; a read is placed on the first line of the statement holding it (the line TileLang spans it
with), a compound statement's reads in its header on the header's line.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import lru_cache

from irtrace.facts.source_tree import parse_source

_State = dict[str, frozenset[int]]
"""name -> the lines of the bindings of it that may reach here"""
WORK_PER_STATEMENT = 256
"""Work allowed per statement of the file: statements walked (loops twice, nested ones more),
bindings read, and names held by the states copied and merged at branches (a kernel binds a few
dozen names)."""


class _TooMuchWork(Exception):
    """The file's nesting would cost more than its size allows: nothing is claimed for it."""


@dataclass(frozen=True)
class BindingReaders:
    """The kernel file's statements and, per assignment, the statements that read what it binds."""

    statement_lines: frozenset[int]
    """the first line of every statement of the file"""
    assignments: frozenset[int]
    """lines of assignments (``=``, annotated with a value, augmented) that bind a plain name"""
    readers: dict[int, tuple[int, ...]]
    """assignment line -> the statement lines, in the same function, reading a name it binds
    (reached by that binding), itself left out"""
    owner: dict[int, int]
    """statement line -> the ``def`` line of the innermost function holding it (0: the module)"""
    definitions: frozenset[int] = frozenset()
    """the ``def`` lines (a function's own statement, in its enclosing function)"""


def _walk_expression(node: ast.AST, bound: frozenset[str] = frozenset()) -> Iterator[ast.Name]:
    """The names ``node`` reads, without those a comprehension or lambda inside binds itself."""
    if isinstance(node, ast.Name):
        if isinstance(node.ctx, ast.Load) and node.id not in bound:
            yield node
        return
    if isinstance(node, ast.Lambda):
        names = {a.arg for a in [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs]}
        names |= {a.arg for a in (node.args.vararg, node.args.kwarg) if a is not None}
        for default in [*node.args.defaults, *node.args.kw_defaults]:
            if default is not None:
                yield from _walk_expression(default, bound)
        yield from _walk_expression(node.body, bound | names)
        return
    if isinstance(node, ast.ListComp | ast.SetComp | ast.GeneratorExp | ast.DictComp):
        inner = set(bound)
        for generator in node.generators:
            yield from _walk_expression(generator.iter, frozenset(inner))
            inner |= {n.id for n in ast.walk(generator.target) if isinstance(n, ast.Name)}
            for condition in generator.ifs:
                yield from _walk_expression(condition, frozenset(inner))
        parts = [node.key, node.value] if isinstance(node, ast.DictComp) else [node.elt]
        for part in parts:
            yield from _walk_expression(part, frozenset(inner))
        return
    for child in ast.iter_child_nodes(node):
        yield from _walk_expression(child, bound)


def _stored_names(targets: Iterable[ast.AST]) -> set[str]:
    """The plain names an assignment's targets bind (``a, b = ...``; not ``a[i] = ...``)."""
    names: set[str] = set()
    for target in targets:
        if isinstance(target, ast.Name):
            names.add(target.id)
        elif isinstance(target, ast.Tuple | ast.List):
            names |= _stored_names(target.elts)
        elif isinstance(target, ast.Starred):
            names |= _stored_names([target.value])
    return names


class _Function:
    """Reaching definitions over one function's body (nested functions are analysed on their own)."""

    def __init__(self, budget: list[int]) -> None:
        self.readers: dict[int, set[int]] = {}
        self._budget = budget

    def _charge(self, work: int) -> None:
        """Count ``work`` against the file's budget: copies and unions of states, and bindings
        read, as well as statements walked, so a hostile file cannot make the walk quadratic."""
        self._budget[0] -= work
        if self._budget[0] < 0:
            raise _TooMuchWork

    def _read(self, line: int, parts: Iterable[ast.AST | None], state: _State) -> None:
        for part in parts:
            if part is None:
                continue
            for name in _walk_expression(part):
                bindings = state.get(name.id, ())
                self._charge(len(bindings))
                for binding in bindings:
                    if binding != line:
                        self.readers.setdefault(binding, set()).add(line)

    @staticmethod
    def _bind(state: _State, names: Iterable[str], line: int) -> _State:
        for name in names:
            state[name] = frozenset((line,))
        return state

    def _copy(self, state: _State) -> _State:
        self._charge(len(state))
        return dict(state)

    def _union(self, *states: _State) -> _State:
        merged: _State = {}
        for state in states:
            self._charge(len(state))
            for name, lines in state.items():
                merged[name] = merged.get(name, frozenset()) | lines
        return merged

    def block(self, statements: list[ast.stmt], state: _State) -> _State:
        """The state after ``statements``; ``state`` is theirs to change (callers pass a copy of
        one they still need): copies are made at branches only, not at every binding."""
        for statement in statements:
            state = self.statement(statement, state)
        return state

    def _loop(self, body: list[ast.stmt], state: _State) -> _State:
        """A loop's body walked twice: the second walk sees what the first bound (the back edge)."""
        first = self.block(body, self._copy(state))
        return self._union(state, self.block(body, self._union(state, first)))

    def statement(self, node: ast.stmt, state: _State) -> _State:
        self._charge(1)
        line = node.lineno
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            decorators = node.decorator_list
            defaults: list[ast.AST | None] = []
            if not isinstance(node, ast.ClassDef):
                defaults = [*node.args.defaults, *node.args.kw_defaults]
            self._read(line, [*decorators, *defaults], state)
            return self._bind(state, [node.name], line)
        if isinstance(node, ast.Assign):
            self._read(line, [node.value, *node.targets], state)
            return self._bind(state, _stored_names(node.targets), line)
        if isinstance(node, ast.AnnAssign):
            self._read(line, [node.value, node.target], state)
            return self._bind(state, _stored_names([node.target]) if node.value is not None else (), line)
        if isinstance(node, ast.AugAssign):
            if isinstance(node.target, ast.Name):  # ``x += 1`` reads x (its ast says Store)
                self._read(line, [ast.Name(node.target.id, ast.Load())], state)
            self._read(line, [node.value, node.target], state)
            return self._bind(state, _stored_names([node.target]), line)
        if isinstance(node, ast.For | ast.AsyncFor):
            self._read(line, [node.iter], state)
            inside = self._bind(self._copy(state), _stored_names([node.target]), line)
            looped = self._loop(node.body, inside)
            return self.block(node.orelse, self._union(state, looped))
        if isinstance(node, ast.While):
            self._read(line, [node.test], state)
            looped = self._loop([*node.body, ast.Expr(node.test, lineno=line)], state)
            return self.block(node.orelse, looped)
        if isinstance(node, ast.If):
            self._read(line, [node.test], state)
            taken = self.block(node.body, self._copy(state))
            return self._union(taken, self.block(node.orelse, state))
        if isinstance(node, ast.With | ast.AsyncWith):
            self._read(line, [item.context_expr for item in node.items], state)
            names = _stored_names(
                [item.optional_vars for item in node.items if item.optional_vars is not None]
            )
            return self.block(node.body, self._bind(state, names, line))
        if isinstance(node, ast.Try | ast.TryStar):
            tried = self.block(node.body, self._copy(state))
            anywhere = self._union(state, tried)
            handled = [self.block(handler.body, self._copy(anywhere)) for handler in node.handlers]
            done = self.block(node.orelse, tried)
            if handled:
                done = self._union(done, *handled)
            return self.block(node.finalbody, self._union(done, anywhere) if node.finalbody else done)
        if isinstance(node, ast.Match):
            self._read(line, [node.subject], state)
            cases = [self.block(case.body, self._copy(state)) for case in node.cases]
            return self._union(state, *cases)
        if isinstance(node, ast.Delete):
            self._read(line, [t for t in node.targets if not isinstance(t, ast.Name)], state)
            for name in _stored_names(node.targets):
                state.pop(name, None)
            return state
        self._read(line, [node], state)  # a simple statement: every name in it
        return state


@lru_cache(maxsize=8)
def binding_readers(source: str) -> BindingReaders | None:
    """The statements of ``source`` and the readers of each assignment; ``None`` when the text
    does not parse or its nesting costs more than its size allows. Kept for the last few texts:
    a diff of every pass asks about the same file."""
    try:
        tree = parse_source(source)  # the parse other readers of this text share
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    try:
        statements = [node for node in ast.walk(tree) if isinstance(node, ast.stmt)]
    except RecursionError:
        return None
    budget = [WORK_PER_STATEMENT * len(statements) + 10_000]
    found: dict[int, set[int]] = {}
    try:
        bodies: list[list[ast.stmt]] = [tree.body]
        bodies += [n.body for n in statements if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
        for body in bodies:
            function = _Function(budget)
            function.block(body, {})
            for binding, lines in function.readers.items():
                found.setdefault(binding, set()).update(lines)
    except (_TooMuchWork, RecursionError):
        return None
    owner: dict[int, int] = {}
    for node in statements:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            for inner in ast.walk(node):  # outer functions first: the innermost writes last
                if isinstance(inner, ast.stmt) and inner is not node:
                    owner[inner.lineno] = node.lineno
    assignments = {
        node.lineno
        for node in statements
        if (isinstance(node, ast.Assign) and _stored_names(node.targets))
        or (isinstance(node, ast.AnnAssign) and node.value is not None and isinstance(node.target, ast.Name))
        or (isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name))
    }
    return BindingReaders(
        statement_lines=frozenset(node.lineno for node in statements),
        assignments=frozenset(assignments),
        readers={line: tuple(sorted(lines)) for line, lines in found.items() if line in assignments},
        owner=owner,
        definitions=frozenset(
            n.lineno for n in statements if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)
        ),
    )
