"""TileLang's public API read from its installed source files, never imported: ``build_source_index``.

Jedi's way: each module's file is parsed with ``ast`` and its top-level statements are followed as
Python would run them (``from .x import y``, ``import *``, ``__all__`` built from other modules'
``__all__``, a module ``__getattr__`` forwarding to a module it imports), across tilelang's own
files and the TVM it bundles (``tilelang/3rdparty/tvm/python``). Nothing is executed and nothing
is hand-listed. ``import tilelang`` takes seconds; this takes a fraction of one.
"""

from __future__ import annotations

import ast
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from tilelang_lsp.api.definitions import (
    Described,
    dataclass_init,
    describe_function,
    shown_doc,
    signature_of,
)
from tilelang_lsp.protocol import ApiEntry, ApiIndex, ApiModule

MODULES = (
    "tilelang.language",
    "tilelang",
    "tilelang.jit",
    "tilelang.autotuner",
    "tilelang.profiler",
    "tilelang.layout",
    "tilelang.testing",
    "tilelang.transform",
    "tilelang.intrinsics",
    "tilelang.carver",
    "tilelang.cache",
    "tilelang.engine",
    "tilelang.tools",
    "tilelang.utils",
    "tilelang.contrib",
    "tilelang.math",
    "tilelang.cuda.language",
    "tilelang.ascend.language",
)
"""The modules TileLang's examples and tests import or reach through ``tilelang.``, the one behind
``T.`` first (it is read and offered before the others); one without a source file in this
installation is left out."""

MAX_DEPTH = 40
"""How many re-exports a name may go through before it is given up on (a cycle, or worse)."""
MAX_FILE_BYTES = 4 * 2**20
"""A source file bigger than this is not parsed (no module of TileLang or TVM comes close)."""
OWN_PACKAGES = ("tilelang", "tvm", "tvm_ffi")
SOURCE_PACKAGES = ("tilelang", "tvm")
"""The packages whose source is read; ``torch`` or ``tvm_ffi``'s compiled core never are."""
"""Where a name of a module without ``__all__`` must come from to be offered (not ``os``)."""

Literal_ = str | int
Literals = tuple[Literal_, ...]


@dataclass(frozen=True)
class _Import:
    """A name bound by an import: the module, and the attribute of it (``None``: the module)."""

    module: str
    attribute: str | None
    line: int


@dataclass(frozen=True)
class _Definition:
    """A name bound by a ``def``, a ``class`` or an assignment in ``module``."""

    module: str
    node: ast.AST
    line: int


_Binding = _Import | _Definition


@dataclass
class _Module:
    name: str
    file: Path
    package: bool
    doc: str
    bindings: dict[str, _Binding] = field(default_factory=dict)
    strings: dict[str, Literals] = field(default_factory=dict)
    """Names bound to sequences of strings or numbers (``__all__``, ``_COMMON_ALL``), as far as
    the source makes them clear."""
    forwards: bool = False
    """It defines a module ``__getattr__``: a name it lacks may come from a module it imports."""


class SourceTree:
    """Modules found as files under a few folders (the one holding ``tilelang``, and TVM's)."""

    def __init__(self, roots: list[Path]) -> None:
        self.roots = roots
        self.modules: dict[str, _Module | None] = {}
        self.found: dict[str, tuple[Path, bool] | None] = {}
        self.files: set[Path] = set()
        """Every file read: the cache is valid while none of them changes."""

    def find(self, name: str) -> tuple[Path, bool] | None:
        """The source file of the module ``name`` and whether it is a package, if there is one."""
        if name not in self.found:
            self.found[name] = self._find(name)
        return self.found[name]

    def _find(self, name: str) -> tuple[Path, bool] | None:
        parts = name.split(".")
        if parts[0] not in SOURCE_PACKAGES or not all(part.isidentifier() for part in parts):
            return None
        for root in self.roots:
            base = root.joinpath(*parts)
            for file, package in ((base / "__init__.py", True), (base.with_suffix(".py"), False)):
                if file.is_file():
                    return file, package
        return None

    def module(self, name: str) -> _Module | None:
        """The module ``name`` read (once), or ``None`` when it has no source. In an import cycle
        the module being read is returned as far as it got, as ``sys.modules`` would."""
        if name in self.modules:
            return self.modules[name]
        found = self.find(name)
        if found is None:
            self.modules[name] = None
            return None
        file, package = found
        try:
            if file.stat().st_size > MAX_FILE_BYTES:
                raise ValueError("too big")
            tree = ast.parse(file.read_bytes(), filename=str(file))
        except (OSError, ValueError, SyntaxError, RecursionError):
            self.modules[name] = None
            return None
        self.files.add(file)
        module = _Module(name=name, file=file, package=package, doc=ast.get_docstring(tree) or "")
        self.modules[name] = module
        _Reader(self, module).statements(tree.body)
        return module

    # --- what a name is ---------------------------------------------------------------------

    def lookup(self, module_name: str, name: str, depth: int = 0) -> _Binding | str | None:
        """What ``module.name`` is bound to: a binding, a module's name, or ``None``."""
        module = self.module(module_name)
        if module is not None:
            binding = module.bindings.get(name)
            itself = isinstance(binding, _Import) and (binding.module, binding.attribute) == (
                module_name,
                name,
            )
            if binding is not None and not itself:  # ``from . import x`` in a package: its submodule
                return binding
        submodule = f"{module_name}.{name}"
        if self.find(submodule) is not None:
            return submodule
        if module is not None and module.forwards and depth < MAX_DEPTH:
            for other in module.bindings.values():
                if isinstance(other, _Import) and other.attribute is None:
                    found = self.lookup(other.module, name, depth + 1)
                    if found is not None:
                        return found
        return None

    def final(self, binding: _Binding | str | None, depth: int = 0) -> _Definition | str | None:
        """Follow imports and plain aliases (``x = y``) to the definition or the module."""
        while depth < MAX_DEPTH:
            depth += 1
            if binding is None or isinstance(binding, str):
                return binding
            if isinstance(binding, _Import):
                if binding.attribute is None:
                    return binding.module
                binding = self.lookup(binding.module, binding.attribute, depth)
                continue
            value = _assigned(binding.node)
            if isinstance(value, (ast.Name, ast.Attribute)):
                target = self.reference(binding.module, value, depth)
                if target is not None:
                    binding = target
                    continue
            return binding
        return None

    def reference(self, module_name: str, node: ast.expr, depth: int = 0) -> _Binding | str | None:
        """What a name or a dotted name (``_tir_op.abs``) in ``module`` refers to."""
        if isinstance(node, ast.Name):
            module = self.module(module_name)
            return module.bindings.get(node.id) if module is not None else None
        if isinstance(node, ast.Attribute):
            owner = self.final(self.reference(module_name, node.value, depth + 1), depth + 1)
            if isinstance(owner, str):
                return self.lookup(owner, node.attr, depth + 1)
        return None

    def strings_of(self, module_name: str, name: str, depth: int = 0) -> Literals | None:
        """The sequence ``module.name`` is bound to, following imports (``_COMMON_ALL``)."""
        module = self.module(module_name)
        if module is None or depth > MAX_DEPTH:
            return None
        if name in module.strings:
            return module.strings[name]
        binding = module.bindings.get(name)
        if isinstance(binding, _Import) and binding.attribute is not None:
            return self.strings_of(binding.module, binding.attribute, depth + 1)
        return None

    def public_names(self, module_name: str) -> list[str]:
        """What ``from module import *`` binds, and what completion offers for the module."""
        module = self.module(module_name)
        if module is None:
            return []
        declared = self.strings_of(module_name, "__all__")
        if declared is not None:
            return list(dict.fromkeys(n for n in declared if isinstance(n, str)))
        names = []
        for name, binding in module.bindings.items():
            if name.startswith("_"):
                continue
            if isinstance(binding, _Import) and binding.module.split(".")[0] not in OWN_PACKAGES:
                continue  # ``os``, ``Path``: the module's own imports, not its API
            names.append(name)
        return names

    # --- describing --------------------------------------------------------------------------

    def describe(self, module_name: str, name: str) -> Described:
        """Kind, signature, doc and place of ``module.name`` (a bare ``value`` where unknown)."""
        found = self.final(self.lookup(module_name, name))
        if isinstance(found, str):
            module = self.module(found)
            if module is None:
                return Described(kind="module", module=found)
            return Described(
                kind="module", module=found, doc=shown_doc(module.doc), file=str(module.file), line=1
            )
        if found is None:
            return Described(kind="value")
        node = found.node
        file = self._file(found.module)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return describe_function(node, file)
        if isinstance(node, ast.ClassDef):
            init = self._initializer(found.module, node)
            signature, parameters = (
                signature_of(init.args, skip_first=True) if init is not None else (None, ())
            )
            return Described(
                kind="class",
                signature=signature,
                parameters=parameters,
                doc=shown_doc(ast.get_docstring(node) or ""),
                file=file,
                line=node.lineno,
            )
        value = _assigned(node)
        if isinstance(value, ast.Lambda):
            signature, parameters = signature_of(value.args)
            return Described(
                kind="function", signature=signature, parameters=parameters, file=file, line=found.line
            )
        if isinstance(value, ast.Call):
            callee = self.final(self.reference(found.module, value.func))
            if isinstance(callee, _Definition) and isinstance(callee.node, ast.ClassDef):
                # an instance (``T.float16 = dtype("float16")``): the class's docs say what it is
                doc = shown_doc(ast.get_docstring(callee.node) or "")
                return Described(kind="value", doc=doc, file=file, line=found.line)
            wrapped = self.final(self.reference(found.module, value.args[0])) if value.args else None
            if (
                isinstance(callee, _Definition)
                and isinstance(callee.node, (ast.FunctionDef, ast.AsyncFunctionDef))
                and isinstance(wrapped, _Definition)
                and isinstance(wrapped.node, (ast.FunctionDef, ast.AsyncFunctionDef))
            ):
                # a decorator applied by hand (``abs = _op_wrapper(_tir_op.abs)``): the function it wraps
                return describe_function(wrapped.node, self._file(wrapped.module))
        return Described(kind="value", file=file, line=found.line)

    def _file(self, module_name: str) -> str | None:
        module = self.module(module_name)
        return str(module.file) if module is not None else None

    def _initializer(
        self, module_name: str, node: ast.ClassDef, depth: int = 0
    ) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
        """The class's ``__init__`` (else ``__new__``), from its body or its bases', as
        ``inspect.signature`` looks for it."""
        for wanted in ("__init__", "__new__"):
            for statement in node.body:
                if (
                    isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef))
                    and statement.name == wanted
                ):
                    return statement
        if any(ast.unparse(d).split("(")[0].endswith("dataclass") for d in node.decorator_list):
            return dataclass_init(node)
        if depth >= 8:
            return None
        for base in node.bases:
            found = self.final(self.reference(module_name, base))
            if isinstance(found, _Definition) and isinstance(found.node, ast.ClassDef):
                init = self._initializer(found.module, found.node, depth + 1)
                if init is not None:
                    return init
        return None


class _Reader:
    """Runs a module's top-level statements in the head: what each binds, in order."""

    def __init__(self, tree: SourceTree, module: _Module) -> None:
        self.tree = tree
        self.module = module

    def statements(self, body: list[ast.stmt]) -> None:
        for statement in body:
            self.statement(statement)

    def statement(self, node: ast.stmt) -> None:
        module = self.module
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            module.bindings[node.name] = _Definition(module.name, node, node.lineno)
            module.strings.pop(node.name, None)
            if node.name == "__getattr__":
                module.forwards = True
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname is not None:
                    module.bindings[alias.asname] = _Import(alias.name, None, node.lineno)
                else:
                    top = alias.name.split(".")[0]
                    module.bindings[top] = _Import(top, None, node.lineno)
        elif isinstance(node, ast.ImportFrom):
            self.import_from(node)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            strings = self.strings(node.value) if node.value is not None else None
            for target in targets:
                if isinstance(target, ast.Name):
                    module.bindings[target.id] = _Definition(module.name, node, node.lineno)
                    if strings is not None:
                        module.strings[target.id] = strings
                    else:
                        module.strings.pop(target.id, None)
        elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
            name = node.target.id
            added = self.strings(node.value)
            if isinstance(node.op, ast.Add) and name in module.strings and added is not None:
                module.strings[name] = module.strings[name] + added
            else:
                module.strings.pop(name, None)
        elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
            self.list_method(node.value)
        elif isinstance(node, ast.Delete):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    module.bindings.pop(target.id, None)
                    module.strings.pop(target.id, None)
        elif isinstance(node, ast.If):
            holds = _condition(node.test)
            if holds is None:
                self.statements(node.orelse)
                self.statements(node.body)  # the usual case wins
            else:  # ``TYPE_CHECKING`` (stubs for type checkers), ``sys.platform``
                self.statements(node.body if holds else node.orelse)
        elif isinstance(node, ast.Try):
            for handler in node.handlers:
                self.statements(handler.body)
            self.statements(node.body)  # the import that works wins over its fallback
            self.statements(node.orelse)
            self.statements(node.finalbody)
        elif isinstance(node, ast.With):
            self.statements(node.body)
        elif isinstance(node, ast.For):
            self.loop(node)

    def import_from(self, node: ast.ImportFrom) -> None:
        module = self.module
        source = self.absolute(node)
        if source is None:
            return
        if node.level and self.absolute_parent(node) == module.name and node.module is not None:
            # ``from .sub import x`` also makes ``sub`` an attribute of this package
            first = node.module.split(".")[0]
            module.bindings.setdefault(first, _Import(f"{module.name}.{first}", None, node.lineno))
        for alias in node.names:
            if alias.name == "*":
                for name in self.tree.public_names(source):
                    module.bindings[name] = _Import(source, name, node.lineno)
                    module.strings.pop(name, None)
                continue
            bound = alias.asname or alias.name
            module.bindings[bound] = _Import(source, alias.name, node.lineno)
            module.strings.pop(bound, None)  # read from ``source`` when asked (``strings_of``)

    def absolute_parent(self, node: ast.ImportFrom) -> str | None:
        """The package a relative import starts from."""
        parts = self.module.name.split(".")
        if not self.module.package:
            parts = parts[:-1]
        drop = node.level - 1
        if drop > len(parts) - 1:
            return None
        return ".".join(parts[: len(parts) - drop])

    def absolute(self, node: ast.ImportFrom) -> str | None:
        if not node.level:
            return node.module
        parent = self.absolute_parent(node)
        if parent is None:
            return None
        return f"{parent}.{node.module}" if node.module else parent

    def list_method(self, call: ast.Call, env: dict[str, Literal_] | None = None) -> bool:
        """``__all__.extend([...])``, ``__all__.append("x")``, ``__all__.remove("x")``; whether
        the call was understood (else the list is no longer known)."""
        func = call.func
        if not (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name)) or len(call.args) != 1:
            return False
        name, strings = func.value.id, self.module.strings
        if name not in strings:
            return False
        argument = call.args[0]
        if func.attr == "extend":
            added = self.strings(argument, env)
            if added is not None:
                strings[name] += added
                return True
        elif func.attr in ("append", "remove"):
            value = self.value(argument, env or {})
            if value is not None and func.attr == "append":
                strings[name] += (value,)
                return True
            if value is not None:
                strings[name] = tuple(s for s in strings[name] if s != value)
                return True
        strings.pop(name)
        return False

    def loop(self, node: ast.For) -> None:
        """A module-level loop building a list (``for base in bases: for lane in lanes:
        float_types.append(f"{base}x{lane}")``), run when every step is a literal; else what it
        touches is no longer known."""
        if not self.run_loop(node, {}):
            for inner in ast.walk(node):
                if isinstance(inner, ast.Name):
                    self.module.strings.pop(inner.id, None)

    def run_loop(self, node: ast.For, env: dict[str, Literal_]) -> bool:
        values = self.strings(node.iter, env)
        if values is None or not isinstance(node.target, ast.Name) or node.orelse or len(values) > 10_000:
            return False
        for value in values:
            env[node.target.id] = value
            if not self.run_block(node.body, env):
                return False
        return True

    def run_block(self, body: list[ast.stmt], env: dict[str, Literal_]) -> bool:
        for statement in body:
            if isinstance(statement, ast.For):
                if not self.run_loop(statement, env):
                    return False
            elif isinstance(statement, ast.Assign) and len(statement.targets) == 1:
                target, value = statement.targets[0], self.value(statement.value, env)
                if not isinstance(target, ast.Name) or value is None:
                    return False
                env[target.id] = value
            elif isinstance(statement, ast.If):
                test = self.value(statement.test, env)
                if test is None:
                    return False
                if not self.run_block(statement.body if test else statement.orelse, env):
                    return False
            elif isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call):
                if not self.list_method(statement.value, env):
                    return False
            elif not isinstance(statement, ast.Pass):
                return False
        return True

    def value(self, node: ast.expr, env: dict[str, Literal_]) -> Literal_ | None:
        """A string or number the expression evaluates to (f-strings, ``a if c else b``,
        ``==``/``!=``), where loop variables and literals make it clear."""
        if isinstance(node, ast.Constant) and isinstance(node.value, (str, int)):
            return node.value
        if isinstance(node, ast.Name):
            return env.get(node.id)
        if isinstance(node, ast.JoinedStr):
            parts = []
            for part in node.values:
                if isinstance(part, ast.FormattedValue):
                    if part.format_spec is not None or part.conversion not in (-1, ord("s")):
                        return None
                    inner = self.value(part.value, env)
                    if inner is None:
                        return None
                    parts.append(str(inner))
                elif isinstance(part, ast.Constant) and isinstance(part.value, str):
                    parts.append(part.value)
                else:
                    return None
            return "".join(parts)
        if isinstance(node, ast.IfExp):
            test = self.value(node.test, env)
            return None if test is None else self.value(node.body if test else node.orelse, env)
        if (
            isinstance(node, ast.Compare)
            and len(node.ops) == 1
            and isinstance(node.ops[0], (ast.Eq, ast.NotEq))
        ):
            left, right = self.value(node.left, env), self.value(node.comparators[0], env)
            if left is None or right is None:
                return None
            return int((left == right) == isinstance(node.ops[0], ast.Eq))
        return None

    def strings(self, node: ast.expr, env: dict[str, Literal_] | None = None) -> Literals | None:
        """The sequence of strings (or numbers) the expression evaluates to, where the source
        makes it clear."""
        if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            found: list[Literal_] = []
            for element in node.elts:
                if isinstance(element, ast.Starred):
                    inner = self.strings(element.value, env)
                    if inner is None:
                        return None
                    found.extend(inner)
                    continue
                value = self.value(element, env or {})
                if value is None:
                    return None
                found.append(value)
            return tuple(found)
        if isinstance(node, ast.Name):
            if node.id in self.module.strings:
                return self.module.strings[node.id]
            binding = self.module.bindings.get(node.id)
            if isinstance(binding, _Import) and binding.attribute is not None:
                return self.tree.strings_of(binding.module, binding.attribute)
            return None
        if isinstance(node, ast.Attribute):
            owner = self.tree.final(self.tree.reference(self.module.name, node.value))
            return self.tree.strings_of(owner, node.attr) if isinstance(owner, str) else None
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.BitOr, ast.BitAnd, ast.Sub)):
            left, right = self.strings(node.left, env), self.strings(node.right, env)
            if left is None or right is None:
                return None
            if isinstance(node.op, ast.Add):  # lists and tuples
                return left + right
            if isinstance(node.op, ast.BitOr):  # sets: the order does not matter to their users
                return tuple(dict.fromkeys(left + right))
            return tuple(v for v in left if (v in right) == isinstance(node.op, ast.BitAnd))
        if isinstance(node, ast.Call) and len(node.args) == 1 and not node.keywords:
            inner = self.strings(node.args[0], env)
            if inner is None:
                return None
            func = ast.unparse(node.func)
            if func in ("tuple", "list", "set", "frozenset"):
                return inner
            if func == "sorted" and all(isinstance(v, str) for v in inner):
                return tuple(sorted(str(v) for v in inner))
            if func == "dict.fromkeys":
                return tuple(dict.fromkeys(inner))
            return None
        if isinstance(node, (ast.GeneratorExp, ast.ListComp, ast.SetComp)):
            return self.comprehension(node)
        return None

    def comprehension(self, node: ast.GeneratorExp | ast.ListComp | ast.SetComp) -> Literals | None:
        """``(n for n in X if n not in Y)``, ``[f"name_{op}" for op in ("ge", "gt")]``, with ``in``,
        ``not in``, ``startswith``/``endswith``, ``==``/``!=`` and ``not`` as conditions."""
        if len(node.generators) != 1:
            return None
        loop = node.generators[0]
        if not isinstance(loop.target, ast.Name) or loop.is_async:
            return None
        values = self.strings(loop.iter)
        if values is None or len(values) > 100_000:
            return None
        members: dict[int, set[Literal_]] = {}  # ``in Y``: each Y evaluated once
        kept: list[Literal_] = []
        for value in values:
            env = {loop.target.id: value}
            holds = [self.holds(condition, env, members) for condition in loop.ifs]
            if any(h is None for h in holds):
                return None
            if all(holds):
                element = self.value(node.elt, env)
                if element is None:
                    return None
                kept.append(element)
        return tuple(kept)

    def holds(
        self, condition: ast.expr, env: dict[str, Literal_], members: dict[int, set[Literal_]]
    ) -> bool | None:
        """Whether a comprehension's condition holds for the loop variable in ``env``."""
        if isinstance(condition, ast.UnaryOp) and isinstance(condition.op, ast.Not):
            inner = self.holds(condition.operand, env, members)
            return None if inner is None else not inner
        if (
            isinstance(condition, ast.Compare)
            and len(condition.ops) == 1
            and isinstance(condition.ops[0], (ast.In, ast.NotIn))
        ):
            left = self.value(condition.left, env)
            key = id(condition.comparators[0])
            if key not in members:
                found = self.strings(condition.comparators[0])
                if found is None:
                    return None
                members[key] = set(found)
            return None if left is None else (left in members[key]) == isinstance(condition.ops[0], ast.In)
        if (
            isinstance(condition, ast.Call)
            and isinstance(condition.func, ast.Attribute)
            and condition.func.attr in ("startswith", "endswith")
            and len(condition.args) == 1
        ):
            subject, affix = self.value(condition.func.value, env), self.value(condition.args[0], env)
            if not isinstance(subject, str) or not isinstance(affix, str):
                return None
            return (
                subject.startswith(affix) if condition.func.attr == "startswith" else subject.endswith(affix)
            )
        value = self.value(condition, env)
        return None if value is None else bool(value)


def _condition(test: ast.expr) -> bool | None:
    """Whether a module-level ``if`` runs its body, where that is known without running anything:
    ``TYPE_CHECKING`` is false, ``sys.platform`` is this machine's (the worker's too); ``None``
    for anything else."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        inner = _condition(test.operand)
        return None if inner is None else not inner
    if (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    ):
        return False
    if (
        isinstance(test, ast.Call)
        and ast.unparse(test.func) in ("sys.platform.startswith", "platform.startswith")
        and len(test.args) == 1
        and isinstance(test.args[0], ast.Constant)
        and isinstance(test.args[0].value, str)
    ):
        return sys.platform.startswith(test.args[0].value)
    if (
        isinstance(test, ast.Compare)
        and ast.unparse(test.left) == "sys.platform"
        and len(test.ops) == 1
        and isinstance(test.ops[0], (ast.Eq, ast.NotEq))
        and isinstance(test.comparators[0], ast.Constant)
    ):
        return (sys.platform == test.comparators[0].value) == isinstance(test.ops[0], ast.Eq)
    return None


def _assigned(node: ast.AST) -> ast.expr | None:
    if isinstance(node, (ast.Assign, ast.AnnAssign)):
        return node.value
    return None


def source_roots(folder: Path) -> list[Path]:
    """Where the modules tilelang imports live: beside tilelang, and the TVM it bundles (which
    ``tilelang/env.py`` puts on ``sys.path`` when imported)."""
    roots = [folder.parent]
    bundled = folder / "3rdparty" / "tvm" / "python"
    if bundled.is_dir():
        roots.append(bundled)
    return roots


def read_module(tree: SourceTree, name: str, earlier: list[ApiModule]) -> ApiModule | None:
    """The public names of module ``name``, or ``None`` when it has no source here; a module
    whose names are those of one in ``earlier`` names it (``same_as``) instead of repeating them."""
    if tree.module(name) is None:
        return None
    members = tree.public_names(name)
    if tree.strings_of(name, "__all__") is None:
        # a package's subpackages are attributes once imported, and names after ``import tilelang.``
        children = [m[len(name) + 1 :] for m in MODULES if m.startswith(name + ".")]
        members += [c for c in children if "." not in c and tree.find(f"{name}.{c}") is not None]
    entries = tuple(_entry(tree, name, member) for member in dict.fromkeys(members))
    twin = next((m.name for m in earlier if m.entries == entries and m.same_as is None), None)
    if twin is not None:  # ``tilelang.cuda.language`` is what ``tilelang.language`` exports
        return ApiModule(name=name, same_as=twin)
    return ApiModule(name=name, entries=entries)


def build_source_index(
    folder: Path, version: str, modules: tuple[str, ...] = MODULES
) -> tuple[ApiIndex, set[Path]]:
    """Every public name of ``modules`` of the tilelang in ``folder``, and the files read."""
    began = time.perf_counter()
    tree = SourceTree(source_roots(folder))
    found: list[ApiModule] = []
    for name in modules:
        module = read_module(tree, name, found)
        if module is not None:
            found.append(module)
    index = ApiIndex(
        tilelang_version=version,
        folder=str(folder),
        modules=tuple(found),
        elapsed_s=time.perf_counter() - began,
    )
    return index, tree.files


def _entry(tree: SourceTree, module: str, name: str) -> ApiEntry:
    described = tree.describe(module, name)
    return ApiEntry(
        name=name,
        kind=described.kind,
        module=described.module,
        signature=described.signature,
        parameters=described.parameters,
        doc=described.doc,
        file=described.file,
        line=described.line,
    )
