"""How often the instance resolver is right with nothing written, buffer by buffer, on kernel files
it was not tuned on (TileLang's own examples: pass their folder).

For each file, two child processes:
- the oracle runs the program's own calls, as ORACLES.md "Instances with nothing written" says: its
  entry point, then each ``test_*`` function it defines, with every compilation intercepted (the
  PrimFunc lowered for sm_90 up to layout inference, the program handed a kernel that does
  nothing; ``cuda`` tensors made on the CPU). Each kernel's first instance gives the truth.
- ours resolves each kernel as the tools do (``irtrace.lowering.resolve``: the entry point with
  GPU work made harmless, calls in the file, symbols), builds it and reads the same buffers.

A buffer is right when its hint (shape, dtype, scope, layout) equals the oracle's, unknown when
ours shows a symbol or could not be built, wrong otherwise. Buffers of kernels the program never
builds have no truth and are not counted.

    python bench/resolver_heldout.py /path/to/tilelang/examples [--limit N]
    python bench/resolver_heldout.py --smoke          # one small example of TileLang's, in the repo

Ends with ``RESULT right=... unknown=... wrong=... buffers=... files=... right_pct=...``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import runpy
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
ORACLE_HELPERS = ROOT / "tests" / "lsp"
TARGET = "cuda:sm_90"
SMOKE = [ROOT / "tests" / "data" / "tilelang_examples" / "example_elementwise_add.py"]
CHILD_TIMEOUT_S = 300

Hints = dict[str, str]
"""``"line"`` -> hint, for each buffer with a line."""


def _hints(func: Any) -> Hints:
    sys.path.insert(0, str(ORACLE_HELPERS))
    from oracle import compiler_buffers, expected_hint

    buffers = compiler_buffers(func, TARGET)
    return {str(b.line): expected_hint(b, TARGET) for b in buffers if b.line is not None}


# ----------------------------------------------------------------------------- the oracle


class _DoesNothing:
    """What a compilation gives the program: no GPU work, no checks, 0 ms."""

    def __init__(self, config: dict[str, Any] | None = None) -> None:
        self.config = config or {}

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return _DoesNothing()

    def __getattr__(self, name: str) -> Any:
        return _DoesNothing()

    def __format__(self, spec: str) -> str:
        return "0"

    def __float__(self) -> float:
        return 0.0


def oracle(path: str) -> dict[str, Hints]:
    """Per kernel (its first buffer line), the hints of the first instance the program builds."""
    import tilelang
    import torch
    from tilelang.autotuner.tuner import AutoTuneImpl
    from tilelang.jit import JITImpl
    from torch.overrides import TorchFunctionMode

    seen: dict[str, Hints] = {}
    real_lower = tilelang.lower

    def lower(func: Any) -> None:
        tilelang.lower = real_lower
        try:
            hints = _hints(func)
        except Exception:
            hints = {}
        finally:
            tilelang.lower = compile_entry
        if hints:
            seen.setdefault(min(hints, key=int), hints)

    def compile_entry(func: Any, *args: Any, **kwargs: Any) -> Any:
        lower(func)
        return _DoesNothing()

    def jit_compile(self: Any, *args: Any, **kwargs: Any) -> Any:
        lower(self.get_tir(*args, **kwargs))
        return _DoesNothing()

    def tune(self: Any, *args: Any, **kwargs: Any) -> Any:
        kwargs.pop("__return_kernel", None)
        configs = self.configs(*args, **kwargs) if callable(self.configs) else self.configs
        first = {k: v for k, v in dict(next(iter(configs))).items() if not k.startswith("_")}
        given = set(self.jit_impl.signature.bind_partial(*args, **kwargs).arguments)
        if set(first) <= given:  # TileLang skips tuning when every tunable value is given
            lower(self.jit_impl.get_tir(*args, **kwargs))
            return _DoesNothing()
        lower(self.jit_impl.get_tir(*args, **{**kwargs, **first}))  # the first config stands in
        return _DoesNothing(first)

    class CudaOnCpu(TorchFunctionMode):
        def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            kwargs = dict(kwargs or {})
            if func in (torch.Tensor.cuda,):
                return args[0]
            if str(kwargs.get("device", "")).startswith("cuda"):
                kwargs["device"] = "cpu"
            return func(*args, **kwargs)

    tilelang.compile = tilelang.lower = compile_entry
    JITImpl.compile = jit_compile  # type: ignore[method-assign]
    AutoTuneImpl.__call__ = tune  # type: ignore[method-assign]
    torch.testing.assert_close = lambda *args, **kwargs: None
    torch.cuda.synchronize = lambda *args, **kwargs: None
    sys.argv = [path]
    sys.path.insert(0, str(Path(path).resolve().parent))
    namespace: dict[str, Any] = {}
    with CudaOnCpu():
        try:
            namespace = runpy.run_path(path, run_name="__main__")
        except BaseException:  # the program's own failure ends its calls, not the count
            namespace = runpy.run_path(path, run_name="heldout_module")
        for name, value in list(namespace.items()):
            if name.startswith("test_") and callable(value) and not hasattr(value, "get_tir"):
                try:
                    value()
                except BaseException:  # a test that needs a GPU stops there
                    continue
    return seen


# ----------------------------------------------------------------------------- ours


def ours(path: str) -> dict[str, Hints]:
    """Per kernel, the hints of the instance the resolver takes with nothing written."""
    from irtrace.lowering.api import RecordRequest, bind_unit, build_unit, lowering_units
    from irtrace.lowering.resolve.candidates import InstanceSources
    from irtrace.lowering.resolve.source import scan_kernels
    from irtrace.targets.specs import parse_spec

    found: dict[str, Hints] = {}
    for kernel in scan_kernels(Path(path).read_text(encoding="utf-8")):
        request = RecordRequest(parse_spec(f"{path}::{kernel.name}"), (TARGET,), instances=InstanceSources())
        try:
            for unit in lowering_units(request):
                prepared = build_unit(unit, bind_unit(unit))
                if prepared.built is not None:
                    hints = _hints(prepared.built.func)
                    if hints:
                        found[min(hints, key=int)] = hints
        except Exception as error:  # a kernel that cannot be resolved counts as unknown
            print(f"{Path(path).name}::{kernel.name}: {type(error).__name__}", file=sys.stderr)
    return found


# ----------------------------------------------------------------------------- the count

_SYMBOL = re.compile(r"\[[^\]]*[A-Za-z_]")
"""A hint whose shape holds a name: the resolver showed a symbol, not a value."""


def child(mode: str, path: Path) -> dict[str, Hints] | None:
    env = {**os.environ, "PYTHONPATH": os.environ.get("PYTHONPATH", str(ROOT))}
    try:
        done = subprocess.run(
            [sys.executable, __file__, f"--{mode}", str(path.resolve())],
            capture_output=True,
            text=True,
            timeout=CHILD_TIMEOUT_S,
            env=env,
            cwd=path.parent,
        )
    except subprocess.TimeoutExpired:
        return None
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    return json.loads(lines[-1]) if lines else None


def count(truth: dict[str, Hints], mine: dict[str, Hints]) -> tuple[int, int, int, list[str]]:
    right = unknown = wrong = 0
    wrongs: list[str] = []
    ours_by_line = {line: hint for hints in mine.values() for line, hint in hints.items()}
    for hints in truth.values():
        for line, hint in hints.items():
            got = ours_by_line.get(line)
            if got == hint:
                right += 1
            elif got is None or _SYMBOL.match(got):
                unknown += 1
            else:
                wrong += 1
                wrongs.append(f"line {line}: {got} (program: {hint})")
    return right, unknown, wrong, wrongs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="*", type=Path, help="kernel files, or folders of example_*.py")
    parser.add_argument("--smoke", action="store_true")
    parser.add_argument("--limit", type=int, default=0, help="at most N files (0: all)")
    parser.add_argument("--oracle", help=argparse.SUPPRESS)
    parser.add_argument("--ours", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.oracle or args.ours:
        result = oracle(args.oracle) if args.oracle else ours(args.ours)
        print(json.dumps(result), flush=True)
        os._exit(0)  # what the program started (threads, pools) does not hold the answer back
    files = list(SMOKE) if args.smoke or not args.folders else []
    for folder in args.folders:
        found = [folder] if folder.is_file() else sorted(folder.rglob("example_*.py"))
        files += [path for path in found if path.is_file()]
    if args.limit:
        files = files[: args.limit]
    totals = [0, 0, 0]
    counted = 0
    began = time.perf_counter()
    for path in files:
        truth = child("oracle", path)
        if not truth:
            print(f"{path.name}: the program builds no kernel here (skipped)")
            continue
        mine = child("ours", path) or {}
        right, unknown, wrong, wrongs = count(truth, mine)
        counted += 1
        for index, value in enumerate((right, unknown, wrong)):
            totals[index] += value
        print(f"{path.name}: right {right}, unknown {unknown}, wrong {wrong}")
        for line in wrongs:
            print(f"   wrong {line}")
    right, unknown, wrong = totals
    buffers = right + unknown + wrong
    percent = 100.0 * right / buffers if buffers else 0.0
    print(
        f"RESULT right={right} unknown={unknown} wrong={wrong} buffers={buffers} files={counted} "
        f"right_pct={percent:.1f} seconds={time.perf_counter() - began:.0f}"
    )


if __name__ == "__main__":
    main()
