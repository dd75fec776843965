"""What a call's arguments are when the source alone says so for sure: literals (numbers,
strings, dtype names like ``T.float16``, containers of them), names bound exactly once, in the
call's own scope, to such a value (``N = 256`` or ``N, K = 256, 256``), integer arithmetic over
them (``batch * seq_len``), and the fields of a config built from them and never changed: a dict
(``cfg["d_hidden"]``) or a dataclass or plain class of this file (``cfg.d_hidden``). Anything else
is unknown: running the program (the worker's entry-point run) is what knows it, never a guess
from the text.
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable, Iterator
from typing import Any

from irtrace.base.errors import UsageError
from irtrace.targets.specs import literal_value

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
        self._read_only: dict[int, bool] = {}
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
        """``node``'s value when the source settles it (see the module); ``Unknown`` otherwise."""
        return self._value(node, scope, _MAX_DEPTH)

    def _value(self, node: ast.expr, scope: Scope, depth: int) -> Any:
        if depth <= 0:  # a chain of names too long, or one that loops (``a = b; b = a``)
            raise Unknown(ast.unparse(node))
        try:
            return literal_value(node, "call")
        except UsageError:
            pass
        if isinstance(node, ast.BinOp) and type(node.op) in _INTEGER_OPERATIONS:
            return _integer_result(
                node.op, self._value(node.left, scope, depth - 1), self._value(node.right, scope, depth - 1)
            )
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            operand = self._value(node.operand, scope, depth - 1)
            if type(operand) is int:
                return -operand
            raise Unknown(ast.unparse(node))
        if isinstance(node, (ast.Subscript, ast.Attribute)) and isinstance(node.ctx, ast.Load):
            return self._field(node, scope, depth)
        if not isinstance(node, ast.Name):
            raise Unknown(ast.unparse(node))
        bound, where = self._binding(node.id, scope)
        value = self._bound_value(node.id, bound, where)
        return self._value(value, where, depth - 1)

    def _binding(self, name: str, scope: Scope) -> tuple[ast.AST, Scope]:
        """The one node that binds ``name`` as ``scope`` reads it, and the scope it is bound in."""
        where: Scope = scope
        while True:  # the innermost enclosing scope that binds the name decides
            bindings = self._bindings.setdefault(id(where), _bindings(where)).get(name)
            if bindings is not None or where is self.tree:
                break
            where = self.scope_of(where)
        if bindings is None:
            raise Unknown(name)  # a builtin, or a name defined nowhere
        if where is self.tree and name in self._declared_global:
            raise Unknown(name)  # a function rebinds it with ``global``
        if len(bindings) != 1:
            raise Unknown(name)
        return bindings[0], where

    def _bound_value(self, name: str, bound: ast.AST, where: Scope) -> ast.expr:
        """The expression ``name`` is bound to: ``name = value``, or its element of a tuple
        assignment of as many values (``N, K = 256, 256``)."""
        parent = self.parents.get(bound)
        if isinstance(parent, ast.Assign) and len(parent.targets) == 1 and parent.targets[0] is bound:
            return parent.value
        if isinstance(parent, (ast.Tuple, ast.List)) and not any(
            isinstance(e, ast.Starred) for e in parent.elts
        ):
            assign = self.parents.get(parent)
            if (
                isinstance(assign, ast.Assign)
                and len(assign.targets) == 1
                and assign.targets[0] is parent
                and isinstance(assign.value, (ast.Tuple, ast.List))
                and len(assign.value.elts) == len(parent.elts)
                and not any(isinstance(e, ast.Starred) for e in assign.value.elts)
            ):
                return assign.value.elts[parent.elts.index(bound)]  # type: ignore[arg-type]
        raise Unknown(name)

    # ------------------------------------------------------------------------- config objects

    def _field(self, node: ast.Subscript | ast.Attribute, scope: Scope, depth: int) -> Any:
        """``cfg["key"]`` or ``cfg.key`` of a config the file builds from settled values and never
        changes, or ``Config.key`` of a class of this file."""
        owner = node.value
        if not isinstance(owner, ast.Name):
            raise Unknown(ast.unparse(node))
        key: Any
        if isinstance(node, ast.Subscript):
            key = self._value(node.slice, scope, depth - 1)
            if not isinstance(key, str):
                raise Unknown(ast.unparse(node))
        else:
            key = node.attr
        bound, where = self._binding(owner.id, scope)
        if not self._only_read_fields(owner.id, bound):
            raise Unknown(ast.unparse(node))
        if isinstance(bound, ast.ClassDef):  # ``Config.key``: a class attribute
            if isinstance(node, ast.Subscript):
                raise Unknown(ast.unparse(node))
            fields = self._class_fields(bound)
        else:
            fields = self._config_fields(
                self._bound_value(owner.id, bound, where), where, isinstance(node, ast.Subscript)
            )
        if key not in fields:
            raise Unknown(ast.unparse(node))
        expression, home = fields[key]
        return self._value(expression, home, depth - 1)

    def _only_read_fields(self, name: str, bound: ast.AST) -> bool:
        """Whether every use of the ``name`` bound at ``bound`` reads one of its fields (``cfg.M``,
        ``cfg["M"]``): handed to a function, called a method of, or written to, it may change."""
        if id(bound) not in self._read_only:
            self._read_only[id(bound)] = self._fields_only_read(name, bound)
        return self._read_only[id(bound)]

    def _fields_only_read(self, name: str, bound: ast.AST) -> bool:
        for node in ast.walk(self.tree):
            if not (isinstance(node, ast.Name) and node.id == name and isinstance(node.ctx, ast.Load)):
                continue
            try:
                if self._binding(name, self.scope_of(node))[0] is not bound:
                    continue  # another variable of that name
            except Unknown:
                continue  # bound elsewhere more than once, or nowhere: not this one
            parent = self.parents.get(node)
            if isinstance(parent, ast.Call) and parent.func is node:
                continue  # ``Config(...)``: building one
            if not (isinstance(parent, (ast.Attribute, ast.Subscript)) and parent.value is node):
                return False
            if not isinstance(parent.ctx, ast.Load):
                return False
            grand = self.parents.get(parent)
            if isinstance(grand, ast.Call) and grand.func is parent:
                return False  # ``cfg.update(...)``
            if isinstance(grand, (ast.Attribute, ast.Subscript)) and not isinstance(grand.ctx, ast.Load):
                return False  # ``cfg.inner.M = 4``
        return True

    def _config_fields(
        self, built: ast.expr, where: Scope, by_key: bool
    ) -> dict[str, tuple[ast.expr, Scope]]:
        """The fields of a config expression: a dict display or ``dict(...)`` (read by key), an
        instance of a dataclass or plain class of this file (read by attribute)."""
        if by_key and isinstance(built, ast.Dict):
            fields: dict[str, tuple[ast.expr, Scope]] = {}
            for key, value in zip(built.keys, built.values, strict=True):
                if not (isinstance(key, ast.Constant) and isinstance(key.value, str)) or key.value in fields:
                    raise Unknown("a dict with computed, repeated or unpacked keys")
                fields[key.value] = (value, where)
            return fields
        if not isinstance(built, ast.Call) or not isinstance(built.func, ast.Name):
            raise Unknown(ast.unparse(built))
        if any(k.arg is None for k in built.keywords) or any(isinstance(a, ast.Starred) for a in built.args):
            raise Unknown(ast.unparse(built))
        given = {k.arg: (k.value, where) for k in built.keywords if k.arg is not None}
        if by_key:
            if built.func.id != "dict" or built.args or "dict" in self._bindings_of_module():
                raise Unknown(ast.unparse(built))
            return given
        klass, _ = self._binding(built.func.id, where)
        if not isinstance(klass, ast.ClassDef):
            raise Unknown(ast.unparse(built))
        if not _is_dataclass(klass):
            if built.args or built.keywords:
                raise Unknown(ast.unparse(built))  # its own ``__init__`` decides
            return self._class_fields(klass)
        order = [
            n.target.id for n in klass.body if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)
        ]
        if len(built.args) > len(order):
            raise Unknown(ast.unparse(built))
        fields = {
            n.target.id: (_field_default(n.value), klass)
            for n in klass.body
            if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name) and n.value is not None
        }
        fields.update({name: (value, where) for name, value in zip(order, built.args, strict=False)})
        fields.update(given)
        return fields

    def _class_fields(self, klass: ast.ClassDef) -> dict[str, tuple[ast.expr, Scope]]:
        """A class's attributes bound once in its body to an expression, when nothing in it
        (``__init__``, ``__post_init__``, ``__getattr__``, a base class, a decorator other than
        ``@dataclass``) can make an instance's differ."""
        if klass.bases or klass.keywords or not (_is_dataclass(klass) or not klass.decorator_list):
            raise Unknown(klass.name)
        methods = {n.name for n in klass.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
        if methods & {"__init__", "__post_init__", "__getattr__", "__getattribute__", "__new__"}:
            raise Unknown(klass.name)
        bindings = self._bindings.setdefault(id(klass), _bindings(klass))
        fields: dict[str, tuple[ast.expr, Scope]] = {}
        for statement in klass.body:
            target: ast.expr | None = None
            if isinstance(statement, ast.AnnAssign):
                target = statement.target
            elif isinstance(statement, ast.Assign) and len(statement.targets) == 1:
                target = statement.targets[0]
            value = getattr(statement, "value", None)
            if isinstance(target, ast.Name) and value is not None and len(bindings.get(target.id, [])) == 1:
                fields[target.id] = (value, klass)  # ``field(...)`` is a call: unknown when read
        return fields

    def _bindings_of_module(self) -> dict[str, list[ast.AST]]:
        return self._bindings.setdefault(id(self.tree), _bindings(self.tree))


_MAX_DEPTH = 32
"""How many names, fields and operations one value may go through: a loop of names ends here."""

_INTEGER_OPERATIONS: dict[type[ast.operator], Callable[[int, int], int]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.LShift: operator.lshift,
}
"""Integer arithmetic a size is written with (``batch * seq_len``, ``1 << 20``)."""
_LARGEST = 1 << 64
"""No size is larger: a bigger result (``1 << 10**9``, an attack) is unknown, never computed."""


def _integer_result(op: ast.operator, left: Any, right: Any) -> int:
    if type(left) is not int or type(right) is not int:
        raise Unknown("arithmetic on something other than integers")
    if isinstance(op, ast.LShift) and not 0 <= right < 64:
        raise Unknown("a shift out of range")
    if isinstance(op, (ast.FloorDiv, ast.Mod)) and right == 0:
        raise Unknown("a division by zero")
    result = _INTEGER_OPERATIONS[type(op)](left, right)
    if abs(result) > _LARGEST:
        raise Unknown("a value larger than any size")
    return result


def _is_dataclass(klass: ast.ClassDef) -> bool:
    names = [ast.unparse(d.func if isinstance(d, ast.Call) else d) for d in klass.decorator_list]
    return names in (["dataclass"], ["dataclasses.dataclass"])


def _field_default(value: ast.expr) -> ast.expr:
    """A dataclass field's default: ``field(default=X)`` gives ``X``; any other ``field(...)``
    (``default_factory``) stays a call, unknown when read."""
    if (
        isinstance(value, ast.Call)
        and ast.unparse(value.func) in ("field", "dataclasses.field")
        and not value.args
        and [k.arg for k in value.keywords] == ["default"]
    ):
        return value.keywords[0].value
    return value
