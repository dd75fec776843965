"""One scope of a module (a function, the ``__main__`` block or the top level) and what each
name in it is bound to, read from the source for the argument inference."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Protocol

from tilelang_lsp.source.folding import (
    MUTATORS,
    is_main_guard,
    item_of,
    own_nodes,
    root_name,
)

Found = tuple[ast.expr, "Scope"]
"""An expression and the scope its names are read in."""


@dataclass(frozen=True)
class Binding:
    """One place a scope binds a name."""

    line: int
    value: ast.expr | None
    """What it is bound to; ``None`` when bound some other way (``+=``, ``import``, ``with ... as``)."""
    straight: bool
    """Made by a statement that runs once, in order (not in a branch or a loop)."""
    parameter: bool = False


class ModuleNames(Protocol):
    """What a scope reads of the module around it (``module_scope.ModuleScope``)."""

    tree: ast.Module
    parents: dict[ast.AST, ast.AST]
    """Each node's parent node."""
    defined: set[str]
    """Names the module defines when imported, builtins included."""

    def passed_argument(self, scope: Scope, name: str) -> Found | None:
        """The argument the function's first call passes for the parameter ``name``."""


class Scope:
    """A function, the ``__main__`` block or the module's top level, read for what each name in it
    is bound to: parameters (to the function's first call's argument, else their default) and
    assignments (``block_M = 64``, ``M, N = args.m, args.n``, ``for M in [256, 512]``). A name
    bound more than once has the value of the last assignment before its use when all of them run
    in order, else none."""

    def __init__(
        self,
        module: ModuleNames,
        node: ast.FunctionDef | ast.AsyncFunctionDef | ast.If | None,
        parent: Scope | None,
        passed: dict[str, Found] | None = None,
    ) -> None:
        self.module = module
        self.node = node
        self.parent = parent
        self.passed = passed
        """The parameters' arguments in one particular call (an ``__init__`` for one object)."""
        self.bound: dict[str, list[Binding]] = {}
        """Each name's bindings, in source order."""
        self._valued: set[int] = set()
        self.changed: set[str] = set()
        """Names whose dict or list is changed in place (``config["block_M"] = 128``)."""
        self.changed_members: set[tuple[str, str]] = set()
        """``(name, attribute)`` assigned in place (``args.block_m = 128``)."""
        self.parameters: list[str] = []
        """Parameters in order: the first ``positional`` of them positional, then keyword-only ones."""
        self.positional = 0
        self.defaults: dict[str, ast.expr] = {}
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            arguments = node.args
            positional = [*arguments.posonlyargs, *arguments.args]
            self.positional = len(positional)
            self.parameters = [a.arg for a in [*positional, *arguments.kwonlyargs]]
            with_defaults = positional[len(positional) - len(arguments.defaults) :]
            for argument, default in zip(with_defaults, arguments.defaults, strict=True):
                self.defaults[argument.arg] = default
            for argument, kw_default in zip(arguments.kwonlyargs, arguments.kw_defaults, strict=True):
                if kw_default is not None:
                    self.defaults[argument.arg] = kw_default
            for name in self.parameters:
                self.bound[name] = [Binding(node.lineno, None, True, parameter=True)]
            for extra in (arguments.vararg, arguments.kwarg):
                if extra is not None:
                    self.bound[extra.arg] = [Binding(node.lineno, None, False)]
        if node is not None:
            for child in own_nodes(node):
                self._record(child)

    def _add(self, name: str, line: int, value: ast.expr | None, straight: bool) -> None:
        self.bound.setdefault(name, []).append(Binding(line, value, straight))

    def _straight(self, statement: ast.AST) -> bool:
        parent = self.module.parents.get(statement)
        while parent is not None and parent is not self.node:
            if not isinstance(parent, (ast.With, ast.AsyncWith)):
                return False
            parent = self.module.parents.get(parent)
        return True

    def _record(self, node: ast.AST) -> None:
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            if id(node) not in self._valued and not self._in_comprehension(node):
                self._add(node.id, node.lineno, None, False)
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, (ast.Store, ast.Del)):
            root = root_name(node.value)
            if root is not None:
                self.changed.add(root)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, (ast.Store, ast.Del)):
            if isinstance(node.value, ast.Name):
                self.changed_members.add((node.value.id, node.attr))
        elif (
            isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in MUTATORS
        ):
            root = root_name(node.func.value)
            if root is not None:
                self.changed.add(root)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            self._add(node.name, node.lineno, None, False)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                self._add((alias.asname or alias.name).split(".")[0], node.lineno, None, False)
        if isinstance(node, ast.Assign):
            for target in node.targets:
                self._bind(target, node.value, node.lineno, self._straight(node))
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            self._bind(node.target, node.value, node.lineno, self._straight(node))
        elif isinstance(node, (ast.For, ast.AsyncFor)):
            self._bind(node.target, item_of(node.iter, 0), node.lineno, False)  # the first iteration's

    def _in_comprehension(self, target: ast.Name) -> bool:
        """A comprehension's loop variable, which lives in the comprehension's own scope."""
        parent = self.module.parents.get(target)
        while isinstance(parent, (ast.Tuple, ast.List, ast.Starred)):
            parent = self.module.parents.get(parent)
        return isinstance(parent, ast.comprehension)

    def _bind(self, target: ast.expr, value: ast.expr, line: int, straight: bool) -> None:
        if isinstance(target, ast.Name):
            self._add(target.id, line, value, straight)
            self._valued.add(id(target))
        elif isinstance(target, (ast.Tuple, ast.List)) and not any(
            isinstance(e, ast.Starred) for e in target.elts
        ):
            if (
                isinstance(value, (ast.Tuple, ast.List))
                and len(value.elts) == len(target.elts)
                and not any(isinstance(e, ast.Starred) for e in value.elts)
            ):
                for element, item in zip(target.elts, value.elts, strict=True):
                    self._bind(element, item, line, straight)
            else:
                for index, element in enumerate(target.elts):
                    self._bind(element, item_of(value, index), line, straight)

    def binding(self, name: str, line: int) -> Binding | None:
        """The binding of ``name`` that holds at ``line``: its only one, else the last one before
        ``line`` when all of them run in order."""
        bindings = self.bound[name]
        if len(bindings) == 1:
            return bindings[0]
        if not all(b.straight for b in bindings):
            return None
        before = [b for b in bindings if b.line < line]
        return before[-1] if before else None

    def lookup(self, name: str, line: int = 0) -> list[Found] | None:
        """What ``name`` (used at ``line``) may stand for, best first: ``None`` for a name the
        module defines (kept as written), an empty list when nothing tells its value."""
        if name not in self.bound:
            if self.parent is not None:
                return self.parent.lookup(name, line)  # a closure's name, or the module's
            return None if name in self.module.defined else []
        binding = self.binding(name, line)
        if binding is None:
            return []
        if binding.parameter:
            found: list[Found] = []
            passed = (
                self.passed.get(name) if self.passed is not None else self.module.passed_argument(self, name)
            )
            if passed is not None:
                found.append(passed)
            if name in self.defaults and self.parent is not None:
                found.append((self.defaults[name], self.parent))
            return found
        if binding.value is None:
            return []
        if name in self.changed and isinstance(binding.value, (ast.Dict, ast.List, ast.Call)):
            return []  # a dict or list changed after it was made: its literal is stale
        return [(binding.value, self)]

    def nodes(self) -> Iterator[ast.AST]:
        """The scope's own nodes (the module's: outside functions and the ``__main__`` block)."""
        if self.node is not None:
            yield from own_nodes(self.node)
            return
        for statement in self.module.tree.body:
            if not isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and not (
                is_main_guard(statement)
            ):
                yield from ast.walk(statement)
