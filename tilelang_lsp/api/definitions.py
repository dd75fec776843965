"""What a definition read from source shows: its signature as the ``def`` writes it, the first
lines of its docstring, and where it is; for ``tilelang_lsp.api.source_index``."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Literal

from tilelang_lsp.protocol import ApiParameter

Kind = Literal["module", "class", "function", "value"]

DOC_LINES = 12
"""How much of a docstring completion and hover show (the whole text is one click away)."""


@dataclass(frozen=True)
class Described:
    """What completion, hover, signature help and definition show of one name."""

    kind: Kind
    module: str | None = None
    signature: str | None = None
    parameters: tuple[ApiParameter, ...] = ()
    doc: str = ""
    file: str | None = None
    line: int | None = None


def dataclass_init(node: ast.ClassDef) -> ast.FunctionDef:
    """The ``__init__`` ``@dataclass`` writes: ``self``, then each annotated field (not a
    ``ClassVar``) with its default (fields of base classes are left out)."""
    fields = [
        statement
        for statement in node.body
        if isinstance(statement, ast.AnnAssign)
        and isinstance(statement.target, ast.Name)
        and "ClassVar" not in ast.unparse(statement.annotation)
    ]
    arguments = [ast.arg(arg="self")] + [
        ast.arg(arg=f.target.id, annotation=f.annotation) for f in fields if isinstance(f.target, ast.Name)
    ]
    defaults = [f.value for f in fields if f.value is not None]
    if any(f.value is None for f in fields[len(fields) - len(defaults) :]):
        defaults = []  # a field without a default after one with: not a valid dataclass, shown bare
    signature = ast.arguments(
        posonlyargs=[],
        args=arguments,
        vararg=None,
        kwonlyargs=[],
        kw_defaults=[],
        kwarg=None,
        defaults=defaults,
    )
    return ast.FunctionDef(
        name="__init__", args=signature, body=[], decorator_list=[], returns=None, lineno=node.lineno
    )


def shown_doc(text: str) -> str:
    lines = text.strip().splitlines()
    shown = "\n".join(lines[:DOC_LINES])
    return shown + ("\n…" if len(lines) > DOC_LINES else "")


def describe_function(node: ast.FunctionDef | ast.AsyncFunctionDef, file: str | None) -> Described:
    signature, parameters = signature_of(node.args, node.returns)
    return Described(
        kind="function",
        signature=signature,
        parameters=parameters,
        doc=shown_doc(ast.get_docstring(node) or ""),
        file=file,
        line=node.lineno,
    )


def signature_of(
    arguments: ast.arguments, returns: ast.expr | None = None, *, skip_first: bool = False
) -> tuple[str, tuple[ApiParameter, ...]]:
    """``(A, B, *, x: int = 1) -> None`` as the source writes it, and its parameters."""
    parameters: list[ApiParameter] = []
    texts: list[str] = []
    positional = [*arguments.posonlyargs, *arguments.args]
    defaults: list[ast.expr | None] = [None] * (len(positional) - len(arguments.defaults))
    defaults += arguments.defaults
    for index, (argument, default) in enumerate(zip(positional, defaults, strict=True)):
        if skip_first and index == 0:
            continue
        texts.append(_parameter(argument, default))
        parameters.append(ApiParameter(name=argument.arg, text=texts[-1], kind="positional"))
        if arguments.posonlyargs and argument is arguments.posonlyargs[-1]:
            texts.append("/")
    if arguments.vararg is not None:
        texts.append("*" + _parameter(arguments.vararg, None))
        parameters.append(ApiParameter(name=arguments.vararg.arg, text=texts[-1], kind="var_positional"))
    elif arguments.kwonlyargs:
        texts.append("*")
    for argument, default in zip(arguments.kwonlyargs, arguments.kw_defaults, strict=True):
        texts.append(_parameter(argument, default))
        parameters.append(ApiParameter(name=argument.arg, text=texts[-1], kind="keyword"))
    if arguments.kwarg is not None:
        texts.append("**" + _parameter(arguments.kwarg, None))
        parameters.append(ApiParameter(name=arguments.kwarg.arg, text=texts[-1], kind="var_keyword"))
    tail = f" -> {_source_text(returns)}" if returns is not None else ""
    return f"({', '.join(texts)}){tail}", tuple(parameters)


def _parameter(argument: ast.arg, default: ast.expr | None) -> str:
    """As ``inspect`` spells a parameter: ``x=1``, ``x: int = 1``."""
    text = argument.arg
    if argument.annotation is not None:
        text += f": {_source_text(argument.annotation)}"
        return text + (f" = {_source_text(default)}" if default is not None else "")
    return text + (f"={_source_text(default)}" if default is not None else "")


def _source_text(node: ast.expr) -> str:
    """An annotation or default as written; a string annotation shown as its text."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str) and len(node.value) < 200:
        try:
            return ast.unparse(ast.parse(node.value, mode="eval").body)
        except SyntaxError:
            pass
    return ast.unparse(node)
