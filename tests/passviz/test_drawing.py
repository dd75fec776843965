"""Pipeline drawings: built from real traces, checked by the layout Graphviz's ``dot`` computes."""

from __future__ import annotations

import json
import shutil

import pytest

from irtrace.trace import Trace
from passviz.drawing import fold_id, node_id, pipe, pipeline_graph, render

pytestmark = pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's dot is not installed")


def laid_out(graph) -> dict:
    """The graph as laid out by ``dot -Tjson``: clusters, nodes with positions, edges."""
    return json.loads(pipe(graph, "json"))


def clusters(layout: dict) -> dict[str, dict]:
    return {o["name"]: o for o in layout["objects"] if o["name"].startswith("cluster")}


def nodes(layout: dict) -> dict[str, dict]:
    return {o["name"]: o for o in layout["objects"] if "pos" in o and not o["name"].startswith("cluster")}


def test_one_lane_per_target_with_every_pass_a_node(three_target_trace: Trace) -> None:
    trace = three_target_trace
    layout = laid_out(pipeline_graph(trace, trace.runs))
    lanes = {name: c["label"] for name, c in clusters(layout).items() if name.startswith("cluster_lane")}
    assert lanes == {
        f"cluster_lane{n}": run.target + ("" if run.status == "ok" else f" ({run.status})")
        for n, run in enumerate(trace.runs)
    }
    drawn = nodes(layout)
    for lane, run in enumerate(trace.runs):
        assert {node_id(lane, p.index) for p in run.passes} <= set(drawn)
        labels = [drawn[node_id(lane, p.index)]["label"] for p in run.passes]
        assert all(label.startswith(p.name) for label, p in zip(labels, run.passes, strict=True))
    # Passes are chained in order: each lane has one edge fewer than passes, plus the host/device fork.
    assert len(layout["edges"]) >= sum(len(run.passes) - 1 for run in trace.runs)


def test_nested_passes_and_the_host_device_split_are_clusters(three_target_trace: Trace) -> None:
    trace = three_target_trace
    cuda = trace.runs[0]
    layout = laid_out(pipeline_graph(trace, [cuda]))
    found = clusters(layout)
    lower_tile_op = cuda.find_pass("tl.LowerTileOp")
    nested = found[f"cluster_l0_n{lower_tile_op.index}"]
    inner = {p.index for p in cuda.passes if p.parent == lower_tile_op.index}
    assert inner and {node_id(0, i) for i in inner} <= {layout["objects"][n]["name"] for n in nested["nodes"]}
    device = found["cluster_l0_device"]
    device_nodes = {layout["objects"][n]["name"] for n in device["nodes"]}
    assert {node_id(0, p.index) for p in cuda.passes if p.scope == "device"} == device_nodes
    assert "cluster_l0_host" in found


def test_shared_passes_line_up_across_lanes(three_target_trace: Trace) -> None:
    trace = three_target_trace
    cuda, hip = trace.runs[0], trace.runs[1]
    layout = laid_out(pipeline_graph(trace, [cuda, hip]))
    drawn = nodes(layout)

    def y(lane: int, name: str, run) -> float:
        return float(drawn[node_id(lane, run.find_pass(name).index)]["pos"].split(",")[1])

    for name in ("tl.LayoutInference", "tl.LowerTileOp", "tl.MakePackedAPI", "codegen"):
        assert y(0, name, cuda) == y(1, name, hip), name
    # CUDA-only passes are drawn in the lane-specific colour.
    hopper = drawn[node_id(0, cuda.find_pass("tl.LowerHopperIntrin").index)]
    assert hopper["color"] == "#9467bd"


def test_fold_merges_unchanged_passes_but_keeps_changed_and_failed_ones(three_target_trace: Trace) -> None:
    trace = three_target_trace
    layout = laid_out(pipeline_graph(trace, trace.runs, fold=True))
    drawn = nodes(layout)
    for lane, run in enumerate(trace.runs):
        kept = {node_id(lane, p.index) for p in run.passes if p.changed or p.failed}
        assert kept <= set(drawn)
        unchanged = [p for p in run.passes if not p.changed and not p.failed and p.parent is None]
        assert not {node_id(lane, p.index) for p in unchanged} <= set(drawn)
    first_three = trace.runs[0].passes[:3]  # three checkers, none changes the IR
    assert not any(p.changed for p in first_three)
    assert drawn[fold_id(0, 0)]["label"].startswith("3 unchanged passes")
    assert len(drawn) < sum(len(run.passes) for run in trace.runs)


def test_failed_pass_is_drawn_red(three_target_trace: Trace) -> None:
    trace = three_target_trace
    lane = next(n for n, run in enumerate(trace.runs) if run.status == "failed")
    failed = next(p for p in trace.runs[lane].passes if p.failed)
    drawn = nodes(laid_out(pipeline_graph(trace, trace.runs)))
    node = drawn[node_id(lane, failed.index)]
    assert "FAILED" in node["label"] and node["color"] == "#d62728"


def test_render_svg_png_and_dot(three_target_trace: Trace, tmp_path) -> None:
    graph = pipeline_graph(three_target_trace, three_target_trace.runs, fold=True)
    svg = render(graph, tmp_path / "p.svg").read_text()
    assert svg.lstrip().startswith("<?xml") and "<svg" in svg and "cuda:sm_90" in svg
    assert render(graph, tmp_path / "p.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    source = render(graph, tmp_path / "p.dot").read_text()
    assert source.startswith("digraph pipeline") and "cluster_lane2" in source
