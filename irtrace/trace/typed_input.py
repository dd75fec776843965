"""Decoding what a user writes by hand (a policy, a manifest) into typed Structs, in one step.

The file's tables are declared as msgspec ``Struct``s whose fields carry ``Meta`` constraints and,
where the type alone reads badly, a ``description`` saying in words what is allowed. A value
msgspec refuses becomes one line naming the file, the table and key, what is allowed and what was
there: ``irtrace-policy.toml [time] min_seconds: expected a number >= 0, not -1``. A check the
types cannot say (``0 or >= 1``) raises ``ValueError("KEY: ...")`` in the Struct's
``__post_init__`` and is located the same way. Reading the file itself is ``toml_file``'s job.
"""

from __future__ import annotations

import re
from typing import Any, TypeVar

import msgspec

from irtrace.base.errors import UsageError
from irtrace.trace.schema import show

T = TypeVar("T")

_AT = re.compile(r" - at `\$(?P<path>[^`]*)`$")
_UNKNOWN = re.compile(r"^Object contains unknown field `(?P<key>[^`]*)`")
_MISSING = re.compile(r"^Object missing required field `(?P<key>[^`]*)`")
_STEP = re.compile(r"\.([^.\[]+)|\[(\d+)\]")


def decode_tables(data: Any, kind: type[T], where: str) -> T:
    """``data`` (a file's tables) as ``kind``; a ``UsageError`` naming ``where`` and the key otherwise."""
    try:
        return msgspec.convert(data, kind)
    except msgspec.ValidationError as error:
        raise UsageError(problem_text(str(error), kind, data, where)) from None


def problem_text(message: str, kind: type[Any], data: Any, where: str) -> str:
    """msgspec's ``message`` about ``data`` decoded as ``kind``, in the words of the file's author.

    Tables read ``[name]`` and arrays of tables ``[[name]] #N`` (1-based, as one counts them in
    the file); a bad value names its key, what the key allows, and the value found.
    """
    at = _AT.search(message)
    text = message[: at.start()] if at else message
    location, info, value = where, _plain(msgspec.inspect.type_info(kind)), data
    described: Any = info
    for name, index in _STEP.findall(at["path"] if at else ""):
        if index:
            position = int(index)
            location += f" #{position + 1}"
            info = _plain(info.item_type) if isinstance(info, msgspec.inspect.ListType) else info
            described = info
            value = value[position] if isinstance(value, list) and position < len(value) else None
            continue
        field = _field(info, name)
        if field is None:
            break
        table = _table_kind(field.type)
        value = value.get(name) if isinstance(value, dict) else None
        if table is None:  # a plain key: what it allows, and what it holds
            return f"{location} {name}: expected {describe(field.type)}, not {show(value)}"
        location += f" {_key_text(name, table)}"
        info, described = _plain(field.type), field.type
    unknown, missing = _UNKNOWN.match(text), _MISSING.match(text)
    fields = [f.encode_name for f in info.fields] if isinstance(info, msgspec.inspect.StructType) else []
    if unknown:
        return f"{location}: unknown key {unknown['key']!r}; known keys: {', '.join(fields)}"
    if missing:
        field = _field(info, missing["key"])
        if field is None:
            return f"{location}: missing {missing['key']}"
        key = _key_text(missing["key"], _table_kind(field.type))
        return f"{location}: missing {key} ({describe(field.type)})"
    if text.startswith("Expected"):
        return f"{location}: expected {describe(described)}, not {show(value)}"
    key = text.partition(": ")[0]
    return f"{location} {text}" if key in fields else f"{location}: {text}"


def describe(info: Any) -> str:
    """What a field allows, in words: its ``description``, else read from its type."""
    inspect = msgspec.inspect
    if isinstance(info, inspect.Metadata):
        description = (info.extra_json_schema or {}).get("description")
        return str(description) if description else describe(info.type)
    if isinstance(info, inspect.UnionType):
        return " or ".join(describe(t) for t in info.types if not _is_unset(t))
    if isinstance(info, inspect.BoolType):
        return "true or false"
    if isinstance(info, (inspect.IntType, inspect.FloatType)):
        kind = "an integer" if isinstance(info, inspect.IntType) else "a number"
        return f"{kind} >= {info.ge:g}" if info.ge is not None else kind
    if isinstance(info, inspect.StrType):
        return "a string"
    if isinstance(info, (inspect.StructType, inspect.DictType)):
        return "a table"
    if isinstance(info, (inspect.ListType, inspect.VarTupleType)):
        return f"a list of {_plural(describe(info.item_type))}"
    if isinstance(info, inspect.LiteralType):
        return " or ".join(repr(v) for v in info.values)
    return "a valid value"


def _plural(text: str) -> str:
    """``a string`` -> ``strings``, for ``a list of strings``."""
    words = text.split(" ", 1)
    return f"{words[1]}s" if len(words) == 2 and words[0] in ("a", "an") else text


def _plain(info: Any) -> Any:
    """The type under a ``Meta`` and an optional ``UNSET``."""
    if isinstance(info, msgspec.inspect.Metadata):
        return _plain(info.type)
    if isinstance(info, msgspec.inspect.UnionType):
        others = [t for t in info.types if not _is_unset(t)]
        if len(others) == 1:
            return _plain(others[0])
    return info


def _is_unset(info: Any) -> bool:
    return type(info).__name__ == "UnsetType" or isinstance(info, msgspec.inspect.NoneType)


def _field(info: Any, name: str) -> Any:
    if not isinstance(info, msgspec.inspect.StructType):
        return None
    return next((f for f in info.fields if f.encode_name == name), None)


def _table_kind(info: Any) -> str | None:
    """``table`` for a field that is a table, ``array`` for an array of tables, else ``None``."""
    plain = _plain(info)
    if isinstance(plain, msgspec.inspect.StructType):
        return "table"
    if isinstance(plain, msgspec.inspect.ListType) and isinstance(
        _plain(plain.item_type), msgspec.inspect.StructType
    ):
        return "array"
    return None


def _key_text(name: str, table: str | None) -> str:
    return {"table": f"[{name}]", "array": f"[[{name}]]"}.get(table or "", name)
