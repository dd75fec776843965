"""Text from a trace made safe to show on a terminal: control characters become visible escapes.

A kernel name, pass name, target, error or IR text is whatever the trace file says; printed raw,
``ESC ] 0;title BEL`` retitles the window and ``ESC [31m`` recolours what follows (worse
sequences exist). Every tool passes such text through ``terminal_safe`` at the few places it
writes to stdout or stderr; files written with ``-o`` keep the text as it is.
"""

from __future__ import annotations

import re

_UNSAFE = (
    "\x00-\x08\x0b-\x1f"  # C0 controls but tab and newline (newline is added below when asked)
    "\x7f-\x9f"  # DEL and the C1 controls (0x9b is a one-byte CSI on some terminals)
    "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"  # bidi marks and overrides: text that reads reversed
    "\u2028\u2029"  # line and paragraph separators
)
_UNSAFE_KEEPING_NEWLINES = re.compile(f"[{_UNSAFE}]")
_UNSAFE_ON_ONE_LINE = re.compile(f"[{_UNSAFE}\n]")


def _visible(match: re.Match[str]) -> str:
    """``\\x1b``, ``\\n``, ``\\u202e``: Python's own escape, readable and unambiguous."""
    return repr(match.group())[1:-1]


def terminal_safe(text: str, *, newlines: bool = True) -> str:
    """``text`` with every control character (C0 but tab, DEL, C1, bidi overrides) written as its
    Python escape. With ``newlines=False`` a newline is escaped too, for text meant as one line."""
    pattern = _UNSAFE_KEEPING_NEWLINES if newlines else _UNSAFE_ON_ONE_LINE
    if pattern.search(text) is None:  # the common case: nothing to copy
        return text
    return pattern.sub(_visible, text)


_XML_FORBIDDEN = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
"""What XML 1.0 allows in no document: C0 controls but tab, newline and carriage return; lone
surrogates (which UTF-8 cannot hold); U+FFFE and U+FFFF."""


def xml_safe(text: str) -> str:
    """``text`` with every character XML 1.0 forbids written as its Python escape, so a name
    with control characters makes a document that parses and still shows what it held."""
    if _XML_FORBIDDEN.search(text) is None:
        return text
    return _XML_FORBIDDEN.sub(_visible, text)
