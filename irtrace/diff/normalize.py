"""Normalization of IR texts, so that a diff shows what a pass or a config changed and not noise.

Every rule rewrites inside lines only: a normalized text has exactly the lines of its raw text,
so line numbers in a diff of normalized texts are line numbers in the raw IR.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, fields

TARGET_MASK = "T.target(<target>)"
ADDRESS_MASK = "0x<addr>"
METADATA_INDEX_MASK = "<n>"

_TARGET_CALL = "T.target("
# Object addresses as Python and TVM print them (lowercase, 10 to 16 hex digits). Shorter or
# uppercase hex literals in kernel sources (0xFFFFFFFF masks) are constants, not addresses.
_ADDRESS = re.compile(r"\b0x[0-9a-f]{10,16}\b")
# SASS instruction addresses (``/*0a30*/`` before each instruction, as nvdisasm and cuobjdump print
# them): one instruction added early shifts every later one.
_SASS_ADDRESS = re.compile(r"^(\s*)/\*[0-9a-f]{4,}\*/", re.MULTILINE)
SASS_ADDRESS_MASK = "/*<addr>*/"
_METADATA = re.compile(r'(metadata\["[^"\n]*"\]\[)\d+(\])')
# A string literal (kept as is) or an identifier that is not an attribute (``T.copy``'s ``copy``).
_NAME = re.compile(r'("(?:[^"\\\n]|\\.)*")|(?<![.\w])([A-Za-z_]\w*)')
_NUMBER_SUFFIX = re.compile(r"(?:_\d+)+$")


@dataclass(frozen=True)
class NormalizeRules:
    """Which normalizations ``normalize_ir`` applies; each can be switched off."""

    mask_targets: bool = True
    """Replace the ``T.target({...})`` JSON that ``BindTarget`` writes into function attributes."""
    mask_addresses: bool = True
    """Replace object addresses (``0x7f3a5c...``) that change from process to process, and SASS
    instruction addresses (``/*0a30*/``) that shift when an instruction is added before them."""
    mask_metadata: bool = True
    """Replace the index in ``metadata["tl.Layout"][3]`` style references."""
    rename_vars: bool = False
    """Drop TVM's uniquifying ``_N`` suffixes (``i_1`` reads ``i``), so renamings are no change."""
    ignore_whitespace: bool = False
    """Compare lines ignoring all whitespace, as ``diff -w``; the texts are shown as they are."""

    def enabled(self) -> list[str]:
        """Names of the rules that are on, in declaration order."""
        return [f.name for f in fields(self) if getattr(self, f.name)]

    @classmethod
    def none(cls) -> NormalizeRules:
        """Every rule off: diffs of the raw texts."""
        return cls(
            mask_targets=False,
            mask_addresses=False,
            mask_metadata=False,
            rename_vars=False,
            ignore_whitespace=False,
        )

    @property
    def any(self) -> bool:
        return bool(self.enabled())


def normalize_ir(text: str, rules: NormalizeRules = NormalizeRules()) -> str:
    """``text`` with the enabled rules applied; lines are kept one for one."""
    if rules.mask_targets and _TARGET_CALL in text:
        text = mask_targets(text)
    if rules.mask_addresses and "0x" in text:
        text = _ADDRESS.sub(ADDRESS_MASK, text)
    if rules.mask_addresses and "*/" in text:
        text = _SASS_ADDRESS.sub(lambda match: match[1] + SASS_ADDRESS_MASK, text)
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
        end = _json_argument_end(text, start + len(_TARGET_CALL))
        if end < 0:
            end = _closing_paren(text, start + len(_TARGET_CALL))
        if end < 0:  # unbalanced: leave the rest as it is
            break
        pieces.append(text[position:start])
        pieces.append(TARGET_MASK + "\n" * text.count("\n", start, end))
        position = end + 1
    pieces.append(text[position:])
    return "".join(pieces)


_DECODER = json.JSONDecoder()


def _json_argument_end(text: str, position: int) -> int:
    """Index of the ``)`` after a JSON object argument starting at ``position`` (the usual case,
    parsed in C), or -1 to fall back to scanning."""
    if text.startswith("{", position):
        try:
            _, end = _DECODER.raw_decode(text, position)
        except ValueError:
            return -1
        if text.startswith(")", end):
            return end
    return -1


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
    """Drop the ``_N`` suffixes TVM adds to keep names unique: ``i_1`` and ``A_shared_6`` become
    ``i`` and ``A_shared``.

    When a pass adds a buffer or loop variable whose name is taken, TVM's printer calls it
    ``name_1``, ``name_2``... and every later one shifts, so whole stretches of IR differ only in
    these numbers (``C_local_3`` becoming ``C_local_2`` after ``tir.StorageRewrite`` drops a
    declaration). Numbering them in order of appearance would not undo that, since the
    declarations themselves come and go; the suffix is dropped instead. Two variables of one base
    name then read the same: that is the price. String literals (``"sm_90"``) and attribute names
    after a dot (``T.float16``) are left alone.
    """
    return _NAME.sub(_strip_suffix, text)


def _strip_suffix(match: re.Match[str]) -> str:
    if match.group(1) is not None:
        return match.group(1)
    name = match.group(2)
    return _NUMBER_SUFFIX.sub("", name) or name
