"""The pipeline as a Graphviz graph: passes in order, nesting as clusters, one lane per run.

The graph is built with the ``graphviz`` package and rendered by Graphviz's ``dot`` program.
Every label and tooltip taken from a trace goes through ``graphviz.escape``: a kernel named
``<b>x</b>`` or ending in a backslash stays text, not an HTML-like label or a broken quote.
Aligned passes (same name and occurrence, through passdiff) share a rank across lanes, so the
place where two backends part ways shows as passes that only one lane has.
"""

from __future__ import annotations

import os
import textwrap
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import graphviz

from irtrace.base.errors import UsageError
from irtrace.base.output import output_target, write_atomically
from irtrace.trace.model import KernelRun, PassRecord, Trace
from irtrace.trace.summary import NEW_STAGE, is_new_stage
from passviz.errors import GraphvizMissingError, RenderError
from passviz.model import LineCounts, PassEntry, format_ms, line_counts, pass_entries

PassLink = Callable[[KernelRun, PassRecord], str | None]
"""The URL a pass's node links to (the report: its diff), or ``None`` for no link."""

FORMATS = ("svg", "png", "dot")
SCOPE_LABELS = {"host": "host code", "device": "device code"}
SCOPE_COLORS = {"host": "#7f7f7f", "device": "#1f77b4"}
ONLY_HERE_COLOR = "#9467bd"
"""Border of passes that the first lane does not have (or that only the first lane has)."""
FAILED_COLOR = "#d62728"
FAILED_FILL = "#f9d6d6"
HOT_COLOR = (0xF2, 0x8E, 0x2B)
LEGEND_ID = "cluster_legend"


@dataclass(frozen=True)
class Lane:
    """One run drawn as a column of the graph."""

    number: int
    run: KernelRun
    label: str


def node_id(lane: int, index: int) -> str:
    """The graph node of pass ``index`` in lane ``lane``."""
    return f"l{lane}_p{index}"


def failed_id(lane: int) -> str:
    """The one node of a lane whose run failed before its first pass."""
    return f"l{lane}_failed"


def fold_id(lane: int, index: int) -> str:
    """The node standing for folded unchanged passes starting at ``index``."""
    return f"l{lane}_f{index}"


def pipeline_graph(
    trace: Trace,
    runs: Sequence[KernelRun],
    *,
    fold: bool = False,
    links: PassLink | None = None,
    legend: bool = True,
) -> graphviz.Digraph:
    """One lane per run; with ``fold``, runs of two or more unchanged passes become one node.

    ``links`` gives each pass node a link (the report links them to the pass's diff); ``legend``
    adds a cluster explaining the colours.
    """
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
        if lane.run.passes:
            shown.update(_draw_lane(graph, trace, lane, fold, only_here, links))
        else:
            _draw_failed_lane(graph, lane)
    _align(graph, lanes, shown)
    if legend:
        _legend(graph, fold)
    return graph


def drawable(runs: Sequence[KernelRun]) -> bool:
    """Whether any of ``runs`` has a pass to draw (a run that failed building its kernel has none)."""
    return any(run.passes for run in runs)


def _draw_failed_lane(graph: graphviz.Digraph, lane: Lane) -> None:
    """A run without passes: one red node saying why."""
    error = (lane.run.error or "no error recorded").strip().splitlines()
    first = error[0] if error else ""
    wrapped = "\n".join(textwrap.wrap(first, 60, max_lines=4, placeholder=" …"))
    with graph.subgraph(name=f"cluster_lane{lane.number}") as lane_graph:
        lane_graph.attr(
            label=f"{lane.label} ({lane.run.status})", style="rounded", color="#444444", fontsize="12"
        )
        lane_graph.node(
            failed_id(lane.number),
            f"{lane.run.status.upper()} before its first pass\n{wrapped}",
            color=FAILED_COLOR,
            fillcolor=FAILED_FILL,
            fontcolor=FAILED_COLOR,
            penwidth="2.5",
            tooltip=lane.run.error or "",
        )


def _legend(graph: graphviz.Digraph, fold: bool) -> None:
    """A cluster of sample nodes, one per colour the drawing uses."""
    samples = [
        ("changed", "changed the IR\n+added -removed · self time", {"fillcolor": "#f9c99b"}),
        ("hot", "more of the run's time:\ndeeper orange", {"fillcolor": "#f28e2b"}),
        ("unchanged", "changed nothing", {"fillcolor": "#ffffff", "fontcolor": "#777777"}),
        (
            "failed",
            "FAILED",
            {"color": FAILED_COLOR, "fillcolor": FAILED_FILL, "fontcolor": FAILED_COLOR, "penwidth": "2.5"},
        ),
        (
            "only",
            "only this lane runs it",
            {"fillcolor": "#ffffff", "color": ONLY_HERE_COLOR, "penwidth": "2.5"},
        ),
        (
            "device",
            "device code (after the split)",
            {"fillcolor": "#ffffff", "color": SCOPE_COLORS["device"]},
        ),
        ("host", "host code", {"fillcolor": "#ffffff", "color": SCOPE_COLORS["host"]}),
    ]
    if fold:
        samples.append(
            (
                "fold",
                "N unchanged passes, folded",
                {"shape": "note", "style": "filled", "fillcolor": "#f4f4f4", "fontcolor": "#777777"},
            )
        )
    with graph.subgraph(name=LEGEND_ID) as legend:
        legend.attr(label="legend", style="rounded,dashed", color="#999999", fontsize="10")
        previous = None
        for key, label, attrs in samples:
            name = f"legend_{key}"
            legend.node(name, label, fontsize="9", **attrs)
            if previous is not None:
                legend.edge(previous, name, style="invis")
            previous = name


def _lane_specific(lanes: Sequence[Lane]) -> set[tuple[int, int]]:
    """(lane, pass index) of passes the first lane lacks, and the first lane's passes no lane shares."""
    from irtrace.diff import align_passes

    if len(lanes) < 2:
        return set()
    specific: set[tuple[int, int]] = set()
    shared_with_any: set[int] = set()
    for lane in lanes[1:]:
        shared_here = set()
        for alignment in align_passes(lanes[0].run, lane.run):
            if alignment.status in ("shared", "not_reached") and alignment.a is not None:
                # A pass the other lane never reached (it failed before) is not specific to this one.
                shared_here.add(alignment.a.index)
            elif alignment.status == "not_reached":
                continue
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
    graph: graphviz.Digraph,
    trace: Trace,
    lane: Lane,
    fold: bool,
    only_here: set[tuple[int, int]],
    links: PassLink | None,
) -> dict[tuple[int, int], str]:
    """Draws a lane; returns (lane, pass index) -> node id for passes drawn as their own node."""
    entries = pass_entries(lane.run)
    counts = line_counts(trace, lane.run)
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
            attrs = _node_attrs(first, counts, hottest, (lane.number, first.index) in only_here)
            link = links(lane.run, first.record) if links is not None else None
            if link:
                attrs.update(href=link, target="_top")
            container.node(name, **attrs)
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


def _node_attrs(entry: PassEntry, counts: LineCounts, hottest: float, lane_specific: bool) -> dict[str, str]:
    record = entry.record
    added, removed = counts.get(record.index) or (0, 0)
    if record.failed:
        detail = "FAILED"
    elif is_new_stage(record):
        detail = NEW_STAGE
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
        attrs.update(color=FAILED_COLOR, fillcolor=FAILED_FILL, penwidth="2.5", fontcolor=FAILED_COLOR)
    return attrs


def _align(graph: graphviz.Digraph, lanes: Sequence[Lane], shown: dict[tuple[int, int], str]) -> None:
    """Puts each pass of the first lane on one rank with its aligned passes in the other lanes."""
    from irtrace.diff import align_passes

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
        raise UsageError(f"cannot draw to {str(path)!r}: give a file ending in .svg, .png or .dot")
    output_target(path)  # a folder, pipe or device is refused before Graphviz runs
    # Through NAME.partial: a full disk or a kill leaves the old drawing, never a truncated one.
    write_atomically(path, graph.source if fmt == "dot" else pipe(graph, fmt))
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
