"""docs/passviz.md's key table lists exactly the keys the browser binds, with their help text."""

from __future__ import annotations

import re
from pathlib import Path

from textual.binding import Binding

from passviz.app import KEY_NAMES, PassvizApp, key_help

DOCS = Path(__file__).resolve().parents[2] / "docs" / "passviz.md"


def documented_keys() -> list[tuple[list[str], str]]:
    """(keys, text) per row of the table under ``### Keys``; ``n`` / ``N`` rows give two keys."""
    section = DOCS.read_text(encoding="utf-8").split("### Keys", 1)[1]
    rows = []
    for line in section.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if not line.startswith("|") or cells[0] in ("key", "---"):
            if rows and not line.startswith("|"):
                break
            continue
        keys = re.findall(r"`([^`]+)`", cells[0])
        rows.append((keys, cells[1]))
    return rows


def test_docs_key_table_matches_the_bindings() -> None:
    rows = documented_keys()
    (moves, move_text), *key_rows = rows
    assert (moves[0], move_text) == key_help()[0]  # arrows and paging come from the table widget

    bound = [KEY_NAMES.get(b.key, b.key) for b in PassvizApp.BINDINGS if isinstance(b, Binding)]
    documented = [key for keys, _ in key_rows for key in keys]
    assert sorted(documented) == sorted(bound) and len(set(documented)) == len(documented)

    help_text = dict(key_help())
    for keys, text in key_rows:
        text = text.replace("`", "")
        if len(keys) == 2:  # a pair ("n / N") shares one row: "next / previous ..."
            forward, backward = keys
            assert text.replace("next / previous", "next") == help_text[forward], forward
            assert text.replace("next / previous", "previous") == help_text[backward], backward
        else:
            assert text == help_text[keys[0]], keys[0]
