"""Kernel specs: ``path.py``, ``path.py::name``, ``path.py::factory(args)`` and ``pkg.module::name``.

Arguments are parsed with ``ast`` here, so a malformed spec fails before anything is imported.
Literals and dtype names such as ``T.float16`` are kept as values; any other expression
(``1 << 20``, ``BLOCK``, ``determine_fp8_type()``) is kept as its text and evaluated later in
the kernel module's namespace (see ``irtrace.lowering.loader.bind_call``). This module does not import
tilelang.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Any

from irtrace.base.errors import UsageError

_DTYPE_PREFIXES = ("T", "tl", "tilelang.language", "tir", "tvm.tirx")


@dataclass(frozen=True)
class DtypeName:
    """A dtype written as ``T.float16`` in a spec; resolved against tilelang when the kernel is built."""

    name: str

    def __str__(self) -> str:
        return f"T.{self.name}"


@dataclass(frozen=True)
class Expression:
    """An argument that is not a literal, kept as the user wrote it and evaluated in the kernel's module."""

    source: str

    def __str__(self) -> str:
        return self.source


@dataclass(frozen=True)
class KernelSpec:
    """A parsed kernel spec."""

    path: str
    """The kernel file as given, or a dotted module name (``pkg.sub.module``)."""
    name: str | None = None
    """The kernel, factory or jit function; ``None`` means every module-level PrimFunc."""
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)
    called: bool = False
    """Whether the spec had a call (``name(...)``), even an empty one."""

    @property
    def text(self) -> str:
        """The spec in canonical form, as written into traces."""
        if self.name is None:
            return self.path
        return f"{self.path}::{self.name}{self.call_text}" if self.called else f"{self.path}::{self.name}"

    @property
    def call_text(self) -> str:
        parts = [format_value(a) for a in self.args]
        parts += [f"{k}={format_value(v)}" for k, v in self.kwargs.items()]
        return f"({', '.join(parts)})"

    def args_json(self) -> dict[str, Any]:
        """Arguments as JSON values for the trace header (dtypes as ``T.name`` strings, expressions
        as their text); ``KernelCall.args_json`` gives the evaluated form."""
        return {
            "args": [to_json(a) for a in self.args],
            "kwargs": {k: to_json(v) for k, v in self.kwargs.items()},
        }


def format_value(value: Any) -> str:
    return str(value) if isinstance(value, (DtypeName, Expression)) else repr(value)


def to_json(value: Any) -> Any:
    if isinstance(value, (DtypeName, Expression)):
        return str(value)
    if isinstance(value, (list, tuple)):
        return [to_json(v) for v in value]
    if isinstance(value, dict):
        return {str(k): to_json(v) for k, v in value.items()}
    return value


def parse_spec(text: str, *, expressions: bool = True) -> KernelSpec:
    """Parse ``path.py[::name[(args)]]``; a malformed spec is a ``UsageError`` that shows the forms.

    Arguments may be expressions (kept as ``Expression``); only their syntax is checked here.
    Without ``expressions`` (a spec read from a trace, which is data), an argument that is not a
    literal or a dtype name is a ``UsageError``.
    """
    path, sep, rest = text.partition("::")
    path = path.strip()
    if not path:
        raise UsageError(
            f"kernel spec {text!r} has no file; write path.py, path.py::name or path.py::name(args)"
        )
    if not sep:
        return KernelSpec(path=path)
    rest = rest.strip()
    if not rest:
        raise UsageError(f"kernel spec {text!r} has an empty name after '::'")
    name, paren, _ = rest.partition("(")
    name = name.strip()
    if not name.isidentifier():
        raise UsageError(f"{name!r} in kernel spec {text!r} is not a Python name")
    if not paren:
        return KernelSpec(path=path, name=name)
    args, kwargs = parse_call_arguments(rest, text, expressions=expressions)
    return KernelSpec(path=path, name=name, args=args, kwargs=kwargs, called=True)


def parse_call_arguments(
    call: str, where: str, *, expressions: bool = False
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """Parse ``name(1024, block_M=128, dtype=T.float16)`` into literal arguments.

    With ``expressions``, an argument that is not a literal becomes an ``Expression`` holding
    its source text instead of a ``UsageError``.
    """
    call = call.strip()
    try:
        tree = ast.parse(call, mode="eval")
    except SyntaxError as error:
        raise UsageError(f"cannot parse the call in {where!r}: {error.msg}") from None
    node = tree.body
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
        raise UsageError(f"{where!r}: expected name(arguments) after '::'")

    def value(argument: ast.expr) -> Any:
        if not expressions:
            return literal_value(argument, where)
        return spec_value(argument, where, call)

    args = tuple(value(a) for a in node.args)
    kwargs: dict[str, Any] = {}
    for keyword in node.keywords:
        if keyword.arg is None:
            raise UsageError(f"{where!r}: **kwargs is not allowed; write each argument as name=value")
        if keyword.arg in kwargs:
            raise UsageError(f"{where!r}: argument {keyword.arg!r} is given twice")
        kwargs[keyword.arg] = value(keyword.value)
    return args, kwargs


def spec_value(node: ast.expr, where: str, source: str) -> Any:
    """A literal or dtype name as its value; any other expression as an ``Expression`` of its text."""
    if isinstance(node, ast.Starred):
        raise UsageError(f"{where!r}: *args is not allowed; write each argument separately")
    try:
        return literal_value(node, where)
    except UsageError:
        text = ast.get_source_segment(source, node) or ast.unparse(node)
        return Expression(text)


def literal_value(node: ast.expr, where: str) -> Any:
    """A literal, a container of literals, or a dtype name; anything else is a ``UsageError``."""
    if isinstance(node, ast.Starred):
        raise UsageError(f"{where!r}: *args is not allowed; write each argument as a literal")
    dtype = _dtype_name(node)
    if dtype is not None:
        return DtypeName(dtype)
    if isinstance(node, (ast.Tuple, ast.List)):
        values = [literal_value(e, where) for e in node.elts]
        return tuple(values) if isinstance(node, ast.Tuple) else values
    if isinstance(node, ast.Dict):
        return {
            literal_value(k, where) if k is not None else None: literal_value(v, where)
            for k, v in zip(node.keys, node.values, strict=False)
        }
    try:
        return ast.literal_eval(node)
    except ValueError:
        source = ast.unparse(node)
        raise UsageError(
            f"argument {source!r} in {where!r} is not a literal; use numbers, strings, True/False/None, "
            "tuples, lists, dicts, or dtype names like T.float16"
        ) from None


def _dtype_name(node: ast.expr) -> str | None:
    if isinstance(node, ast.Attribute):
        prefix = ast.unparse(node.value)
        if prefix in _DTYPE_PREFIXES and not node.attr.startswith("_"):  # T.__class__ is no dtype
            return node.attr
    return None
