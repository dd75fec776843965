"""What a call's arguments are when the source alone says so for sure: literals (numbers,
strings, dtype names like ``T.float16``, containers of them) and names bound exactly once, in the
call's own scope, to such a literal. Anything else is unknown: running the program (the worker's
entry-point run) is what knows it, never a guess from the text.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from typing import Any

from irtrace.core.errors import UsageError
from irtrace.core.specs import literal_value

Scope = ast.Module | ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda | ast.ClassDef


class Unknown(Exception):
    """A value the source does not settle."""


def own_nodes(function: ast.AST) -> Iterator[ast.AST]:
    """The nodes of a scope's body, not of functions, classes or lambdas defined inside it."""
    stack: list[ast.AST] = list(reversed(list(ast.iter_child_nodes(function))))
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        stack.extend(reversed(list(ast.iter_child_nodes(node))))


def _bindings(scope: ast.AST) -> dict[str, list[ast.AST]]:
    """Every binding of each name in ``scope`` (assignments, loops, imports, definitions, ``global``
    and ``nonlocal`` declarations, parameters): a name bound more than once is not settled."""
    found: dict[str, list[ast.AST]] = {}
    if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
        arguments = scope.args
        for argument in [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs]:
            found.setdefault(argument.arg, []).append(argument)
        for extra in (arguments.vararg, arguments.kwarg):
            if extra is not None:
                found.setdefault(extra.arg, []).append(extra)
    for node in own_nodes(scope):
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            found.setdefault(node.id, []).append(node)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            found.setdefault(node.name, []).append(node)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                found.setdefault((alias.asname or alias.name).split(".")[0], []).append(node)
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            for name in node.names:  # changed from elsewhere: never settled
                found.setdefault(name, []).extend([node, node])
    return found


class LiteralScope:
    """The literal values of a module's names, scope by scope."""

    def __init__(self, tree: ast.Module) -> None:
        self.tree = tree
        self.parents: dict[ast.AST, ast.AST] = {}
        for parent in ast.walk(tree):
            for child in ast.iter_child_nodes(parent):
                self.parents[child] = parent
        self._bindings: dict[int, dict[str, list[ast.AST]]] = {}
        self._declared_global = {
            name for node in ast.walk(tree) if isinstance(node, ast.Global) for name in node.names
        }

    def scope_of(self, node: ast.AST) -> Scope:
        """The function, class or module whose names ``node`` reads."""
        parent = self.parents.get(node)
        while parent is not None and not isinstance(
            parent, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)
        ):
            parent = self.parents.get(parent)
        return parent if parent is not None else self.tree

    def value(self, node: ast.expr, scope: Scope) -> Any:
        """``node``'s value when it is a literal or a name bound once in ``scope`` (or, for a name
        ``scope`` never binds, in the module) to one; ``Unknown`` otherwise."""
        try:
            return literal_value(node, "call")
        except UsageError:
            pass
        if not isinstance(node, ast.Name):
            raise Unknown(ast.unparse(node))
        where: ast.AST = scope
        while True:  # the innermost enclosing scope that binds the name decides
            bindings = self._bindings.setdefault(id(where), _bindings(where)).get(node.id)
            if bindings is not None or where is self.tree:
                break
            where = self.scope_of(where)
        if bindings is not None:
            if where is self.tree and node.id in self._declared_global:
                raise Unknown(node.id)  # a function rebinds it with ``global``
            if len(bindings) != 1:
                raise Unknown(node.id)
            binding = self.parents.get(bindings[0])
            if not (
                isinstance(binding, ast.Assign)
                and len(binding.targets) == 1
                and binding.targets[0] is bindings[0]
            ):
                raise Unknown(node.id)
            try:
                return literal_value(binding.value, "call")
            except UsageError:
                raise Unknown(node.id) from None
        raise Unknown(node.id)  # a builtin, or a name defined nowhere
