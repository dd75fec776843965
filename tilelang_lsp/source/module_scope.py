"""What a kernel call's arguments stand for, followed through a module's names, parameters,
calls, objects and command-line defaults without running anything (the argument inference)."""

from __future__ import annotations

import ast
import builtins
import contextlib
import copy
from typing import Any

from irtrace.core.errors import UsageError
from irtrace.core.specs import Expression, literal_value
from tilelang_lsp.source.folding import (
    FOLDED_CALLS,
    MAX_DEPTH,
    NOT_VALUES,
    PURE_ROOTS,
    RESHAPES,
    SAME_SHAPE,
    TENSOR_FACTORIES,
    Unknown,
    bound_names,
    element_of,
    field_default,
    fold,
    is_main_guard,
    is_plain,
    is_small,
    option_default,
    own_nodes,
    root_name,
)
from tilelang_lsp.source.scope import Found, Scope


class ModuleScope:
    """What a call site's arguments may refer to: names the module defines when imported (its
    ``__main__`` block does not run, so they are kept as written and evaluated by the worker), and
    what the source says each function's and that block's own names are bound to."""

    def __init__(self, tree: ast.Module) -> None:
        self.tree = tree
        self.own: set[str] = set()
        for statement in tree.body:
            if not is_main_guard(statement):
                self.own.update(bound_names(statement))
        self.defined: set[str] = set(dir(builtins)) | self.own
        self.parents: dict[ast.AST, ast.AST] = {}
        self.calls: dict[str, list[ast.Call]] = {}
        """Calls of each plain name (``main(...)``), for the values a function's parameters take."""
        self.applies: dict[str, list[ast.Call]] = {}
        """Calls of each class's ``.apply`` (``_attention.apply(q, k, v)``, or through a name
        bound to it: ``attention = _attention.apply``): an autograd function's ``forward``'s."""
        aliases: dict[str, str] = {}
        for parent in ast.walk(tree):
            for child in ast.iter_child_nodes(parent):
                self.parents[child] = parent
            if isinstance(parent, ast.Call) and isinstance(parent.func, ast.Name):
                self.calls.setdefault(parent.func.id, []).append(parent)
            elif (
                isinstance(parent, ast.Call)
                and isinstance(parent.func, ast.Attribute)
                and parent.func.attr == "apply"
                and isinstance(parent.func.value, ast.Name)
            ):
                self.applies.setdefault(parent.func.value.id, []).append(parent)
            elif (
                isinstance(parent, ast.Assign)
                and len(parent.targets) == 1
                and isinstance(parent.targets[0], ast.Name)
                and isinstance(parent.value, ast.Attribute)
                and parent.value.attr == "apply"
                and isinstance(parent.value.value, ast.Name)
            ):
                aliases[parent.targets[0].id] = parent.value.value.id
        for alias, cls in aliases.items():
            self.applies.setdefault(cls, []).extend(self.calls.get(alias, []))
        self.functions = {
            n.name: n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
        }
        self.classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
        self.top = Scope(self, None, None)
        self._scopes: dict[object, Scope] = {}
        self._values: dict[tuple[int, str, int], ast.expr | None] = {}
        self._resolving: set[tuple[int, str, int]] = set()

    def _enclosing(self, node: ast.AST) -> ast.FunctionDef | ast.AsyncFunctionDef | ast.If | None:
        scope = self.parents.get(node)
        while scope is not None and not (
            isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef))
            or (isinstance(scope, ast.If) and is_main_guard(scope) and scope in self.tree.body)
        ):
            scope = self.parents.get(scope)
        assert scope is None or isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef, ast.If))
        return scope

    def scope_of(self, node: ast.AST) -> Scope:
        """The scope of the function (or ``__main__`` block) holding ``node``."""
        return self._scope(self._enclosing(node))

    def _scope(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.If | None) -> Scope:
        if node is None:
            return self.top
        if node not in self._scopes:
            self._scopes[node] = Scope(self, node, self.scope_of(node))
        return self._scopes[node]

    def in_main_block(self, node: ast.AST) -> bool:
        scope = self._enclosing(node)
        while isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)):
            scope = self._enclosing(scope)
        return scope is not None

    def _autograd_class(self, function: ast.AST | None) -> ast.ClassDef | None:
        """The module-level ``torch.autograd.Function`` subclass ``function`` is a method of."""
        cls = self.parents.get(function) if function is not None else None
        if not (isinstance(cls, ast.ClassDef) and self.classes.get(cls.name) is cls):
            return None
        return cls if any(ast.unparse(b).endswith("Function") for b in cls.bases) else None

    def passed_argument(self, scope: Scope, name: str) -> Found | None:
        """The argument the first call of a module-level function passes for its parameter
        ``name`` (a call in the ``__main__`` block first): ``main(args.batch, ...)``; for an
        autograd function's ``forward``, the first ``.apply(...)``'s (it takes no ``ctx``)."""
        function = scope.node
        if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return None
        cls = self._autograd_class(function)
        if self.functions.get(function.name) is function:
            calls = [
                call
                for call in self.calls.get(function.name, [])
                if self._enclosing(call) is not function and self.scope_of(call).lookup(function.name) is None
            ]
            skipped = 0
        elif cls is not None and function.name == "forward":
            calls, skipped = self.applies.get(cls.name, []), 1
        else:
            return None
        if not calls:
            return None
        call = min(calls, key=lambda c: (not self.in_main_block(c), c.lineno, c.col_offset))
        caller = self.scope_of(call)
        index = scope.parameters.index(name) - skipped
        if index < 0:
            return None
        if index < scope.positional - skipped:
            if any(isinstance(a, ast.Starred) for a in call.args[: index + 1]):
                return None
            if index < len(call.args):
                return call.args[index], caller
        for keyword in call.keywords:
            if keyword.arg == name:
                return keyword.value, caller
        return None

    def _saved_on_context(self, scope: Scope, name: str, attr: str) -> Found | None:
        """In an autograd function's ``backward``, what ``forward`` put on the context:
        ``ctx.causal = causal``, ``ctx.save_for_backward(q, k, v)`` for ``ctx.saved_tensors``."""
        cls = self._autograd_class(scope.node)
        if cls is None or scope.node is None or not scope.parameters or scope.parameters[0] != name:
            return None
        forward = next((n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "forward"), None)
        if forward is None or forward is scope.node:
            return None
        inner = self._scope(forward)
        if not inner.parameters:
            return None
        context = inner.parameters[0]
        found: list[ast.expr] = []
        for node in own_nodes(forward):
            if (
                attr == "saved_tensors"
                and isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
            ):
                if node.func.attr == "save_for_backward" and ast.unparse(node.func.value) == context:
                    found.append(ast.Tuple(elts=list(node.args), ctx=ast.Load()))
            elif isinstance(node, ast.Assign):
                found.extend(
                    node.value
                    for t in node.targets
                    if isinstance(t, ast.Attribute) and t.attr == attr and ast.unparse(t.value) == context
                )
        return (found[0], inner) if len(found) == 1 else None

    def definition(self, node: ast.expr, scope: Scope, depth: int = 0) -> Found:
        """What an expression stands for, followed through assignments, parameters, tuple
        items and members the source tells (``args.m``, ``q.shape``), not computed."""
        while depth <= MAX_DEPTH:
            depth += 1
            if isinstance(node, ast.Name):
                found = scope.lookup(node.id, node.lineno)
                if found is None:
                    break
                if not found:
                    raise Unknown(node.id)
                node, scope = found[0]
            elif isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
                base, where = self.definition(node.value, scope, depth)
                element = element_of(base, node.slice)
                if element is None:
                    break
                node, scope = element, where
            elif isinstance(node, ast.Attribute):
                member = self._member(node.value, scope, node.attr, depth)
                if member is None:
                    break
                node, scope = member
            else:
                break
        else:
            raise Unknown("too deep")
        return node, scope

    def argument(self, node: ast.expr, scope: Scope, where: str, direct: bool = True) -> Any:
        """A call-site argument's value: a literal, or an ``Expression`` over module-level names."""
        with contextlib.suppress(UsageError):
            return literal_value(node, where)
        if direct and all(
            scope.lookup(n.id, n.lineno) is None for n in ast.walk(node) if isinstance(n, ast.Name)
        ):
            if isinstance(node, NOT_VALUES) or any(isinstance(n, NOT_VALUES) for n in ast.walk(node)):
                raise Unknown(where)
            return Expression(ast.unparse(node))  # over the module's names only: kept as written
        closed = self.value(node, scope, 0, direct)
        try:
            return literal_value(closed, where)
        except UsageError:
            return Expression(ast.unparse(closed))

    def value(self, node: ast.expr, scope: Scope, depth: int = 0, direct: bool = False) -> ast.expr:
        """``node`` with the scope's names replaced by what they are bound to and folded where all
        is known: constants, or an expression over module-level names; ``Unknown`` otherwise.

        ``direct``: ``node`` is written at the call site, where calls of anything the module
        defines are kept (``determine_fp8_type()``); in values bound elsewhere, only calls of
        the module's own functions and of ``math``/TileLang are.
        """
        if depth > MAX_DEPTH or isinstance(node, NOT_VALUES):
            raise Unknown(ast.unparse(node))
        if isinstance(node, ast.Constant):
            return node
        if isinstance(node, ast.Name):
            return self._name_value(node, scope, depth)
        if isinstance(node, ast.Attribute):
            member = self._member(node.value, scope, node.attr, depth)
            if member is not None:
                return self.value(member[0], member[1], depth + 1)
            base = self.value(node.value, scope, depth + 1, direct)
            return ast.Attribute(value=base, attr=node.attr, ctx=ast.Load())
        if isinstance(node, ast.Subscript):
            return self._subscript_value(node, scope, depth, direct)
        if isinstance(node, ast.Call):
            return self._call_value(node, scope, depth, direct)
        if isinstance(node, ast.IfExp):
            test = self.value(node.test, scope, depth + 1, direct)
            if isinstance(test, ast.Constant):
                return self.value(node.body if test.value else node.orelse, scope, depth + 1, direct)
        if isinstance(node, ast.Dict) and any(k is None for k in node.keys):
            raise Unknown("**")
        return fold(self._children(node, scope, depth, direct))

    def _children(self, node: ast.expr, scope: Scope, depth: int, direct: bool) -> ast.expr:
        rebuilt = copy.copy(node)
        for name, old in ast.iter_fields(node):
            if isinstance(old, ast.expr):
                setattr(rebuilt, name, self.value(old, scope, depth + 1, direct))
            elif isinstance(old, list):
                items: list[Any] = []
                for item in old:
                    if isinstance(item, ast.expr):
                        items.append(self.value(item, scope, depth + 1, direct))
                    elif isinstance(item, ast.keyword):
                        value = self.value(item.value, scope, depth + 1, direct)
                        items.append(ast.keyword(arg=item.arg, value=value))
                    else:
                        items.append(item)
                setattr(rebuilt, name, items)
        return rebuilt

    def _name_value(self, node: ast.Name, scope: Scope, depth: int) -> ast.expr:
        found = scope.lookup(node.id, node.lineno)
        if found is None:
            return node
        if not found:
            raise Unknown(node.id)
        key = (id(scope), node.id, id(found[0][0]))
        if key in self._values:
            cached = self._values[key]
            if cached is None:
                raise Unknown(node.id)
            return cached
        if key in self._resolving:
            raise Unknown(node.id)
        self._resolving.add(key)
        result: ast.expr | None = None
        try:
            for expression, where in found:
                with contextlib.suppress(Unknown):
                    result = self.value(expression, where, depth + 1)
                    break
        finally:
            self._resolving.discard(key)
        self._values[key] = result
        if result is None:
            raise Unknown(node.id)
        return result

    def _subscript_value(self, node: ast.Subscript, scope: Scope, depth: int, direct: bool) -> ast.expr:
        index = self.value(node.slice, scope, depth + 1, direct)
        base, where = self.definition(node.value, scope, depth)
        element = element_of(base, index)
        if element is not None:
            return self.value(element, where, depth + 1)
        container = self.value(node.value, scope, depth + 1, direct)
        element = element_of(container, index)
        if element is not None:
            return element
        return ast.Subscript(value=container, slice=index, ctx=ast.Load())

    def _call_value(self, node: ast.Call, scope: Scope, depth: int, direct: bool) -> ast.expr:
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr == "size":
            shape = self.tensor_shape(func.value, scope, depth)
            if shape is not None:
                sizes, where = shape
                if not node.args:
                    return self.value(ast.Tuple(elts=sizes, ctx=ast.Load()), where, depth + 1)
                index = self.value(node.args[0], scope, depth + 1)
                if isinstance(index, ast.Constant) and isinstance(index.value, int):
                    with contextlib.suppress(IndexError):
                        return self.value(sizes[index.value], where, depth + 1)
                raise Unknown("size")
        root = root_name(func)
        module_level = root is not None and scope.lookup(root) is None
        name = ast.unparse(func)
        if name in FOLDED_CALLS and module_level and not (isinstance(func, ast.Name) and name in self.own):
            arguments = [self.value(a, scope, depth + 1, direct) for a in node.args]
            if not node.keywords and all(isinstance(a, ast.Constant) for a in arguments):
                with contextlib.suppress(ArithmeticError, TypeError, ValueError):
                    result = FOLDED_CALLS[name](*(a.value for a in arguments if isinstance(a, ast.Constant)))
                    if is_plain(result) and is_small(result):
                        return ast.copy_location(ast.Constant(result), node)
        if not direct and not (
            isinstance(func, ast.Name) or (isinstance(func, ast.Attribute) and root in PURE_ROOTS)
        ):
            raise Unknown(name)
        return self._children(node, scope, depth, direct)

    def _member(self, base: ast.expr, scope: Scope, attr: str, depth: int) -> Found | None:
        """``args.block_m`` of a parsed command line (its ``default=``), ``config.block_M`` of a
        dataclass or namespace built in the source, ``x.shape`` of a tensor made with known sizes;
        ``None`` when ``base`` is none of these."""
        if isinstance(base, ast.Name):
            saved = self._saved_on_context(scope, base.id, attr)
            if saved is not None:
                return saved
            if (base.id, attr) in scope.changed_members:
                raise Unknown(attr)
        node, where = self.definition(base, scope, depth + 1)
        parsed = self.parsed_arguments(node, where, depth)
        if parsed is not None:
            if attr not in parsed:
                raise Unknown(attr)
            return parsed[attr]
        if isinstance(node, ast.Call):
            fields = self._fields(node, where)
            if fields is not None:
                if attr not in fields:
                    raise Unknown(attr)
                return fields[attr]
        if attr == "shape":
            shape = self.tensor_shape(node, where, depth)
            if shape is not None:
                return ast.Tuple(elts=shape[0], ctx=ast.Load()), shape[1]
        return None

    def _fields(self, call: ast.Call, scope: Scope) -> dict[str, Found] | None:
        """The attributes of an object the call builds, when the source says them: a class of this
        module (a dataclass, a ``NamedTuple``, class attributes, ``self.block_M = 128`` in its
        ``__init__``) or a ``SimpleNamespace(...)``."""
        name = ast.unparse(call.func)
        if root_name(call.func) is None or scope.lookup(str(root_name(call.func))) is not None:
            return None
        if any(k.arg is None for k in call.keywords):
            raise Unknown("**")
        given = {k.arg: (k.value, scope) for k in call.keywords if k.arg is not None}
        if name in ("SimpleNamespace", "types.SimpleNamespace", "argparse.Namespace", "Namespace"):
            return given
        cls = self.classes.get(name)
        if cls is None:
            return None
        init = next((n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"), None)
        if init is not None:
            return self._initialized(init, call, scope)
        fields: dict[str, Found] = {}
        order: list[str] = []
        for statement in cls.body:
            if isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name):
                order.append(statement.target.id)
                if statement.value is not None:
                    fields[statement.target.id] = (field_default(statement.value), self.top)
            elif isinstance(statement, ast.Assign):
                for target in statement.targets:
                    if isinstance(target, ast.Name):
                        fields[target.id] = (statement.value, self.top)
        if any(isinstance(a, ast.Starred) for a in call.args) or len(call.args) > len(order):
            raise Unknown(name)
        fields.update({field_name: (a, scope) for field_name, a in zip(order, call.args, strict=False)})
        fields.update(given)
        return fields

    def _initialized(self, init: ast.FunctionDef, call: ast.Call, scope: Scope) -> dict[str, Found]:
        """``self.X = ...`` assigned once in ``__init__``, its parameters bound to ``call``'s arguments."""
        parameters = [a.arg for a in [*init.args.posonlyargs, *init.args.args]][1:]
        if any(isinstance(a, ast.Starred) for a in call.args) or len(call.args) > len(parameters):
            raise Unknown(init.name)
        passed = {p: (a, scope) for p, a in zip(parameters, call.args, strict=False)}
        passed.update({k.arg: (k.value, scope) for k in call.keywords if k.arg is not None})
        key = (call, init)
        if key not in self._scopes:
            self._scopes[key] = Scope(self, init, self.scope_of(init), passed)
        inner = self._scopes[key]
        this = init.args.args[0].arg if init.args.args else None
        assigned: dict[str, list[ast.expr]] = {}
        for node in own_nodes(init):
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    if isinstance(target, ast.Attribute) and ast.unparse(target.value) == this:
                        assigned.setdefault(target.attr, []).append(node.value)
        return {attr: (values[0], inner) for attr, values in assigned.items() if len(values) == 1}

    def parsed_arguments(self, node: ast.expr, scope: Scope, depth: int) -> dict[str, Found] | None:
        """For a parsed command line (``parser.parse_args()``, ``parser.parse_known_args()[0]``,
        ``get_args()`` returning one), each option's ``default=`` by its destination name;
        ``None`` for anything else."""
        if depth > MAX_DEPTH:
            raise Unknown("parse_args")
        call = node
        if (
            isinstance(node, ast.Subscript)
            and isinstance(node.value, ast.Call)
            and isinstance(node.slice, ast.Constant)
            and node.slice.value == 0
        ):
            call = node.value
        if not isinstance(call, ast.Call):
            return None
        func = call.func
        if isinstance(func, ast.Attribute) and func.attr in ("parse_args", "parse_known_args"):
            if call is node and func.attr == "parse_known_args":
                return None
            if call.args and isinstance(call.args[0], (ast.List, ast.Tuple)) and call.args[0].elts:
                raise Unknown("parse_args")  # its own command line, not the defaults
            scopes = [scope]
            parser, where = self.definition(func.value, scope, depth + 1)
            if isinstance(parser, ast.Call) and isinstance(parser.func, ast.Name):
                helper = self.functions.get(parser.func.id)
                if helper is not None and where.lookup(parser.func.id) is None:
                    scopes.append(self._scope(helper))
            return _option_defaults([*scopes, self.top])
        if isinstance(func, ast.Name) and func.id in self.functions and scope.lookup(func.id) is None:
            helper = self.functions[func.id]
            inner = self._scope(helper)
            for child in own_nodes(helper):
                if isinstance(child, ast.Return) and child.value is not None:
                    returned, where = self.definition(child.value, inner, depth + 1)
                    parsed = self.parsed_arguments(returned, where, depth + 1)
                    if parsed is not None:
                        return parsed
        return None

    def tensor_shape(
        self, node: ast.expr, scope: Scope, depth: int = 0
    ) -> tuple[list[ast.expr], Scope] | None:
        """The sizes of a tensor made in the source: ``torch.randn(M, K).cuda().half()``,
        ``torch.empty((M, N))``, ``torch.zeros(M, N).view(M // 2, 2 * N)``; ``None`` otherwise."""
        node, scope = self.definition(node, scope, depth)
        for _ in range(MAX_DEPTH):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                return None
            method = node.func.attr
            if method in SAME_SHAPE:
                node, scope = self.definition(node.func.value, scope, depth + 1)
            elif method.endswith("_like") and node.args and root_name(node.func) == "torch":
                node, scope = self.definition(node.args[0], scope, depth + 1)
            elif method in RESHAPES or method in TENSOR_FACTORIES:
                return self._shape_arguments(node, scope, depth)
            else:
                return None
        return None

    def _shape_arguments(
        self, call: ast.Call, scope: Scope, depth: int
    ) -> tuple[list[ast.expr], Scope] | None:
        keywords = {k.arg: k.value for k in call.keywords if k.arg is not None}
        arguments = call.args
        if any(isinstance(a, ast.Starred) for a in arguments):
            return None
        shape: ast.expr | None
        if "size" in keywords:
            shape = keywords["size"]
        elif call.func.attr in ("full", "empty_strided"):  # type: ignore[attr-defined]
            shape = arguments[0] if arguments else None
        elif call.func.attr == "randint":  # type: ignore[attr-defined]
            shape = arguments[-1] if len(arguments) >= 2 else None
        elif len(arguments) == 1:
            shape = arguments[0]
        else:
            return list(arguments), scope
        if shape is None:
            return None
        if isinstance(shape, (ast.Tuple, ast.List)):
            return list(shape.elts), scope
        try:
            resolved = self.value(shape, scope, depth + 1)
        except Unknown:
            return None
        if isinstance(resolved, (ast.Tuple, ast.List)):
            return list(resolved.elts), self.top
        return [resolved], self.top  # closed values: only the module's names are left in them

    def expand(self, call: ast.Call, scope: Scope) -> tuple[list[Found], dict[str, Found]]:
        """A call's positional and keyword arguments, ``*sizes`` and ``**config`` spread where the
        source says what they hold (a tuple or list; a dict literal or ``dict(...)``)."""
        positional: list[Found] = []
        for argument in call.args:
            if isinstance(argument, ast.Starred):
                node, where = self.definition(argument.value, scope)
                if not isinstance(node, (ast.Tuple, ast.List)) or any(
                    isinstance(e, ast.Starred) for e in node.elts
                ):
                    raise Unknown("*")
                positional.extend((e, where) for e in node.elts)
            else:
                positional.append((argument, scope))
        keywords: dict[str, Found] = {}
        for keyword in call.keywords:
            if keyword.arg is not None:
                keywords[keyword.arg] = (keyword.value, scope)
                continue
            node, where = self.definition(keyword.value, scope)
            keywords.update(self._mapping(node, where))
        return positional, keywords

    def _mapping(self, node: ast.expr, scope: Scope) -> dict[str, Found]:
        if isinstance(node, ast.Dict):
            if not all(isinstance(k, ast.Constant) and isinstance(k.value, str) for k in node.keys):
                raise Unknown("**")
            return {
                str(k.value): (v, scope)
                for k, v in zip(node.keys, node.values, strict=True)
                if isinstance(k, ast.Constant)
            }
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "dict"
            and scope.lookup("dict") is None
            and "dict" not in self.own
            and not node.args
            and all(k.arg is not None for k in node.keywords)
        ):
            return {str(k.arg): (k.value, scope) for k in node.keywords}
        raise Unknown("**")

    def tensor_sizes(
        self, node: ast.expr, scope: Scope, shape: tuple[str | None, ...], where: str
    ) -> dict[str, Any]:
        """``T.const`` values from a tensor passed to an eager kernel: its declared shape's names
        (``(M, K)``) matched to the sizes it is made with (``torch.randn(1024, 512)``)."""
        try:
            found = self.tensor_shape(node, scope)
        except Unknown:
            return {}
        if found is None or len(found[0]) != len(shape):
            return {}
        sizes: dict[str, Any] = {}
        for name, size in zip(shape, found[0], strict=True):
            if name is None or name in sizes:
                continue
            with contextlib.suppress(Unknown):
                value = self.argument(size, found[1], where, direct=False)
                if isinstance(value, Expression) or (
                    isinstance(value, int) and not isinstance(value, bool) and value >= 0
                ):
                    sizes[name] = value
        return sizes


def _option_defaults(scopes: list[Scope]) -> dict[str, Found]:
    """``parser.add_argument("--block-m", type=int, default=64)`` as ``{"block_m": (64, scope)}``,
    from the first scope that adds any options; an option without a usable default is left out."""
    for scope in scopes:
        options = [
            n
            for n in scope.nodes()
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "add_argument"
        ]
        if not options:
            continue
        defaults: dict[str, Found] = {}
        conflicting: set[str] = set()
        for option in options:
            flags = [a.value for a in option.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
            keywords = {k.arg: k.value for k in option.keywords if k.arg is not None}
            destination = keywords.get("dest")
            if isinstance(destination, ast.Constant) and isinstance(destination.value, str):
                name = destination.value
            elif any(f.startswith("--") for f in flags):
                name = next(f for f in flags if f.startswith("--"))[2:].replace("-", "_")
            elif flags:
                name = flags[0].lstrip("-").replace("-", "_")
            else:
                continue
            default = option_default(keywords)
            if default is None or (name in defaults and ast.dump(defaults[name][0]) != ast.dump(default)):
                conflicting.add(name)
            else:
                defaults[name] = (default, scope)
        return {name: found for name, found in defaults.items() if name not in conflicting}
    return {}
