"""Kernel specs: ``path.py``, ``path.py::name`` and ``path.py::factory(args)``.

Arguments are parsed with ``ast`` and must be Python literals or dtype names such as
``T.float16``; they are never passed to ``eval``. This module does not import tilelang.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Any

from irtrace.errors import UsageError

_DTYPE_PREFIXES = ("T", "tl", "tilelang.language", "tir", "tvm.tirx")


@dataclass(frozen=True)
class DtypeName:
    """A dtype written as ``T.float16`` in a spec; resolved against tilelang when the kernel is built."""

    name: str

    def __str__(self) -> str:
        return f"T.{self.name}"


@dataclass(frozen=True)
class KernelSpec:
    """A parsed kernel spec."""

    path: str
    """The kernel file as given."""
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
        """Arguments as JSON values for the trace header (dtypes as ``T.name`` strings)."""
        return {
            "args": [to_json(a) for a in self.args],
            "kwargs": {k: to_json(v) for k, v in self.kwargs.items()},
        }


def format_value(value: Any) -> str:
    return str(value) if isinstance(value, DtypeName) else repr(value)


def to_json(value: Any) -> Any:
    if isinstance(value, DtypeName):
        return str(value)
    if isinstance(value, (list, tuple)):
        return [to_json(v) for v in value]
    if isinstance(value, dict):
        return {str(k): to_json(v) for k, v in value.items()}
    return value


def parse_spec(text: str) -> KernelSpec:
    """Parse ``path.py[::name[(args)]]``; a malformed spec is a ``UsageError`` that shows the forms."""
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
    args, kwargs = parse_call_arguments(rest, text)
    return KernelSpec(path=path, name=name, args=args, kwargs=kwargs, called=True)


def parse_call_arguments(call: str, where: str) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """Parse ``name(1024, block_M=128, dtype=T.float16)`` into literal arguments."""
    try:
        tree = ast.parse(call.strip(), mode="eval")
    except SyntaxError as error:
        raise UsageError(f"cannot parse the call in {where!r}: {error.msg}") from None
    node = tree.body
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
        raise UsageError(f"{where!r}: expected name(arguments) after '::'")
    args = tuple(literal_value(a, where) for a in node.args)
    kwargs: dict[str, Any] = {}
    for keyword in node.keywords:
        if keyword.arg is None:
            raise UsageError(f"{where!r}: **kwargs is not allowed; write each argument as name=literal")
        kwargs[keyword.arg] = literal_value(keyword.value, where)
    return args, kwargs


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
        if prefix in _DTYPE_PREFIXES:
            return node.attr
    return None
