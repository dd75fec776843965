"""Normalization of IR texts, so that a diff shows what a pass or a config changed and not noise.

Every rule rewrites inside lines only: a normalized text has exactly the lines of its raw text,
so line numbers in a diff of normalized texts are line numbers in the raw IR.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, fields

TARGET_MASK = "T.target(<target>)"
ADDRESS_MASK = "0x<addr>"
METADATA_INDEX_MASK = "<n>"

_TARGET_CALL = "T.target("
# Object addresses as Python and TVM print them (lowercase, 10 to 16 hex digits). Shorter or
# uppercase hex literals in kernel sources (0xFFFFFFFF masks) are constants, not addresses.
_ADDRESS = re.compile(r"\b0x[0-9a-f]{10,16}\b")
_METADATA = re.compile(r'(metadata\["[^"\n]*"\]\[)\d+(\])')
# A string literal (kept as is) or a numbered identifier ``base_N`` (renamed).
_NUMBERED = re.compile(r'("(?:[^"\\\n]|\\.)*")|\b([A-Za-z_]\w*?)_(\d+)\b')


@dataclass(frozen=True)
class NormalizeRules:
    """Which normalizations ``normalize_ir`` applies; each can be switched off."""

    mask_targets: bool = True
    """Replace the ``T.target({...})`` JSON that ``BindTarget`` writes into function attributes."""
    mask_addresses: bool = True
    """Replace object addresses (``0x7f3a5c...``) that change from process to process."""
    mask_metadata: bool = True
    """Replace the index in ``metadata["tl.Layout"][3]`` style references."""
    rename_vars: bool = False
    """Renumber ``x_1``, ``x_2``... in order of first appearance, so a pure renaming is no change."""

    def enabled(self) -> list[str]:
        """Names of the rules that are on, in declaration order."""
        return [f.name for f in fields(self) if getattr(self, f.name)]

    @classmethod
    def none(cls) -> NormalizeRules:
        """Every rule off: diffs of the raw texts."""
        return cls(mask_targets=False, mask_addresses=False, mask_metadata=False, rename_vars=False)

    @property
    def any(self) -> bool:
        return bool(self.enabled())


def normalize_ir(text: str, rules: NormalizeRules = NormalizeRules()) -> str:
    """``text`` with the enabled rules applied; lines are kept one for one."""
    if rules.mask_targets and _TARGET_CALL in text:
        text = mask_targets(text)
    if rules.mask_addresses and "0x" in text:
        text = _ADDRESS.sub(ADDRESS_MASK, text)
    if rules.mask_metadata and "metadata[" in text:
        text = _METADATA.sub(rf"\g<1>{METADATA_INDEX_MASK}\g<2>", text)
    if rules.rename_vars:
        text = rename_numbered_vars(text)
    return text


def mask_targets(text: str) -> str:
    """Replace the argument of every ``T.target(...)`` call (balanced, strings respected)."""
    pieces: list[str] = []
    position = 0
    while True:
        start = text.find(_TARGET_CALL, position)
        if start < 0:
            break
        end = _closing_paren(text, start + len(_TARGET_CALL))
        if end < 0:  # unbalanced: leave the rest as it is
            break
        pieces.append(text[position:start])
        pieces.append(TARGET_MASK + "\n" * text.count("\n", start, end))
        position = end + 1
    pieces.append(text[position:])
    return "".join(pieces)


def _closing_paren(text: str, position: int) -> int:
    """Index of the ``)`` closing a call whose arguments start at ``position``, or -1."""
    depth = 0
    in_string = False
    length = len(text)
    while position < length:
        char = text[position]
        if in_string:
            if char == "\\":
                position += 1
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "([{":
            depth += 1
        elif char in "}]":
            depth -= 1
        elif char == ")":
            if depth == 0:
                return position
            depth -= 1
        position += 1
    return -1


def rename_numbered_vars(text: str) -> str:
    """Renumber ``base_N`` identifiers per base in order of first appearance.

    The mapping is a bijection per base, so two texts that differ only by a consistent
    renumbering normalize to the same text. String literals (``"sm_90"``) are left alone.
    """
    numbering: dict[str, dict[str, int]] = {}

    def renumber(match: re.Match[str]) -> str:
        if match.group(1) is not None:
            return match.group(1)
        base, number = match.group(2), match.group(3)
        seen = numbering.setdefault(base, {})
        new = seen.setdefault(number, len(seen) + 1)
        return f"{base}_{new}"

    replace: Callable[[re.Match[str]], str] = renumber
    return _NUMBERED.sub(replace, text)
