"""Read an edited IR module (TVMScript as ``irtrace ir`` prints it) back into TVM, as data.

TVM's TVMScript parser evaluates the expressions it meets with Python's ``eval`` (builtins
included), so an IR file is first checked against a whitelist of Python syntax: one
``@I.ir_module`` class of ``@T.prim_func`` functions, statements and expressions TVMScript
prints, no builtin name but ``range``, no name or attribute starting with ``_``, and ``T.``/``I.``
attributes that are TVMScript's own (never a module). Only then is it parsed, with a ``T`` that
also knows TileLang's operators under the names TileLang's printer gives them (``T.fill``,
``T.gemm``, ``T.launch_thread_idx``).
"""

from __future__ import annotations

import ast
import builtins
import re
import types
from dataclasses import dataclass
from functools import cache
from typing import Any

from irtrace.core.errors import InputError

ALLOWED_BUILTINS = frozenset({"range"})
"""The one builtin TVMScript prints (``for i in range(8)``)."""

_STATEMENTS = (
    ast.Expr,
    ast.Assign,
    ast.AnnAssign,
    ast.AugAssign,
    ast.For,
    ast.While,
    ast.If,
    ast.With,
    ast.Assert,
    ast.Pass,
    ast.Return,
    ast.Break,
    ast.Continue,
)
_EXPRESSIONS = (
    ast.Name,
    ast.Constant,
    ast.Attribute,
    ast.Call,
    ast.Subscript,
    ast.Slice,
    ast.Tuple,
    ast.List,
    ast.Dict,
    ast.BinOp,
    ast.UnaryOp,
    ast.BoolOp,
    ast.Compare,
    ast.IfExp,
    ast.Starred,
)
_OTHER = (
    ast.keyword,
    ast.arguments,
    ast.arg,
    ast.withitem,
    ast.expr_context,
    ast.operator,
    ast.unaryop,
    ast.boolop,
    ast.cmpop,
)


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


def check_tvmscript_only(tree: ast.Module, file_name: str) -> None:
    """Refuse anything but the Python TVMScript prints: the file is evaluated by TVM's parser."""
    classes = [node for node in tree.body if isinstance(node, ast.ClassDef)]
    others = [node for node in tree.body if not isinstance(node, ast.ClassDef)]
    if others:
        _refuse(others[0], file_name, "only one `@I.ir_module` class may be at the top level")
    if len(classes) != 1:
        raise EditedIrError(f"{file_name}: expected one `@I.ir_module` class, found {len(classes)}")
    module = classes[0]
    if module.bases or module.keywords or [_dotted(d) for d in module.decorator_list] != ["I.ir_module"]:
        _refuse(module, file_name, "the class must be decorated with `@I.ir_module` alone")
    for item in module.body:
        if isinstance(item, ast.FunctionDef) and _is_prim_func(item):
            _check_function(item, file_name)
        elif isinstance(item, ast.Expr) and isinstance(item.value, ast.Call):
            _check_node(item, file_name)  # I.module_attrs({...}) and the like
        else:
            _refuse(item, file_name, "the module may hold only `@T.prim_func` functions")


def _is_prim_func(function: ast.FunctionDef) -> bool:
    if len(function.decorator_list) != 1:
        return False
    decorator = function.decorator_list[0]
    if isinstance(decorator, ast.Call):
        return _dotted(decorator.func) == "T.prim_func" and not decorator.args
    return _dotted(decorator) == "T.prim_func"


def _check_function(function: ast.FunctionDef, file_name: str) -> None:
    if function.returns is not None:
        _check_node(function.returns, file_name)
    for decorator in function.decorator_list:
        _check_node(decorator, file_name)
    _check_node(function.args, file_name)
    for statement in function.body:
        _check_node(statement, file_name)


def _check_node(node: ast.AST, file_name: str) -> None:
    for child in ast.walk(node):
        if not isinstance(child, (*_STATEMENTS, *_EXPRESSIONS, *_OTHER)):
            _refuse(child, file_name, f"{type(child).__name__} is not TVMScript")
        elif isinstance(child, ast.Name):
            _check_name(child, child.id, file_name)
        elif isinstance(child, ast.arg):
            _check_name(child, child.arg, file_name)
        elif isinstance(child, ast.keyword) and child.arg is not None:
            _check_name(child, child.arg, file_name, builtin_ok=True)
        elif isinstance(child, ast.Attribute):
            _check_attribute(child, file_name)
        elif isinstance(child, ast.Constant) and not isinstance(
            child.value, (int, float, complex, str, bool, type(None))
        ):
            _refuse(child, file_name, "only number, string, bool and None constants are read")


def _check_name(node: ast.AST, name: str, file_name: str, *, builtin_ok: bool = False) -> None:
    if name.startswith("_") and name != "_":
        _refuse(node, file_name, f"the name {name!r} starts with '_'")
    if not builtin_ok and name not in ALLOWED_BUILTINS and hasattr(builtins, name):
        _refuse(
            node,
            file_name,
            f"{name!r} is a Python builtin; TVMScript text is evaluated, so irtrace reads no builtin "
            "but range (rename the variable)",
        )


def _check_attribute(node: ast.Attribute, file_name: str) -> None:
    if node.attr.startswith("_"):
        _refuse(node, file_name, f"the attribute {node.attr!r} starts with '_'")
    dotted = _dotted(node)
    if dotted is None or dotted.partition(".")[0] not in ("T", "I"):
        return  # an attribute of an IR variable (``A_shared.data``)
    namespace, _, path = dotted.partition(".")
    value: Any = script_namespaces()[namespace]
    for part in path.split("."):
        value = getattr(value, part, None)
        if value is None:
            return  # TVM's parser reports the unknown name
        if isinstance(value, types.ModuleType) or not _from_tvm(value):
            _refuse(node, file_name, f"{dotted} is not a TVMScript construct")


def _from_tvm(value: Any) -> bool:
    """Whether ``value`` (a ``T.``/``I.`` attribute) is TVM's or TileLang's, not a helper they import."""
    module = getattr(value, "__module__", None) or getattr(type(value), "__module__", "")
    return str(module).split(".")[0] in ("tvm", "tilelang", "builtins")


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
        parsed = parse(
            source, extra_vars={"I": names["I"], "T": _ScriptT(names["T"])}, check_well_formed=False
        )
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
