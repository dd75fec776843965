"""The trace's layout records against TileLang's own objects, read by another route.

A plain TVM instrument in the same lowering reads every block's ``layout_map`` on the spot after
each pass (ORACLES.md): TileLang's class, shapes, thread size, replication, thread range and text,
and, for sampled elements, ``Layout.map_forward_index`` / ``Fragment.map_forward_thread``. The
trace's records, and ``irtrace.facts.layout_eval`` on their text, must say the same. A module
lowered untraced in another process gives the same layout texts.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
from dataclasses import dataclass, field
from itertools import product
from pathlib import Path
from typing import Any

import pytest

from irtrace.facts.layout_eval import elements, forward_index, forward_thread
from irtrace.facts.layout_view import gather
from irtrace.trace.model import Trace
from irtrace.trace.reader import load_trace
from irtrace.trace.schema import BufferLayout, KernelRun
from irtrace.trace.writer import TraceWriter
from tests.conftest import DATA, EXAMPLES, ROOT

TARGETS = ("cuda:sm_90", "cuda:sm_80", "hip:gfx942", "metal")
KERNELS = {
    "gemm": (f"{EXAMPLES / 'gemm.py'}::matmul(256, 256, 256)", TARGETS),
    "flash_attention": (f"{EXAMPLES / 'flash_attention.py'}::flash_attention_fwd()", TARGETS),
    "row_reduce": (f"{DATA / 'row_reduce.py'}::row_reduce()", TARGETS),
    # a reduction whose layouts tl.LowerTileOp changes again (a second record); Metal has no tl.reduce
    "fp8_quant": (
        f"{EXAMPLES / 'fp8_quant.py'}::per_token_quant(1 << 10, HIDDEN, out_dtype=determine_fp8_type())",
        ("cuda:sm_90", "hip:gfx942"),
    ),
}
SAMPLES = 24
"""Elements per buffer whose index and thread are checked (every replica of each)."""


@dataclass
class BufferTruth:
    """One buffer's layout as TileLang's objects give it."""

    name: str
    scope: str
    kind: str
    input_shape: list[int]
    output_shape: list[int]
    text: str
    threads: int | None = None
    replicate: int | None = None
    thread_range: tuple[int, int] | None = None
    samples: list[tuple[tuple[int, ...], int, tuple[int, ...], int | None]] = field(default_factory=list)
    """``(coords, replica, index, thread)``"""


@dataclass
class Truth:
    """What the instrument saw in one lowering."""

    after_layout_pass: list[BufferTruth] | None = None
    texts_after: dict[int, tuple[str, dict[str, str]]] = field(default_factory=dict)
    """pass index (`run_before_pass` order) -> (pass name, buffer -> layout text), from the layout pass"""


def _layout_map(mod: Any) -> list[tuple[Any, Any]]:
    from tvm.tirx.stmt_functor import post_order_visit

    found: list[tuple[Any, Any]] = []

    def visit(node: Any) -> None:
        annotations = getattr(node, "annotations", None)
        if annotations is not None and "layout_map" in annotations:
            found.extend(annotations["layout_map"].items())

    for _, func in mod.functions.items():
        if hasattr(func, "body"):
            post_order_visit(func.body, visit)
    # the same buffer in several blocks' maps (a kernel's root and its launch block) must hold one
    # layout, or a record per buffer name could not be right
    unique: dict[str, tuple[Any, Any]] = {}
    for buffer, layout in found:
        first = unique.setdefault(str(buffer.name), (buffer, layout))
        assert str(first[1]) == str(layout), f"two layouts for {buffer.name}"
    return list(unique.values())


def _ints(values: Any) -> tuple[int, ...]:
    import tvm

    analyzer = tvm.arith.Analyzer()
    return tuple(int(analyzer.simplify(value)) for value in values)


def _truth_of(buffer: Any, layout: Any) -> BufferTruth:
    fragment = type(layout).__name__ == "Fragment"
    truth = BufferTruth(
        name=str(buffer.name),
        scope=str(buffer.scope()),
        kind=type(layout).__name__,
        input_shape=[int(d) for d in layout.get_input_shape()],
        output_shape=[int(d) for d in layout.get_output_shape()],
        text=str(layout),
    )
    replicas = 1
    if fragment:
        truth.threads = int(layout.get_thread_size())
        truth.replicate = replicas = int(layout.replicate_size)
        truth.thread_range = (int(layout.thread_range.min), int(layout.thread_range.extent))
    with_replica = len(layout.get_forward_vars()) == len(truth.input_shape) + 1
    every = list(product(*(range(d) for d in truth.input_shape)))
    for coords in random.Random(truth.name).sample(every, min(SAMPLES, len(every))):
        for replica in range(replicas):
            args = [replica, *coords] if with_replica else list(coords)
            index = _ints(layout.map_forward_index(args))
            thread = _ints(layout.map_forward_thread(args))[0] if fragment else None
            truth.samples.append((coords, replica, index, thread))
    return truth


def layout_instrument(truth: Truth) -> Any:
    """A plain TVM instrument reading the layout maps right after each pass, from the layout pass on."""
    from tvm.ir.instrument import pass_instrument

    counter = [0]
    stack: list[int] = []

    @pass_instrument
    class LayoutOracle:
        def run_before_pass(self, mod: Any, info: Any) -> None:
            stack.append(counter[0])
            counter[0] += 1

        def run_after_pass(self, mod: Any, info: Any) -> None:
            index, name = stack.pop(), str(info.name)
            if truth.after_layout_pass is None and not name.endswith("LayoutInference"):
                return
            found = _layout_map(mod)
            if truth.after_layout_pass is None:
                truth.after_layout_pass = [_truth_of(b, lay) for b, lay in found]
            truth.texts_after[index] = (name, {str(b.name): str(lay) for b, lay in found})

    return LayoutOracle()


class Lowered:
    """Each kernel lowered on a target when a test first asks for it, traced, with the oracle
    instrument in the same lowering (a case only the sweeps check is not lowered in make test)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.cases: dict[tuple[str, str], tuple[Trace, Truth]] = {}

    def case(self, kernel: str, target: str) -> tuple[Trace, Truth]:
        if (kernel, target) not in self.cases:
            self.cases[(kernel, target)] = self._lower(kernel, target)
        return self.cases[(kernel, target)]

    def run(self, kernel: str, target: str) -> KernelRun:
        (run,) = self.case(kernel, target)[0].select(kernel, target)
        return run

    def _lower(self, kernel: str, target: str) -> tuple[Trace, Truth]:
        from irtrace.lowering.api import RecordRequest, prepare_request
        from irtrace.lowering.recorder import LoweringOptions, RunHeader, record_lowering
        from irtrace.targets.specs import parse_spec

        spec = KERNELS[kernel][0]
        path = self.folder / f"{kernel}-{target.replace(':', '_')}.jsonl"
        truth = Truth()
        with TraceWriter(path) as writer:
            (prepared,) = prepare_request(RecordRequest(parse_spec(spec), (target,), {}, name=kernel))
            assert prepared.built is not None, prepared.error
            record_lowering(
                prepared.built.func,
                writer,
                RunHeader(kernel, spec),
                LoweringOptions(
                    prepared.target,
                    prepared.tvm_target,
                    prepared.pass_configs,
                    instruments=(layout_instrument(truth),),
                ),
            )
        return load_trace(path), truth


@pytest.fixture(scope="module")
def lowered(tmp_path_factory: pytest.TempPathFactory) -> Lowered:
    return Lowered(tmp_path_factory.mktemp("layouts"))


SWEEP_ONLY = {("flash_attention", "metal"), ("row_reduce", "metal")} | {
    (kernel, "cuda:sm_80") for kernel in KERNELS
}
"""Cases the sweeps check (a lowering each, about 1.5 s on 2 cores): make test keeps one kernel
on Metal (its GEMM, where layout inference gives no buffer a layout) and every kernel on sm_90
and gfx942."""


CASES = [(kernel, target) for kernel, (_, targets) in KERNELS.items() for target in targets]
CASE_PARAMS = [pytest.param(*case, marks=[pytest.mark.sweep] if case in SWEEP_ONLY else []) for case in CASES]


def _check_buffer(recorded: BufferLayout, truth: BufferTruth) -> None:
    assert recorded.buffer == truth.name
    assert recorded.scope == truth.scope
    assert recorded.kind == truth.kind.lower()
    assert recorded.input_shape == truth.input_shape
    assert recorded.output_shape == truth.output_shape
    assert recorded.text == truth.text
    assert recorded.threads == truth.threads
    assert recorded.replicate == truth.replicate
    if truth.thread_range is not None:
        assert (recorded.thread_offset, recorded.threads) == truth.thread_range
    assert len(list(elements(recorded))) == len(list(product(*(range(d) for d in truth.input_shape))))
    for coords, replica, index, thread in truth.samples:
        assert forward_index(recorded, coords, replica) == index, (truth.name, coords, replica)
        if thread is not None:
            assert forward_thread(recorded, coords, replica) == thread, (truth.name, coords, replica)


@pytest.mark.parametrize(("kernel", "target"), CASE_PARAMS)
def test_layouts_after_the_layout_pass_are_tilelangs(lowered: Lowered, kernel: str, target: str) -> None:
    trace, truth = lowered.case(kernel, target)
    run = lowered.run(kernel, target)
    assert truth.after_layout_pass is not None, "the layout pass did not run"
    if not truth.after_layout_pass:  # Metal's GEMM: layout inference gives no buffer a layout
        assert run.layouts == ()
        (shown,) = gather(trace, kernel, target)
        assert shown.none_because is not None and "inferred none" in shown.none_because
        return
    first = run.layouts[0]
    assert run.passes[first.after].name.endswith("LayoutInference")
    assert [b.buffer for b in first.layouts] == [t.name for t in truth.after_layout_pass]
    for recorded, buffer_truth in zip(first.layouts, truth.after_layout_pass, strict=True):
        _check_buffer(recorded, buffer_truth)


@pytest.mark.parametrize(("kernel", "target"), CASE_PARAMS)
def test_later_layout_records_follow_every_change(lowered: Lowered, kernel: str, target: str) -> None:
    """Each record equals TileLang's layouts after its pass, and every change of them has a record."""
    _, truth = lowered.case(kernel, target)
    if kernel == "fp8_quant":  # the case this test is here for: a later pass changed the layouts
        assert len(lowered.run(kernel, target).layouts) > 1
    run = lowered.run(kernel, target)
    recorded = {record.after: record for record in run.layouts}
    previous: dict[str, str] | None = None
    for index, (name, texts) in sorted(truth.texts_after.items()):
        if index in recorded:
            assert run.passes[index].raw_name == name
            assert {b.buffer: b.text for b in recorded[index].layouts} == texts, (index, name)
        elif texts and texts != previous and previous is not None:
            pytest.fail(f"the layouts changed after {name} (pass {index}) and the trace has no record")
        if texts:
            previous = texts
        elif previous is not None:
            break  # lowered away: the recorder stops looking


_UNTRACED = """
import json, sys
import tilelang, tvm
from tvm.ir.instrument import pass_instrument
from tvm.tirx.stmt_functor import post_order_visit
from irtrace.targets.specs import parse_spec
from irtrace.lowering.api import RecordRequest, prepare_request

class Enough(Exception):
    pass

@pass_instrument
class StopAfterLayouts:
    def run_after_pass(self, mod, info):
        if str(info.name).endswith("LayoutInference"):
            found = {}
            def visit(node):
                annotations = getattr(node, "annotations", None)
                if annotations is not None and "layout_map" in annotations:
                    found.update({str(b.name): str(lay) for b, lay in annotations["layout_map"].items()})
            for _, func in mod.functions.items():
                if hasattr(func, "body"):
                    post_order_visit(func.body, visit)
            seen.append(found)
            raise Enough()

result = {}
for item in sys.argv[1:]:
    name, spec, target = item.split("|")
    (prepared,) = prepare_request(RecordRequest(parse_spec(spec), (target,), {}, name=name))
    seen = []
    config = dict(prepared.pass_configs)
    try:
        with tvm.transform.PassContext(opt_level=3, config=config, instruments=[StopAfterLayouts()]):
            with prepared.tvm_target:
                tilelang.lower(prepared.built.func, target=prepared.tvm_target)
    except Exception:
        pass
    result[name + "|" + target] = seen[0] if seen else None
print(json.dumps(result))
"""


def _untraced_texts(cases: list[tuple[str, str]]) -> dict[str, dict[str, str] | None]:
    items = [f"{kernel}|{KERNELS[kernel][0]}|{target}" for kernel, target in cases]
    done = subprocess.run(
        [sys.executable, "-c", _UNTRACED, *items], capture_output=True, text=True, cwd=ROOT, timeout=600
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def _compare_untraced(lowered: Lowered, cases: list[tuple[str, str]]) -> None:
    for key, texts in _untraced_texts(cases).items():
        kernel, target = key.split("|")
        run = lowered.run(kernel, target)
        assert texts is not None, f"{key}: the untraced lowering never reached the layout pass"
        recorded = {b.buffer: b.text for b in run.layouts[0].layouts} if run.layouts else {}
        assert recorded == texts, key


@pytest.mark.sweep  # 11 s on 2 cores: with the sweeps, to keep make test within 10 minutes
def test_layouts_equal_an_untraced_lowering_in_another_process(lowered: Lowered) -> None:
    _compare_untraced(
        lowered, [("gemm", "cuda:sm_90"), ("row_reduce", "hip:gfx942"), ("flash_attention", "metal")]
    )


@pytest.mark.sweep
def test_every_case_equals_an_untraced_lowering(lowered: Lowered) -> None:
    _compare_untraced(lowered, CASES)


def test_cli_json_is_the_trace(lowered: Lowered, tmp_path: Path) -> None:
    """``irtrace layouts --json`` gives every recorded field of every buffer, and its threads."""
    from irtrace.facts.layout_view import layouts_document

    trace, case_truth = lowered.case("flash_attention", "cuda:sm_90")
    document = layouts_document(gather(trace, "flash_attention", "cuda:sm_90"))
    (run,) = document["runs"]
    truth = case_truth.after_layout_pass
    assert truth is not None
    buffers = run["layouts"][0]["buffers"]
    assert [b["buffer"] for b in buffers] == [t.name for t in truth]
    for buffer, buffer_truth in zip(buffers, truth, strict=True):
        assert buffer["text"] == buffer_truth.text
        if buffer_truth.kind == "Fragment":
            per_thread = 1
            for dim in buffer_truth.output_shape:
                per_thread *= dim
            assert buffer["elements_per_thread"] == per_thread
        else:
            assert buffer["elements_per_thread"] is None and buffer["swizzle"]
