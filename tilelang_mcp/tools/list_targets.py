"""``list_targets``: every target TileLang lowers for here."""

from __future__ import annotations

import msgspec

from tilelang_mcp import backend, fields
from tilelang_mcp.answers import Answer
from tilelang_mcp.session import Session

NAME = "list_targets"
DESCRIPTION = "Every target TileLang lowers for here (no GPU needed), with vendor, family, chips and aliases."


class Arguments(fields.Arguments, frozen=True, kw_only=True):
    """``list_targets`` takes no arguments."""


class TargetRow(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One target, as ``irtrace targets`` lists it."""

    name: str
    vendor: str
    family: str
    hardware: str
    """Chips the name stands for, as people know them."""
    dialect: str
    """Which kernel dialect lowers for it."""
    aliases: list[str]


class Result(msgspec.Struct, frozen=True, kw_only=True):
    """Every target."""

    targets: list[TargetRow]


async def handle(context: Session, arguments: Arguments) -> Answer[Result]:
    """Irtrace's target table, as rows."""
    table = backend.target_table()
    summary = ", ".join(row["name"] for row in table)
    return Answer(f"{len(table)} targets: {summary}", Result(targets=msgspec.convert(table, list[TargetRow])))
