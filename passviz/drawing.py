"""The pipeline as a Graphviz graph: passes in order, nesting as clusters, one lane per run.

The graph is built with the ``graphviz`` package and rendered by Graphviz's ``dot`` program.
Every label and tooltip taken from a trace goes through ``graphviz.escape``: a kernel named
``<b>x</b>`` or ending in a backslash stays text, not an HTML-like label or a broken quote.
Aligned passes (same name and occurrence, through passdiff) share a rank across lanes, so the
place where two backends part ways shows as passes that only one lane has.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import graphviz

from irtrace.trace import KernelRun, PassRecord, Trace
from passviz.errors import GraphvizMissingError, RenderError
from passviz.model import PassEntry, format_ms, pass_entries

FORMATS = ("svg", "png", "dot")
SCOPE_LABELS = {"host": "host code", "device": "device code"}
SCOPE_COLORS = {"host": "#7f7f7f", "device": "#1f77b4"}
ONLY_HERE_COLOR = "#9467bd"
"""Border of passes that the first lane does not have (or that only the first lane has)."""
FAILED_COLOR = "#d62728"
HOT_COLOR = (0xF2, 0x8E, 0x2B)


@dataclass(frozen=True)
class Lane:
    """One run drawn as a column of the graph."""

    number: int
    run: KernelRun
    label: str


def node_id(lane: int, index: int) -> str:
    """The graph node of pass ``index`` in lane ``lane``."""
    return f"l{lane}_p{index}"


def fold_id(lane: int, index: int) -> str:
    """The node standing for folded unchanged passes starting at ``index``."""
    return f"l{lane}_f{index}"


def pipeline_graph(trace: Trace, runs: Sequence[KernelRun], *, fold: bool = False) -> graphviz.Digraph:
    """One lane per run; with ``fold``, runs of two or more unchanged passes become one node."""
    graph = graphviz.Digraph("pipeline")
    graph.attr(rankdir="TB", newrank="true", nodesep="0.25", ranksep="0.18", fontname="Helvetica")
    graph.attr("node", shape="box", style="rounded,filled", fontname="Helvetica", fontsize="10", height="0.3")
    graph.attr("edge", arrowsize="0.5", color="#999999")
    several_kernels = len({run.kernel for run in runs}) > 1
    lanes = [
        Lane(n, run, f"{run.kernel} @ {run.target}" if several_kernels else run.target)
        for n, run in enumerate(runs)
    ]
    only_here = _lane_specific(lanes)
    shown: dict[tuple[int, int], str] = {}
    for lane in lanes:
        shown.update(_draw_lane(graph, trace, lane, fold, only_here))
    _align(graph, lanes, shown)
    return graph


def _lane_specific(lanes: Sequence[Lane]) -> set[tuple[int, int]]:
    """(lane, pass index) of passes the first lane lacks, and the first lane's passes no lane shares."""
    from passdiff import align_passes

    if len(lanes) < 2:
        return set()
    specific: set[tuple[int, int]] = set()
    shared_with_any: set[int] = set()
    for lane in lanes[1:]:
        shared_here = set()
        for alignment in align_passes(lanes[0].run, lane.run):
            if alignment.status == "shared" and alignment.a is not None:
                shared_here.add(alignment.a.index)
            elif alignment.b is not None and (alignment.a is None or alignment.status == "moved"):
                specific.add((lane.number, alignment.b.index))
        shared_with_any |= shared_here
    specific |= {(0, p.index) for p in lanes[0].run.passes if p.index not in shared_with_any}
    return specific


def _fold_groups(entries: Sequence[PassEntry]) -> list[list[PassEntry]]:
    """Consecutive leaf passes that changed nothing, with the same parent and scope, grouped."""
    parents = {e.record.parent for e in entries if e.record.parent is not None}
    groups: list[list[PassEntry]] = []
    for entry in entries:
        record = entry.record
        foldable = not record.changed and not record.failed and record.index not in parents
        last = groups[-1] if groups else None
        if (
            foldable
            and last
            and last[0].record.index not in parents
            and _foldable(last[-1].record)
            and last[-1].record.parent == record.parent
            and last[-1].record.scope == record.scope
        ):
            last.append(entry)
        else:
            groups.append([entry])
    return groups


def _foldable(record: PassRecord) -> bool:
    return not record.changed and not record.failed


def _draw_lane(
    graph: graphviz.Digraph, trace: Trace, lane: Lane, fold: bool, only_here: set[tuple[int, int]]
) -> dict[tuple[int, int], str]:
    """Draws a lane; returns (lane, pass index) -> node id for passes drawn as their own node."""
    entries = pass_entries(lane.run)
    groups = _fold_groups(entries) if fold else [[e] for e in entries]
    hottest = max((e.share for e in entries), default=0.0) or 1.0
    children: dict[int | None, list[list[PassEntry]]] = {}
    for group in groups:
        children.setdefault(group[0].record.parent, []).append(group)
    nodes: dict[tuple[int, int], str] = {}
    group_node: dict[int, str] = {}

    def add_group(container: graphviz.Digraph, group: list[PassEntry]) -> None:
        first = group[0]
        if len(group) > 1:
            name = fold_id(lane.number, first.index)
            names = ", ".join(e.label for e in group[:3]) + (", …" if len(group) > 3 else "")
            container.node(
                name,
                graphviz.escape(f"{len(group)} unchanged passes\n{names}"),
                shape="note",
                style="filled",
                fillcolor="#f4f4f4",
                fontcolor="#777777",
                fontsize="8",
                tooltip=graphviz.escape("\n".join(e.label for e in group)),
            )
        else:
            name = node_id(lane.number, first.index)
            container.node(
                name, **_node_attrs(trace, first, hottest, (lane.number, first.index) in only_here)
            )
            nodes[(lane.number, first.index)] = name
        for entry in group:
            group_node[entry.index] = name

    def add_children(container: graphviz.Digraph, parent: int | None, scope_filter: str | None) -> None:
        for group in children.get(parent, []):
            record = group[0].record
            if scope_filter is not None and record.scope != scope_filter:
                continue
            if record.index in children:
                with container.subgraph(name=f"cluster_l{lane.number}_n{record.index}") as nested:
                    nested.attr(
                        label=graphviz.escape(f"{group[0].label} (nested)"),
                        style="dashed",
                        color="#bbbbbb",
                        fontsize="9",
                    )
                    add_group(nested, group)
                    add_children(nested, record.index, None)
            else:
                add_group(container, group)

    with graph.subgraph(name=f"cluster_lane{lane.number}") as lane_graph:
        status = "" if lane.run.status == "ok" else f" ({lane.run.status})"
        lane_graph.attr(
            label=graphviz.escape(f"{lane.label}{status}"), style="rounded", color="#444444", fontsize="12"
        )
        add_children(lane_graph, None, "module")
        for scope in ("host", "device"):
            if any(g[0].record.scope == scope and g[0].record.parent is None for g in groups):
                with lane_graph.subgraph(name=f"cluster_l{lane.number}_{scope}") as scoped:
                    scoped.attr(
                        label=SCOPE_LABELS[scope],
                        style="rounded,dashed",
                        color=SCOPE_COLORS[scope],
                        fontsize="10",
                    )
                    add_children(scoped, None, scope)
    _chain(graph, lane, group_node)
    return nodes


def _chain(graph: graphviz.Digraph, lane: Lane, group_node: dict[int, str]) -> None:
    """Edges in pass order; after the split, host and device passes each follow the last module pass."""
    last: dict[str, str] = {}
    for record in lane.run.passes:
        name = group_node[record.index]
        previous = last.get(record.scope) or last.get("module")
        if previous is not None and previous != name:
            graph.edge(previous, name)
        last[record.scope] = name


def _node_attrs(trace: Trace, entry: PassEntry, hottest: float, lane_specific: bool) -> dict[str, str]:
    record = entry.record
    added, removed = trace.line_changes(record)
    if record.failed:
        detail = "FAILED"
    elif record.changed:
        detail = f"+{added} -{removed}"
    else:
        detail = "unchanged"
    heat = entry.share / hottest
    fill = "#{:02x}{:02x}{:02x}".format(*(round(255 + (c - 255) * heat) for c in HOT_COLOR))
    attrs = {
        "label": graphviz.escape(f"{entry.label}\n{detail} · {format_ms(record.self_s)}"),
        "fillcolor": fill,
        "tooltip": graphviz.escape(
            f"{entry.label}: {record.phase}, {record.scope}, {format_ms(record.self_s)} self"
            + (f"\n{record.error}" if record.error else "")
        ),
    }
    if not record.changed and not record.failed:
        attrs["fontcolor"] = "#777777"
    if record.scope in SCOPE_COLORS:
        attrs["color"] = SCOPE_COLORS[record.scope]
    if lane_specific:
        attrs.update(color=ONLY_HERE_COLOR, penwidth="2.5")
    if record.failed:
        attrs.update(color=FAILED_COLOR, fillcolor="#f9d6d6", penwidth="2.5", fontcolor=FAILED_COLOR)
    return attrs


def _align(graph: graphviz.Digraph, lanes: Sequence[Lane], shown: dict[tuple[int, int], str]) -> None:
    """Puts each pass of the first lane on one rank with its aligned passes in the other lanes."""
    from passdiff import align_passes

    if len(lanes) < 2:
        return
    ranks: dict[int, list[str]] = {}
    for lane in lanes[1:]:
        for alignment in align_passes(lanes[0].run, lane.run):
            if alignment.status != "shared" or alignment.a is None or alignment.b is None:
                continue
            mine = shown.get((lane.number, alignment.b.index))
            reference = shown.get((0, alignment.a.index))
            if mine and reference:
                ranks.setdefault(alignment.a.index, [reference]).append(mine)
    for index, names in ranks.items():
        with graph.subgraph(name=f"rank_{index}") as same:
            same.attr(rank="same")
            for name in names:
                same.node(name)


def render(graph: graphviz.Digraph, output: str | os.PathLike[str]) -> Path:
    """Writes the graph as .dot source, or renders it to .svg/.png with Graphviz's ``dot``."""
    path = Path(output)
    fmt = path.suffix.lstrip(".").lower()
    if fmt not in FORMATS:
        from irtrace.errors import UsageError

        raise UsageError(f"cannot draw to {str(path)!r}: give a file ending in .svg, .png or .dot")
    if fmt == "dot":
        path.write_text(graph.source, encoding="utf-8")
        return path
    path.write_bytes(pipe(graph, fmt))
    return path


def pipe(graph: graphviz.Digraph, fmt: str) -> bytes:
    """The graph rendered by ``dot`` to ``fmt`` (svg, png, json...)."""
    try:
        rendered: bytes = graph.pipe(format=fmt)  # the graphviz package has no type hints
    except graphviz.ExecutableNotFound:
        raise GraphvizMissingError(
            "Graphviz's `dot` program is not installed, so the drawing cannot be rendered; "
            "install Graphviz (apt-get install graphviz, brew install graphviz, or `make setup`), "
            "or write a .dot file instead"
        ) from None
    except graphviz.CalledProcessError as error:
        stderr = (error.stderr or b"").decode(errors="replace").strip().splitlines()
        raise RenderError(
            f"Graphviz failed to render the drawing: {stderr[-1] if stderr else error}"
        ) from None
    return rendered
