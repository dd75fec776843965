"""What mapping the kernel source to Python lines costs (``irtrace.lowering.kernel_source_spans``,
with ``--source-map``), against the IR maps the same recording already makes, in one process.

Lowers the bundled GEMM for ``cuda:sm_90a`` (or ``--target``) once with a codegen hook keeping the
module codegen received and every pass's output module, then times, in CPU seconds (median of
``--repeat``): the kernel-source map (module copy, codegen with TileLang's ``#line`` directives,
matching), the copy alone, and the IR maps of all the pass outputs (``module_spans`` each), with
and without the facts that carrying a line over a pass needs (``carry=False``: the maps as they were
before lines were carried). Ends with ``RESULT kernel_source_ms=<x> ir_maps_ms=<y> ratio=<x/y>
ir_maps_plain_ms=<z> carry_ratio=<y/z>``.

    .venv/bin/python bench/kernel_source_map_cost.py [--repeat 7] [--target cuda:sm_90a] [--smoke]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def cpu_median(work: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        began = time.process_time()
        work()
        times.append(time.process_time() - began)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--target", default="cuda:sm_90a")
    parser.add_argument("--smoke", action="store_true", help="one repeat of a 256-sized GEMM, for CI")
    args = parser.parse_args()
    size = 256 if args.smoke else 1024
    if args.smoke:
        args.repeat = 1
    sys.path.insert(0, str(ROOT))
    import tilelang
    import tvm
    from tilelang.instrumentation import PassInstrumentationTool, register_pass_instrumentation_tool
    from tvm.ir.instrument import pass_instrument

    from irtrace.lowering.api import RecordRequest, prepare_request
    from irtrace.lowering.carry_rules import carry_spans
    from irtrace.lowering.kernel_source_spans import kernel_source_spans
    from irtrace.lowering.spans import module_spans
    from irtrace.targets.specs import parse_spec

    seen: dict[str, Any] = {}
    modules: list[tuple[Any, str]] = []

    class KeepCodegen(PassInstrumentationTool):
        def run_codegen(self, event: Any, next_call: Callable[[], Any]) -> Any:
            result = next_call()
            if "codegen" not in seen:
                seen["codegen"] = (event.mod, event.target, str(event.name), str(result.inspect_source()))
            return result

    @pass_instrument
    class KeepModules:
        def run_after_pass(self, mod: Any, info: Any) -> None:
            modules.append((mod, str(mod)))

    register_pass_instrumentation_tool("bench-kernel-source-map", KeepCodegen)
    spec = parse_spec(f"{ROOT / 'examples' / 'gemm.py'}::matmul({size}, {size}, {size})")
    (prepared,) = prepare_request(RecordRequest(spec, (args.target,), {}))
    assert prepared.built is not None
    context = tvm.transform.PassContext(
        opt_level=3, config=prepared.pass_configs, instruments=[KeepModules()]
    )
    with context, prepared.tvm_target:
        tilelang.lower(prepared.built.func, target=prepared.tvm_target)
        mod, target, name, source = seen["codegen"]
        kernel = cpu_median(lambda: kernel_source_spans(mod, target, name, source), args.repeat)
        copy = cpu_median(lambda: tvm.ir.load_json(tvm.ir.save_json(mod)), args.repeat)
    repeat = max(1, args.repeat // 3)

    def carried_maps() -> None:
        carry: list[Any] = []
        for m, text in modules:
            spans = module_spans(m, text)
            _, carry, _ = carry_spans(carry, spans.facts, spans.context)

    ir_maps = cpu_median(carried_maps, repeat)
    plain = cpu_median(lambda: [module_spans(m, text, carry=False) for m, text in modules], repeat)
    print(
        f"{args.target}: kernel-source map {kernel * 1e3:.1f} ms (module copy {copy * 1e3:.1f} ms); "
        f"IR maps of {len(modules)} pass outputs {ir_maps * 1e3:.1f} ms "
        f"({plain * 1e3:.1f} ms without carrying)"
    )
    ratio = kernel / ir_maps
    print(
        f"RESULT kernel_source_ms={kernel * 1e3:.1f} ir_maps_ms={ir_maps * 1e3:.1f} ratio={ratio:.3f} "
        f"ir_maps_plain_ms={plain * 1e3:.1f} carry_ratio={ir_maps / plain:.3f}"
    )


if __name__ == "__main__":
    main()
