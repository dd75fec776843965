"""Every bundled example lowered on every target of its dialect, once per test session.

One recording serves the exactness test (each lowering is watched by an independent synchronous
printer), the traced-equals-untraced test (kernel sources from plain ``tilelang.lower`` in a
separate process, run meanwhile on the other core), the backend tests and the coverage matrix.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass, field, replace
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from irtrace.lowering.api import prepare_request
from irtrace.lowering.manifest import load_manifest
from irtrace.lowering.recorder import (
    CaptureOptions,
    LoweringOptions,
    RunHeader,
    record_failure,
    record_lowering,
)
from irtrace.trace.model import PHASE_CODEGEN, KernelRun, Trace
from irtrace.trace.reader import load_trace
from irtrace.trace.writer import TraceWriter

from ..conftest import EXAMPLES, ROOT

MANIFEST = EXAMPLES / "irtrace.toml"
EVERY_TARGET = ("all",)
"""What the coverage records: every target of each example's dialect, failures included."""

# Kernels are built anew for each lowering: tl.LowerTileOp renames the input PrimFunc's thread
# variable in place, so lowering one PrimFunc object twice can name variables differently.
_UNTRACED = """
import json, sys
from dataclasses import replace
import tilelang, tvm
from irtrace.lowering.api import prepare_request
from irtrace.lowering.manifest import load_manifest

sources = {}
for request in load_manifest(sys.argv[1]):
    for prepared in prepare_request(replace(request, targets=tuple(sys.argv[2:]))):
        key = prepared.name + "|" + prepared.target.name
        if prepared.built is None:
            sources[key] = None
            continue
        try:
            with tvm.transform.PassContext(opt_level=3, config=prepared.pass_configs), prepared.tvm_target:
                sources[key] = tilelang.lower(prepared.built.func, target=prepared.tvm_target).kernel_source
        except Exception:
            sources[key] = None
print(json.dumps(sources))
"""


@dataclass
class OraclePass:
    """A pass as a synchronous ``str(mod)`` instrument saw it."""

    name: str
    before: str
    after: str | None = None


def synchronous_printer(seen: list[OraclePass]) -> Any:
    """A plain TVM instrument printing the module before and after every pass, on the spot."""
    from tvm.ir.instrument import pass_instrument

    stack: list[OraclePass] = []

    @pass_instrument
    class SynchronousPrint:
        def run_before_pass(self, mod: Any, info: Any) -> None:
            entry = OraclePass(str(info.name), str(mod))
            seen.append(entry)
            stack.append(entry)

        def run_after_pass(self, mod: Any, info: Any) -> None:
            stack.pop().after = str(mod)

    return SynchronousPrint()


def disagreements(trace: Trace, run: KernelRun, expected: list[OraclePass]) -> list[str]:
    """Where the run's pass records differ from what the synchronous printer saw."""
    # codegen itself is the recorder's own step (its snapshot is the kernel source), not a TVM pass
    records = [p for p in run.passes if not (p.phase == PHASE_CODEGEN and p.name == "codegen")]
    names = [p.raw_name for p in records]
    if names != [p.name for p in expected]:
        return [f"pass order differs: recorded {names}, oracle {[p.name for p in expected]}"]
    wrong = []
    for record, truth in zip(records, expected, strict=True):
        label = f"#{record.index} {record.name}"
        if trace.ir_before(record) != truth.before:
            wrong.append(f"{label}: IR before differs")
        if record.failed:
            continue  # a failed pass has no IR after it
        if trace.ir_after(record) != truth.after:
            wrong.append(f"{label}: IR after differs")
        if record.changed != (truth.before != truth.after):
            wrong.append(f"{label}: recorded changed={record.changed}, the synchronous print disagrees")
    return wrong


def record_against_oracle(
    writer: TraceWriter, prepared: Any, capture: CaptureOptions | None = None
) -> tuple[Any, list[str]]:
    """Record one prepared kernel with a synchronous printer watching the same lowering: the
    result, and where its records differ from that printer."""
    seen: list[OraclePass] = []
    result = record_lowering(
        prepared.built.func,
        writer,
        RunHeader(prepared.name, prepared.spec.text, prepared.args),
        LoweringOptions(
            prepared.target,
            prepared.tvm_target,
            prepared.pass_configs,
            instruments=(synchronous_printer(seen),),
            capture=capture or CaptureOptions(),
        ),
    )
    return result, disagreements(writer.trace(), result.run, seen)


@dataclass
class Coverage:
    """The session's recording of every example on every target."""

    trace: Trace
    trace_text: str
    """The trace file's content, for tests that run the CLI on it."""
    disagreements: dict[tuple[str, str], list[str]] = field(default_factory=dict)
    """(kernel, target) -> where the records differ from the synchronous printer."""
    untraced_sources: dict[tuple[str, str], str | None] = field(default_factory=dict)
    """(kernel, target) -> kernel source of a plain ``tilelang.lower``; ``None`` when it failed."""

    def run(self, kernel: str, target: str) -> KernelRun:
        (run,) = self.trace.select(kernel, target)
        return run


def record_coverage(path: Path) -> Coverage:
    untraced = subprocess.Popen(
        [sys.executable, "-c", _UNTRACED, str(MANIFEST), *EVERY_TARGET],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        cwd=ROOT,
    )
    found: dict[tuple[str, str], list[str]] = {}
    with TraceWriter(path) as writer:
        for request in load_manifest(MANIFEST):
            for prepared in prepare_request(replace(request, targets=EVERY_TARGET)):
                if prepared.built is None:
                    assert prepared.error is not None
                    record_failure(
                        writer,
                        prepared.target,
                        kernel=prepared.name,
                        spec=prepared.spec.text,
                        args=prepared.args,
                        error=prepared.error.message,
                    )
                    continue
                # every print as late as the design allows
                _, wrong = record_against_oracle(writer, prepared, CaptureOptions(hold_prints=True))
                found[(prepared.name, prepared.target.name)] = wrong
    output, _ = untraced.communicate()
    assert untraced.returncode == 0, "the untraced lowering process failed"
    sources = {
        tuple(key.split("|", 1)): source
        for key, source in json.loads(output.strip().splitlines()[-1]).items()
    }
    return Coverage(load_trace(path), path.read_text(), found, sources)  # type: ignore[arg-type]


@pytest.fixture(scope="session")
def coverage(tmp_path_factory: pytest.TempPathFactory) -> Coverage:
    """Every bundled example lowered on every target of its dialect (about 150 lowerings)."""
    return record_coverage(tmp_path_factory.mktemp("coverage") / "coverage.jsonl")


@cache  # two test files parametrize over it at collection, in every xdist worker
def coverage_cases() -> list[tuple[str, str]]:
    """(kernel, target) for every example and every target of its dialect, without lowering."""
    from irtrace.lowering.loader import load_spec_module, select_kernels
    from irtrace.targets.backends import resolve_targets

    cases = []
    for request in load_manifest(MANIFEST):
        loaded = load_spec_module(request.spec.path, request.base_dir)
        for kernel in select_kernels(loaded, request.spec):
            name = request.name or kernel.name
            cases += [(name, t.name) for t in resolve_targets(EVERY_TARGET, loaded.dialect)]
    return cases
