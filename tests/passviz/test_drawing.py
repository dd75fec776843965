"""Pipeline drawings: built from real traces, checked by the layout Graphviz's ``dot`` computes."""

from __future__ import annotations

import itertools
import json
import shutil

import pytest

from irtrace.trace.model import Trace
from passviz.drawing import drawable, failed_id, fold_id, node_id, pipe, pipeline_graph, render

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


def test_a_run_whose_factory_raised_is_a_failed_lane(factory_failure_trace: Trace) -> None:
    failed, ok = factory_failure_trace.runs
    assert not failed.passes and failed.error
    layout = laid_out(pipeline_graph(factory_failure_trace, [failed]))
    node = nodes(layout)[failed_id(0)]
    assert node["color"] == "#d62728" and "before its first pass" in node["label"]
    assert "threads must be a power of two" in node["label"].replace("\n", " ")
    assert clusters(layout)["cluster_lane0"]["label"] == "cuda:sm_90 (failed)"
    assert not drawable([failed]) and drawable([failed, ok])


def test_the_legend_names_every_colour(three_target_trace: Trace) -> None:
    layout = laid_out(pipeline_graph(three_target_trace, three_target_trace.runs, fold=True))
    legend = clusters(layout)["cluster_legend"]
    names = {layout["objects"][n]["name"] for n in legend["nodes"]}
    assert {"legend_changed", "legend_unchanged", "legend_failed", "legend_only", "legend_device"} <= names
    drawn = nodes(layout)
    assert drawn["legend_failed"]["color"] == "#d62728" and drawn["legend_only"]["color"] == "#9467bd"
    assert "cluster_legend" not in clusters(
        laid_out(pipeline_graph(three_target_trace, three_target_trace.runs, legend=False))
    )


def test_node_counts_are_the_diff_s_counts(three_target_trace: Trace) -> None:
    from irtrace.diff import diff_texts

    run = three_target_trace.runs[0]
    drawn = nodes(laid_out(pipeline_graph(three_target_trace, [run])))
    for name in ("tl.PlanAndUpdateBufferAllocationLocation", "tl.LayoutInference"):
        record = run.find_pass(name)
        diff = diff_texts(three_target_trace.ir_before(record), three_target_trace.ir_after(record))
        assert f"+{diff.added} -{diff.removed}" in drawn[node_id(0, record.index)]["label"], name


def test_lanes_of_two_configs_line_up_at_the_same_pipeline_point(
    three_target_trace: Trace, no_ws_trace: Trace, tmp_path
) -> None:
    from irtrace.trace.writer import merge_traces

    assert three_target_trace.path and no_ws_trace.path
    merged = merge_traces([three_target_trace.path, no_ws_trace.path], tmp_path / "both.jsonl")
    ws = next(r for r in merged.runs if r.target == "cuda:sm_90" and not r.pass_configs)
    no_ws = next(r for r in merged.runs if r.pass_configs.get("tl.disable_warp_specialized"))
    drawn = nodes(laid_out(pipeline_graph(merged, [ws, no_ws])))

    def top_level_after(run, previous):  # type: ignore[no-untyped-def]
        top = [p for p in run.passes if p.parent is None]
        return next(p for a, p in itertools.pairwise(top) if p.name == "tl.Simplify" and a.name == previous)

    here, there = top_level_after(ws, "tl.LowerAccessPtr"), top_level_after(no_ws, "tl.LowerAccessPtr")
    y_here = drawn[node_id(0, here.index)]["pos"].split(",")[1]
    y_there = drawn[node_id(1, there.index)]["pos"].split(",")[1]
    assert y_here == y_there


def test_dot_draws_one_file_per_kernel_and_exits_5_when_nothing_can_be_drawn(
    factory_failure_trace: Trace, tmp_path, capsys
) -> None:
    from irtrace.base.errors import ExitCode
    from passviz.cli import main

    assert factory_failure_trace.path
    out = tmp_path / "all.svg"
    assert main(["dot", factory_failure_trace.path, "-o", str(out)]) == ExitCode.LOWERING
    assert sorted(p.name for p in tmp_path.iterdir()) == ["all.matmul.svg", "all.rms_norm.svg"]
    assert "threads must be a power of two" in (tmp_path / "all.rms_norm.svg").read_text()
    capsys.readouterr()
    only = tmp_path / "rms.png"
    assert main(["dot", factory_failure_trace.path, "-k", "rms_norm", "-o", str(only)]) == 5
    assert only.stat().st_size > 2000  # a lane with the failure, not a blank image
    err = capsys.readouterr().err
    assert err.startswith("passviz: error: no pass to draw") and "threads must be a power of two" in err
    assert main(["dot", factory_failure_trace.path, "-k", "matmul", "-o", str(tmp_path / "m.svg")]) == 0
