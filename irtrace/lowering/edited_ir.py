"""Read an edited IR module (TVMScript as ``irtrace ir`` prints it) back into TVM, as data.

TVM's TVMScript parser evaluates the expressions it meets with Python's ``eval``, so an IR file is
first parsed by a grammar of the TVMScript that TileLang's printer writes, and anything outside it
is refused with one line naming its line (``check_tvmscript_only``): one ``@I.ir_module`` class of
``@T.prim_func`` functions; literals, arithmetic, comparisons, ``for``/``while``/``if``/``with``,
assignments, ``assert`` and ``return``; ``T.``/``I.`` names only from a table generated from the
installed TileLang (``script_names``); no attribute of any other value but a buffer's own fields
(``A.data``) and the module's functions (``Module.f``); subscripts only of names the function
binds; calls only of those names. Only then is it parsed, with empty builtins and a ``T`` that also
knows TileLang's operators under the names TileLang's printer gives them (``T.fill``, ``T.gemm``).
"""

from __future__ import annotations

import ast
import re
import types
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from typing import Any

from irtrace.base.errors import InputError

MAX_IR_CHARS = 64 * 2**20
"""Longest IR file read (TileLang's biggest printed modules are a few MB)."""
MAX_INT_BITS = 128
"""Widest integer literal read: TVMScript prints 64-bit immediates at most."""
BUFFER_FIELDS = frozenset({"data", "shape", "strides", "elem_offset"})
"""Attributes of a name the script binds that TVMScript prints (``A.data``, ``A.shape[0]``)."""
DECORATOR_ONLY = frozenset({"prim_func", "macro", "ir_module", "pyfunc"})
"""TVMScript entry points: they parse Python functions or source text, so never an expression."""

_OPERATORS = (
    ast.Add,
    ast.Sub,
    ast.Mult,
    ast.Div,
    ast.FloorDiv,
    ast.Mod,
    ast.BitAnd,
    ast.BitOr,
    ast.BitXor,
)
"""Python operators TVMScript prints (shifts and powers print as ``T.shift_left``, ``T.pow``)."""
_UNARY = (ast.USub, ast.UAdd, ast.Not, ast.Invert)
_COMPARISONS = (ast.Eq, ast.NotEq, ast.Lt, ast.LtE, ast.Gt, ast.GtE)
_RESERVED = frozenset({"T", "I", "range"})
"""Names the script uses but may not bind."""


class EditedIrError(InputError):
    """The edited IR file is not TVMScript that irtrace reads (syntax, a refused construct, or
    TVM's parser rejecting it); the message names the line."""


@dataclass(frozen=True)
class TileOpCall:
    """Where a TileLang operator is called, and the dtype its call must have there."""

    line: int
    column: int
    name: str
    dtype: str


def parse_edited_ir(text: str, file_name: str = "edited IR") -> Any:
    """The ``tvm.IRModule`` that ``text`` (TVMScript of one ``@I.ir_module``) describes."""
    if len(text) > MAX_IR_CHARS:
        raise EditedIrError(f"{file_name}: longer than {MAX_IR_CHARS // 2**20} MB, more than irtrace reads")
    tree = _python_syntax(text, file_name)
    check_tvmscript_only(tree, file_name)
    calls = _tile_op_calls(tree)
    source = _typed_calls(text, calls)
    return _tvm_parse(source, file_name)


def _python_syntax(text: str, file_name: str) -> ast.Module:
    try:
        return ast.parse(text, filename=file_name)
    except SyntaxError as error:
        raise EditedIrError(
            f"{file_name}:{error.lineno}: not valid Python syntax: {error.msg}"
            + _syntax_hint(text, error.lineno)
        ) from None
    except (ValueError, RecursionError, MemoryError) as error:
        raise EditedIrError(f"{file_name}: cannot be read as Python ({type(error).__name__})") from None


def _syntax_hint(text: str, line: int | None) -> str:
    """TVMScript's printer writes some annotations as dotted keywords (``tl.name=...``), which no
    parser reads back: say so when the failing line has one."""
    lines = text.splitlines()
    if line is not None and 0 < line <= len(lines) and re.search(r"[,(]\s*\w+\.\w+\s*=", lines[line - 1]):
        return " (TileLang prints this call's dotted annotation keyword, which does not parse back)"
    return ""


# ----------------------------------------------------------------------------- the grammar


def check_tvmscript_only(tree: ast.Module, file_name: str) -> None:
    """Refuse anything but the TVMScript TileLang prints: the file is evaluated by TVM's parser."""
    classes = [node for node in tree.body if isinstance(node, ast.ClassDef)]
    others = [node for node in tree.body if not isinstance(node, ast.ClassDef)]
    if others:
        _refuse(others[0], file_name, "only one `@I.ir_module` class may be at the top level")
    if len(classes) != 1:
        raise EditedIrError(f"{file_name}: expected one `@I.ir_module` class, found {len(classes)}")
    module = classes[0]
    if module.bases or module.keywords or [_dotted(d) for d in module.decorator_list] != ["I.ir_module"]:
        _refuse(module, file_name, "the class must be decorated with `@I.ir_module` alone")
    _check_binding(module, module.name, file_name)
    functions = frozenset(item.name for item in module.body if isinstance(item, ast.FunctionDef))
    for item in module.body:
        if isinstance(item, ast.FunctionDef):
            _check_function(item, _Scope(module.name, functions, frozenset()), file_name)
        elif isinstance(item, ast.Expr) and isinstance(item.value, ast.Call):
            # I.module_attrs({...}) and the like: literals and script names only
            _Grammar(_Scope(module.name, functions, frozenset()), file_name).expression(item.value)
        else:
            _refuse(item, file_name, "the module may hold only `@T.prim_func` functions")


@dataclass(frozen=True)
class _Scope:
    """What a name may be in one function: its module's class and functions, the names it binds."""

    module: str
    functions: frozenset[str]
    bound: frozenset[str]


def _check_function(function: ast.FunctionDef, module_scope: _Scope, file_name: str) -> None:
    _check_binding(function, function.name, file_name)
    if not _is_prim_func(function):
        _refuse(function, file_name, "a function must be decorated with `@T.prim_func` alone")
    arguments = function.args
    if (
        arguments.posonlyargs
        or arguments.vararg
        or arguments.kwonlyargs
        or arguments.kwarg
        or arguments.defaults
        or arguments.kw_defaults
    ):
        _refuse(function, file_name, "a prim_func takes plain parameters only (no defaults, *args, **kwargs)")
    bound = frozenset(_bound_names(function, file_name))
    grammar = _Grammar(_Scope(module_scope.module, module_scope.functions, bound), file_name)
    for decorator in function.decorator_list:
        if isinstance(decorator, ast.Call):
            for keyword in decorator.keywords:
                grammar.keyword(keyword)
    for argument in arguments.args:
        if argument.annotation is not None:
            grammar.expression(argument.annotation)
    if function.returns is not None:
        grammar.expression(function.returns)
    grammar.statements(function.body)


def _is_prim_func(function: ast.FunctionDef) -> bool:
    if len(function.decorator_list) != 1:
        return False
    decorator = function.decorator_list[0]
    if isinstance(decorator, ast.Call):
        return _dotted(decorator.func) == "T.prim_func" and not decorator.args
    return _dotted(decorator) == "T.prim_func"


def _bound_names(function: ast.FunctionDef, file_name: str) -> Iterator[str]:
    """Every name ``function`` binds: its parameters, and the targets of its assignments, loops
    and ``with`` statements (wherever they are: TVM's parser reports a use before the binding)."""
    for argument in function.args.args:
        _check_binding(argument, argument.arg, file_name)
        yield argument.arg
    for node in ast.walk(function):
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign, ast.For)):
            targets = [node.target]
        elif isinstance(node, ast.withitem) and node.optional_vars is not None:
            targets = [node.optional_vars]
        for target in targets:
            for name in _target_names(target):
                _check_binding(name, name.id, file_name)
                yield name.id


def _target_names(target: ast.expr) -> Iterator[ast.Name]:
    if isinstance(target, ast.Name):
        yield target
    elif isinstance(target, (ast.Tuple, ast.List)):
        for element in target.elts:
            yield from _target_names(element)


def _check_binding(node: ast.AST, name: str, file_name: str) -> None:
    if name in _RESERVED or name.startswith("__"):
        _refuse(node, file_name, f"the name {name!r} cannot be bound in TVMScript read by irtrace")


class _Grammar:
    """The statements and expressions a prim_func's body may hold (see the module docstring)."""

    def __init__(self, scope: _Scope, file_name: str) -> None:
        self.scope = scope
        self.file_name = file_name

    def refuse(self, node: ast.AST, why: str) -> None:
        _refuse(node, self.file_name, why)

    # statements

    def statements(self, body: list[ast.stmt]) -> None:
        for statement in body:
            self.statement(statement)

    def statement(self, node: ast.stmt) -> None:
        if isinstance(node, ast.Expr):
            self.expression(node.value)
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                self.target(target)
            self.expression(node.value)
        elif isinstance(node, ast.AnnAssign):
            self.target(node.target)
            self.expression(node.annotation)
            if node.value is not None:
                self.expression(node.value)
        elif isinstance(node, ast.AugAssign):
            self.operator(node, node.op)
            self.target(node.target)
            self.expression(node.value)
        elif isinstance(node, (ast.For, ast.While)):
            if node.orelse:
                self.refuse(node, f"`{type(node).__name__.lower()} ... else` is not TVMScript")
            if isinstance(node, ast.For):
                self.target(node.target)
                self.expression(node.iter)
            else:
                self.expression(node.test)
            self.statements(node.body)
        elif isinstance(node, ast.If):
            self.expression(node.test)
            self.statements(node.body)
            self.statements(node.orelse)
        elif isinstance(node, ast.With):
            for item in node.items:
                self.expression(item.context_expr)
                if item.optional_vars is not None:
                    self.target(item.optional_vars)
            self.statements(node.body)
        elif isinstance(node, ast.Assert):
            self.expression(node.test)
            if node.msg is not None:
                self.expression(node.msg)
        elif isinstance(node, ast.Return):
            if node.value is not None:
                self.expression(node.value)
        elif not isinstance(node, (ast.Pass, ast.Break, ast.Continue)):
            self.refuse(node, f"{_construct(node)} is not TVMScript")

    def target(self, node: ast.expr) -> None:
        """What an assignment, loop or ``with`` may bind or store to: names, tuples of them, and
        an element of a buffer the function binds (``A[i] = ...``)."""
        if isinstance(node, ast.Name):
            return
        if isinstance(node, (ast.Tuple, ast.List)):
            for element in node.elts:
                self.target(element)
        elif isinstance(node, ast.Subscript):
            self.subscript(node)
        else:
            self.refuse(node, f"cannot assign to {_construct(node)} in TVMScript")

    # expressions

    def expression(self, node: ast.expr) -> None:
        if isinstance(node, ast.Constant):
            self.constant(node)
        elif isinstance(node, ast.Name):
            self.name(node)
        elif isinstance(node, ast.Attribute):
            self.attribute(node)
        elif isinstance(node, ast.Subscript):
            self.subscript(node)
        elif isinstance(node, ast.Call):
            self.call(node)
        elif isinstance(node, ast.BinOp):
            self.operator(node, node.op)
            self.expression(node.left)
            self.expression(node.right)
        elif isinstance(node, ast.UnaryOp):
            if not isinstance(node.op, _UNARY):
                self.refuse(node, f"the operator {type(node.op).__name__} is not TVMScript")
            self.expression(node.operand)
        elif isinstance(node, ast.BoolOp):
            for value in node.values:
                self.expression(value)
        elif isinstance(node, ast.Compare):
            for comparison in node.ops:
                if not isinstance(comparison, _COMPARISONS):
                    self.refuse(node, f"the comparison {type(comparison).__name__} is not TVMScript")
            for value in (node.left, *node.comparators):
                self.expression(value)
        elif isinstance(node, ast.IfExp):
            for value in (node.test, node.body, node.orelse):
                self.expression(value)
        elif isinstance(node, (ast.Tuple, ast.List)):
            for element in node.elts:
                self.expression(element)
        elif isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values, strict=True):
                if key is None:
                    self.refuse(node, "`**` in a dict is not TVMScript")
                else:
                    self.expression(key)
                self.expression(value)
        else:
            self.refuse(node, f"{_construct(node)} is not TVMScript")

    def operator(self, node: ast.AST, operator: ast.operator) -> None:
        if not isinstance(operator, _OPERATORS):
            self.refuse(node, f"the operator {type(operator).__name__} is not TVMScript")

    def constant(self, node: ast.Constant) -> None:
        value = node.value
        if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > MAX_INT_BITS:
            self.refuse(node, f"an integer literal wider than {MAX_INT_BITS} bits is not TVMScript")
        if not isinstance(value, (int, float, str, bool, type(None))):
            self.refuse(node, "only number, string, bool and None literals are TVMScript")

    def name(self, node: ast.Name) -> None:
        if node.id == "range" or node.id in self.scope.bound:
            return
        if node.id in ("T", "I"):
            self.refuse(node, f"`{node.id}` is used only as `{node.id}.NAME`")
        self.refuse(node, f"the name {node.id!r} is not bound in this function")

    def attribute(self, node: ast.Attribute) -> None:
        """``T.NAME``/``I.NAME`` from the table, ``Module.function``, ``buffer.data``; nothing else."""
        base = node.value
        if isinstance(base, ast.Name) and base.id in ("T", "I"):
            names = script_names()[base.id]
            if node.attr in DECORATOR_ONLY:
                self.refuse(node, f"{base.id}.{node.attr} is only a decorator")
            if node.attr not in names:
                self.refuse(node, f"{base.id}.{node.attr} is not a TVMScript name of the installed TileLang")
            return
        if isinstance(base, ast.Name) and base.id == self.scope.module:
            if node.attr not in self.scope.functions:
                self.refuse(node, f"{base.id}.{node.attr} is not a function of the module")
            return
        if isinstance(base, ast.Name) and base.id in self.scope.bound:
            if node.attr not in BUFFER_FIELDS:
                fields = ", ".join(sorted(BUFFER_FIELDS))
                self.refuse(node, f"`.{node.attr}` is not a buffer field TVMScript prints ({fields})")
            return
        self.refuse(node, "an attribute is read only of T, I, the module or a name the function binds")

    def subscript(self, node: ast.Subscript) -> None:
        """An element or slice of a name the function binds (or of its ``shape``/``strides``)."""
        base = node.value
        if isinstance(base, ast.Attribute):
            self.attribute(base)
            if _dotted(base.value) not in self.scope.bound:
                self.refuse(node, "only a buffer the function binds, or its fields, can be indexed")
        elif not (isinstance(base, ast.Name) and base.id in self.scope.bound):
            self.refuse(node, "only a buffer the function binds, or its fields, can be indexed")
        self.index(node.slice)

    def index(self, node: ast.expr) -> None:
        if isinstance(node, ast.Slice):
            for part in (node.lower, node.upper, node.step):
                if part is not None:
                    self.expression(part)
        elif isinstance(node, ast.Tuple):
            for element in node.elts:
                self.index(element)
        else:
            self.expression(node)

    def call(self, node: ast.Call) -> None:
        """A call of a ``T.``/``I.`` name, of the module's function, or ``range``; plain arguments."""
        function = node.func
        if isinstance(function, ast.Attribute) and isinstance(function.value, ast.Name):
            if function.value.id not in ("T", "I", self.scope.module):
                self.refuse(node, "only T.NAME, I.NAME and the module's functions can be called")
            self.attribute(function)
        elif not (isinstance(function, ast.Name) and function.id == "range"):
            self.refuse(node, "only T.NAME, I.NAME, the module's functions and range can be called")
        for argument in node.args:
            if isinstance(argument, ast.Starred):
                self.refuse(argument, "`*` in a call is not TVMScript")
            self.expression(argument)
        for keyword in node.keywords:
            self.keyword(keyword)

    def keyword(self, keyword: ast.keyword) -> None:
        if keyword.arg is None:
            self.refuse(keyword.value, "`**` in a call is not TVMScript")
        elif keyword.arg.startswith("__"):
            self.refuse(keyword.value, f"the keyword {keyword.arg!r} is not TVMScript")
        self.expression(keyword.value)


def _construct(node: ast.AST) -> str:
    return {
        "ListComp": "a list comprehension",
        "SetComp": "a set comprehension",
        "DictComp": "a dict comprehension",
        "GeneratorExp": "a generator expression",
        "Lambda": "a lambda",
        "NamedExpr": "`:=`",
        "JoinedStr": "an f-string",
        "Starred": "`*`",
    }.get(type(node).__name__, type(node).__name__)


@cache
def script_names() -> dict[str, frozenset[str]]:
    """The names ``T.`` and ``I.`` may take, read from the installed TileLang: TVMScript's IR
    builder namespaces (public names whose values are TVM's or TileLang's, modules left out) and
    TileLang's registered operators by their printed names (``tile_operators``)."""
    namespaces = script_namespaces()
    table = {}
    for key, namespace in namespaces.items():
        table[key] = frozenset(
            name
            for name in dir(namespace)
            if not name.startswith("_") and _is_script_value(getattr(namespace, name, None))
        )
    table["T"] |= frozenset(tile_operators())
    return table


def _is_script_value(value: Any) -> bool:
    """Whether a ``T.``/``I.`` attribute is TVM's or TileLang's own, not a module or a helper."""
    if isinstance(value, types.ModuleType) or value is None:
        return False
    module = getattr(value, "__module__", None) or getattr(type(value), "__module__", "")
    return str(module).split(".")[0] in ("tvm", "tilelang")


def _dotted(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return f"{base}.{node.attr}" if base is not None else None
    return None


def _refuse(node: ast.AST, file_name: str, why: str) -> None:
    raise EditedIrError(f"{file_name}:{getattr(node, 'lineno', '?')}: {why}")


# ----------------------------------------------------------------------------- TileLang's operators


@cache
def tile_operators() -> dict[str, str]:
    """TileLang's operators that TVMScript's ``T`` lacks, by the name the printer gives them
    (``TScriptPrinterName``): ``{"fill": "tl.tileop.fill", ...}``."""
    import tilelang  # noqa: F401  (registers TileLang's operators)
    import tvm
    import tvm.tirx.script.parser as tirx_script

    found: dict[str, str] = {}
    for name in map(str, tvm.get_global_func("ir.ListOpNames")()):
        try:
            printed = tvm.ir.Op.get(name).get_attr("TScriptPrinterName")
        except Exception:  # an operator without printer attributes
            continue
        # one printer name, two operators (``fma``): TileLang's wins, as TileLang printed it
        if (
            printed is not None
            and not hasattr(tirx_script, str(printed))
            and (str(printed) not in found or name.startswith("tl."))
        ):
            found[str(printed)] = name
    return found


def _tile_op_calls(tree: ast.Module) -> list[TileOpCall]:
    """Each call of a TileLang operator, with the dtype the printer left out: the annotation's for
    ``x: T.int32 = T.op()``, ``bool`` for a condition, ``int32`` in arithmetic, else ``handle``
    (a statement, an operator's argument). A guess: an operator that returns a value as a
    statement (``T.tvm_mfma``, float32x4) is read back as ``handle``."""
    operators = tile_operators()
    contexts: dict[int, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Expr):
            contexts[id(node.value)] = "handle"
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            annotation = _dotted(node.annotation) or ""
            contexts[id(node.value)] = (
                annotation.removeprefix("T.") if annotation.startswith("T.") else "int32"
            )
        elif isinstance(node, (ast.If, ast.While, ast.IfExp, ast.Assert)):
            contexts[id(node.test)] = "bool"
        elif isinstance(node, ast.BoolOp):
            contexts.update((id(value), "bool") for value in node.values)
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            contexts[id(node.operand)] = "bool"
        elif isinstance(node, ast.BinOp):
            contexts.update((id(value), "int32") for value in (node.left, node.right))
        elif isinstance(node, ast.Compare):
            contexts.update((id(value), "int32") for value in (node.left, *node.comparators))
    calls = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            dotted = _dotted(node.func)
            if dotted is not None and dotted.startswith("T.") and dotted[2:] in operators:
                calls.append(
                    TileOpCall(
                        node.func.lineno, node.func.col_offset, dotted[2:], contexts.get(id(node), "handle")
                    )
                )
    return calls


_TYPED = "T.tileop__{dtype}__{name}"
_TYPED_NAME = re.compile(r"tileop__(\w+?)__(\w+)")


def _typed_calls(text: str, calls: list[TileOpCall]) -> str:
    """``text`` with each TileLang operator call renamed to carry its dtype (same lines, so TVM's
    errors still point at the user's line)."""
    lines = text.splitlines(keepends=True)
    for call in sorted(calls, key=lambda c: (c.line, -c.column)):
        line = lines[call.line - 1]
        # col_offset counts UTF-8 bytes
        raw = line.encode("utf-8")
        old = f"T.{call.name}".encode()
        if raw[call.column : call.column + len(old)] != old:
            continue
        new = _TYPED.format(dtype=call.dtype, name=call.name).encode()
        lines[call.line - 1] = (raw[: call.column] + new + raw[call.column + len(old) :]).decode("utf-8")
    return "".join(lines)


class _ScriptT:
    """TVMScript's ``T``, plus TileLang's operators by their printed names."""

    def __init__(self, base: Any) -> None:
        self._base = base

    def __getattr__(self, name: str) -> Any:
        typed = _TYPED_NAME.fullmatch(name)
        if typed is not None:
            return _operator_call(tile_operators()[typed.group(2)], typed.group(1))
        value = getattr(self._base, name)
        if name in ("sblock_attr", "func_attr"):
            return lambda attrs: value(_int32_immediates(attrs))
        if name in _LOOPS:
            return _with_int32_annotations(value)
        return value


_LOOPS = frozenset({"serial", "parallel", "vectorized", "unroll", "thread_binding", "grid"})


def _with_int32_annotations(loop: Any) -> Any:
    def call(*args: Any, **kwargs: Any) -> Any:
        if kwargs.get("annotations") is not None:
            kwargs["annotations"] = _int32_immediates(kwargs["annotations"])
        return loop(*args, **kwargs)

    return call


def _int32_immediates(value: Any) -> Any:
    """Annotation values with Python ints as ``T.int32`` immediates: TileLang writes them so,
    and the printer shows both as ``128`` (a plain int would make another module)."""
    import tvm

    if isinstance(value, int) and not isinstance(value, bool):
        return tvm.tirx.IntImm("int32" if -(2**31) <= value < 2**31 else "int64", value)
    if isinstance(value, dict):
        return {key: _int32_immediates(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_int32_immediates(item) for item in value]
    return value


def _operator_call(op_name: str, dtype: str) -> Any:
    import tvm

    op = tvm.ir.Op.get(op_name)

    def call(*args: Any, **annotations: Any) -> Any:
        return tvm.tirx.Call(dtype, op, list(args), annotations=_int32_immediates(annotations) or None)

    return call


@cache
def script_namespaces() -> dict[str, Any]:
    """The names TVMScript text may use: ``I`` and ``T`` only."""
    import tilelang  # noqa: F401
    import tvm.tirx.script.parser as tirx_script
    from tvm.script import ir

    return {"I": ir, "T": tirx_script}


def _tvm_parse(source: str, file_name: str) -> Any:
    import tvm
    from tvm.ir import diagnostics
    from tvm.script.parser.core.entry import parse

    names = script_namespaces()
    found: list[str] = []

    def keep(context: Any) -> None:
        # TVM's own renderer prints to stderr; irtrace keeps the first error for its one line
        found.extend(f"{d.span.line}: {d.message}" for d in context.diagnostics if d.span is not None)

    diagnostics.override_renderer(keep)
    try:
        # empty builtins: nothing the grammar let through can reach Python's own functions
        script_vars = {"__builtins__": {}, "I": names["I"], "T": _ScriptT(names["T"])}
        parsed = parse(source, extra_vars=script_vars, check_well_formed=False)
    except Exception as error:
        if found:
            line, _, message = found[0].partition(": ")
            raise EditedIrError(f"{file_name}:{line}: TVMScript parser: {message}") from None
        message = (str(error).strip().splitlines() or [type(error).__name__])[-1]
        raise EditedIrError(f"{file_name}: TVMScript parser: {message}") from None
    finally:
        diagnostics.override_renderer(None)
    if not isinstance(parsed, tvm.IRModule):
        raise EditedIrError(f"{file_name}: expected an `@I.ir_module`, got {type(parsed).__name__}")
    return parsed
