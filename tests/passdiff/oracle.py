"""The independent route to a pipeline's passes: a plain TVM instrument that prints synchronously.

``run_before_pass`` keeps ``str(mod)``, ``run_after_pass`` prints it again, as TileLang's
``tilelang/tools/lower_trace`` does; pass order is ``run_before_pass`` order and nesting is the
stack of passes still running. The kernel is loaded from its file and lowered with
``tilelang.lower`` directly: nothing of irtrace's recorder or of passdiff is involved.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass
class OraclePass:
    name: str
    """The name TVM reports (``pass_fn`` for TileLang's anonymous checkers)."""
    parent: str | None
    """Name of the pass it ran inside, ``None`` at top level."""
    before: str
    after: str | None = None
    """``None`` when the pass raised."""


def load_kernel_module(path: Path) -> Any:
    spec = importlib.util.spec_from_file_location(f"oracle_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def oracle_passes(func: Any, target: str, configs: dict[str, Any] | None = None) -> list[OraclePass]:
    """Every pass of ``tilelang.lower(func)`` for ``target`` (an irtrace target name).

    A lowering that raises keeps the passes up to the one that raised (its ``after`` is ``None``).
    """
    import tilelang
    import tvm
    from tvm.ir.instrument import pass_instrument

    from irtrace.lowering.tvm_targets import make_tvm_target
    from irtrace.targets.backends import get_target

    seen: list[OraclePass] = []
    running: list[OraclePass] = []

    @pass_instrument
    class SynchronousPrint:
        def run_before_pass(self, mod: Any, info: Any) -> None:
            entry = OraclePass(str(info.name), running[-1].name if running else None, str(mod))
            seen.append(entry)
            running.append(entry)

        def run_after_pass(self, mod: Any, info: Any) -> None:
            running.pop().after = str(mod)

    tvm_target = make_tvm_target(get_target(target))
    try:
        with (
            tvm.transform.PassContext(opt_level=3, config=configs or {}, instruments=[SynchronousPrint()]),
            tvm_target,
        ):
            tilelang.lower(func, target=tvm_target)
    except Exception:  # a failing pipeline is part of what is observed
        pass
    return seen
