"""The layout evaluator on hostile expressions, as a trace could hold them: every one is refused
with ``LayoutExpressionError`` and a message saying why, and none runs anything."""

from __future__ import annotations

from pathlib import Path

import pytest

from irtrace.facts.layout_eval import MAX_EXPRESSION_CHARS, LayoutExpressionError, evaluate, forward_index
from irtrace.trace.schema import BufferLayout


def attacks(marker: Path) -> list[tuple[str, str]]:
    write = f"__import__('pathlib').Path({str(marker)!r}).write_text('x')"
    return [
        (write, "unsupported expression"),
        (f"T.if_then_else({write}, 1, 2)", "unsupported expression"),
        (f"T.min({write}, 1)", "unsupported expression"),
        (f"T.Cast({write}, 1)", "unsupported expression"),
        ("os.system('true')", "unsupported expression"),
        ("open('/etc/passwd').read()", "unsupported expression"),
        ("_i.__class__.__mro__", "unsupported expression"),
        ("().__class__.__bases__[0].__subclasses__()", "unsupported expression"),
        ("(lambda: 1)()", "unsupported expression"),
        ("[x for x in range(10 ** 9)]", "unsupported expression"),
        ("9 ** 9 ** 9", "unsupported expression"),
        ("T.min(*[1, 2])", "unsupported expression"),
        ("T.min(_i, key=print)", "unsupported expression"),
        ("T.if_then_else(1)", "unsupported expression"),
        ("T.min()", "unsupported expression"),
        ("int32(1, 2)", "unsupported expression"),
        ("f'{_i}'", "unsupported expression"),
        ("'text'", "unsupported expression"),
        ("1.5", "unsupported expression"),
        ("_i[0]", "unsupported expression"),
        ("__builtins__", "unknown name '__builtins__'"),
        ("print", "unknown name 'print'"),
        ("_i; import os", "not an expression"),
        ("", "not an expression"),
        ("\x00", "not an expression"),
        ("(" * 5000 + "1" + ")" * 5000, "not an expression"),
        ("-" * 15000 + "1", "not an expression"),
        ("1 + " * 6000 + "1", f"at most {MAX_EXPRESSION_CHARS}"),
        ("1 // 0", "division by zero"),
        ("_i % (_i - _i)", "modulo by zero"),
        ("T.floordiv(_i, 0)", "division by zero"),
        ("T.truncmod(_i, 0)", "division by zero"),
    ]


def test_hostile_expressions_are_refused_and_nothing_runs(tmp_path: Path) -> None:
    marker = tmp_path / "PWNED"
    for text, message in attacks(marker):
        with pytest.raises(LayoutExpressionError, match=message if "(" not in message else None) as raised:
            evaluate(text, {"_i": 3})
        assert message in str(raised.value), (text[:60], str(raised.value))
        assert "\n" not in str(raised.value)
    assert not marker.exists()


def test_what_tilelang_prints_still_evaluates() -> None:
    assert evaluate("_i // 8 * 4 + _j % 4", {"_i": 17, "_j": 6}) == 10
    assert evaluate("T.if_then_else(_i < 2, 5, 7)", {"_i": 3}) == 7
    assert evaluate('T.Cast("int32", _i) + T.max(_i, 9)', {"_i": 3}) == 12
    assert evaluate("(_i // 16 + _i % 8 // 4) % 2 ^ 1", {"_i": 20}) == 1


def test_a_hostile_layout_record_fails_clearly() -> None:
    layout = BufferLayout(
        buffer="A",
        scope="shared",
        dtype="float16",
        shape=[4],
        kind="layout",
        input_shape=[4],
        output_shape=[4],
        forward_vars=["__import__"],
        forward_index=["__import__('os')"],
        summary="linear",
        text="",
    )
    with pytest.raises(LayoutExpressionError, match="unsupported expression"):
        forward_index(layout, [0])
    with pytest.raises(LayoutExpressionError, match="2 coordinates for a layout of 1"):
        forward_index(layout, [0, 1])
