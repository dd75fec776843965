"""The layers a reader sees from the folder names hold: no import cycle among our modules. The
layer order itself is import-linter's, run by ``make lint``; a file's size is judged by meaning
(docs/architecture.md), not capped."""

from __future__ import annotations

import pytest

PACKAGES = ("irtrace", "passdiff", "passviz", "tilelang_lsp", "tilelang_mcp")


def import_cycles() -> list[list[str]]:
    """Strongly connected groups of more than one module in the import graph (grimp's)."""
    grimp = pytest.importorskip("grimp")
    graph = grimp.build_graph(*PACKAGES)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []
    for start in sorted(graph.modules):
        if start in index:
            continue
        work = [(start, iter(sorted(graph.find_modules_directly_imported_by(start))))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            module, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.find_modules_directly_imported_by(child)))))
                elif child in on_stack:
                    low[module] = min(low[module], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[module])
            if low[module] == index[module]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == module:
                        break
                if len(group) > 1:
                    cycles.append(sorted(group))
    return cycles


def test_no_import_cycle() -> None:
    assert import_cycles() == []
